"""Run settings beyond the codemod selection, passed as one object through the runner.

One frozen, picklable value so that adding a setting does not change every signature between
the command line and the codemods (and so that it can cross into worker processes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from pathlib import Path


DEFAULT_SECONDS = 120.0
"""Processor seconds one file's transform may take by default (``file-time-limit``)."""
DEFAULT_MEMORY = 2 * 1024**3
"""Bytes one file's transform may add to the process by default (``file-memory-limit``)."""


@dataclass(frozen=True)
class RunOptions:
    unsafe_fixes: bool = False
    """Apply fixes marked unsafe too (``--unsafe-fixes``); ask :meth:`applies`, not this field."""
    write: bool = False
    """Rewrite files in place (``apply``, ``check --fix``); False for a dry run or a check."""
    device_expression: str | None = None
    """The value of an inserted device binding (``[tool.torchfix-device] device-expression``);
    None for ``torch.device("cuda" if torch.cuda.is_available() else "cpu")``."""
    include_generated: bool = False
    """Process files marked ``@generated`` in a comment (skipped by default)."""
    respect_gitignore: bool = True
    """Inside a git work tree, leave out files that ``.gitignore`` ignores."""
    report_unused_suppressions: bool = False
    """Also judge ``# torchfix-device: skip-file`` (the file is then analysed, never written)."""
    max_file_bytes: int | None = None
    """Files larger than this are skipped (``max-file-size``); None for the default, 1 MB."""
    force_exclude: bool = False
    """``--exclude`` patterns apply to files named on the command line too (``--force-exclude``)."""
    file_time_limit: float | None = DEFAULT_SECONDS
    """Processor seconds one file's transform may take (``file-time-limit``; None: no limit)."""
    file_memory_limit: int | None = DEFAULT_MEMORY
    """Bytes one file's transform may add to the process (``file-memory-limit``; None: no limit)."""
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    """``per-file-ignores``: (glob, codes) pairs, the globs relative to :attr:`per_file_root`
    (``!glob``: the files it does not match); see :func:`ignored_codes`."""
    per_file_root: str | None = None
    """The folder ``per-file-ignores`` globs are relative to (the configuration file's)."""
    own_move_classes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """For each file of the run (by the name its transform is given), the classes that define
    their own ``cuda()``/``to()`` it can reach by import
    (:mod:`torchfix_device.facts.project_classes`), filled in by the runner."""
    cuda_taking_nothing: frozenset[str] = frozenset()
    """Those of the classes above whose every ``cuda()`` in the run takes nothing but ``self``: a
    ``.cuda(...)`` with an argument is not theirs (filled in by the runner)."""
    known_classes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Where a file reaches classes that move themselves: the other classes of the run it reaches
    by import, whose instances do not (filled in by the runner)."""
    star_imports: Any = None
    """What the star imports of the run's files bind: a ``RunStars`` of
    :mod:`torchfix_device.facts.star_imports`, filled in by the runner (typed loosely: this module
    sits below the facts layer and imports none of it)."""
    unimported: frozenset[str] = frozenset()
    """The files of the run (by the name its transform is given) that no file of the run imports
    (nor may import dynamically), filled in by the runner: the run being taken as the project, a
    function of such a file is called only from the file itself."""
    project_attributes: Any = None
    """What the attributes of the classes each file imports from the run hold: a
    ``RunAttributes`` of :mod:`torchfix_device.facts.project_attributes`, filled in by the runner
    (typed loosely, as ``star_imports``)."""
    legacy_functions: Any = None
    """The legacy autograd Function classes of the run's files and the uses of their names that
    cannot be rewritten: a ``RunLegacyFunctions`` of :mod:`torchfix_device.facts.legacy_function_run`,
    filled in by the runner (typed loosely, as ``star_imports``)."""

    def known_classes_of(self, filename: str | None) -> frozenset[str]:
        return self.known_classes.get(filename, frozenset()) if filename is not None else frozenset()

    def own_move_classes_of(self, filename: str | None) -> frozenset[str]:
        return self.own_move_classes.get(filename, frozenset()) if filename is not None else frozenset()

    def applies(self, safe: bool) -> bool:
        """Whether a fix of this safety is applied in this run."""
        return safe or self.unsafe_fixes


DEFAULT_OPTIONS = RunOptions()


def ignored_codes(path: "Path", options: RunOptions) -> frozenset[str]:
    """The codes ``per-file-ignores`` leaves out for ``path``, as ruff matches them: a glob is
    matched against the file's path relative to :attr:`RunOptions.per_file_root` (``*`` crosses
    folders, ``**/x`` matches ``x`` at the top too), and a glob without ``/`` also against the
    file's name; ``!glob`` ignores the codes for every file the glob does not match."""
    if not options.per_file_ignores:
        return frozenset()
    import os
    from fnmatch import fnmatchcase

    absolute = os.path.abspath(path)
    root = options.per_file_root or os.getcwd()
    relative = os.path.relpath(absolute, root).replace(os.sep, "/")
    names = [relative, "/" + relative] if not relative.startswith("..") else [absolute.replace(os.sep, "/")]
    ignored: set[str] = set()
    for pattern, codes in options.per_file_ignores:
        negated = pattern.startswith("!")
        glob = pattern[1:] if negated else pattern
        matches = any(fnmatchcase(name, glob) for name in names) or (
            "/" not in glob and fnmatchcase(os.path.basename(absolute), glob)
        )
        if matches != negated:
            ignored |= codes
    return frozenset(ignored)


def default_jobs() -> int:
    """The number of cores this process may run on."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
