"""What a run produces: one :class:`FileResult` per file, the engine's :class:`TransformOutput`,
and the exceptions that carry results or name a codemod bug.

Plain data, no libcst: the runner, the per-file job, the engine, the notebook support and every
output format read these, so they sit below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from torchfix_device.source import SourceFile
from torchfix_device.finding import Finding

Status = Literal["changed", "unchanged", "failed", "skipped", "refused"]
"""``refused``: a rewrite that was not written because git could not give the file back (it has
uncommitted changes); not a failure: the file was read and fixed, the user decides."""


@dataclass
class FileResult:
    path: Path
    display: str
    status: Status
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    """For ``failed``/``skipped``/``refused``: the reason, starting with ``line N:`` where there is one."""
    source: SourceFile | None = None
    new_text: str | None = None
    notes: list[str] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    """Findings silenced by a ``# noqa`` comment: neither reported nor rewritten."""
    skip_kind: str | None = None
    """For ``skipped``: a short tag the summary groups by (``@generated``, ``skip-file``, ...)."""
    unused_suppressions: list = field(default_factory=list)
    """``UnusedSuppression`` items, filled when the run is asked to judge suppressions."""
    cached: bool = False
    """The result came from the result cache (nothing was parsed)."""
    problems: list[str] = field(default_factory=list)
    """Parts of a processed file left as they are because they cannot be read (a notebook cell
    that does not parse: ``cell 3: line 2:5: syntax error: ...``); the rest was processed."""


@dataclass(frozen=True)
class TransformOutput:
    text: str
    findings: list[Finding]
    notes: list[str]
    suppressed: tuple[Finding, ...] = ()
    problems: tuple[str, ...] = ()
    """Parts left as they are because they cannot be read (see ``FileResult.problems``)."""


class InternalError(Exception):
    """A codemod produced code that does not compile (a bug in the codemod, not the input)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP: ``signum``) during :func:`torchfix_device.run.runner.run`: the
    results of the files finished before it.

    The file being processed at that moment is either unchanged (and not among ``results``) or
    fully rewritten (and among them: writes are atomic renames, and an interruption waits for
    the one under way).
    """

    def __init__(self, results: list[FileResult], done: int, total: int, signum: int = 2) -> None:
        super().__init__(f"interrupted after {done} of {total} files")
        self.results = results
        self.done = done
        self.total = total
        self.signum = signum


class WritesInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP: ``signum``) while rewrites held back for a check (git safety)
    were being written: ``written`` of ``total`` were; the results of the others are marked
    ``skipped`` (``interrupted``), their files unchanged."""

    def __init__(self, written: int, total: int, signum: int = 2) -> None:
        super().__init__(f"interrupted after writing {written} of {total} files")
        self.written = written
        self.total = total
        self.signum = signum
        self.results: list = []
        """Every result of the run, filled in by the command that was writing them."""
