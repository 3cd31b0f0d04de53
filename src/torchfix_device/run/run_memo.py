"""A warm run over an unchanged tree answers from the cache without learning the run's facts again.

Before it looks at any file, a run learns facts over all of them (:func:`~torchfix_device.run.
run_facts.project_facts`: the classes that move themselves, star imports, what files import from each
other...), and what a file's facts say is part of the key of its cache entries. On a tree of a
few hundred files that is seconds, where the cached results themselves take a tenth of one.

So a run that learnt them keeps, next to the cache entries, one *run entry*: each file's salt
(:attr:`~torchfix_device.run.cache.ResultCache.salt`, what its facts gave), for a run over exactly
these files with these bytes, from this folder, with these roots, codemods, options and Python,
and every answer the disk gave the facts beyond the files' bytes
(:mod:`torchfix_device.files.disk_log`: module files found or not, package folders listed,
modules read that the run does not hold). A later run with the same setting finds it; it is
used only when every file has the same bytes and every answer is the same again, and then only
when every file's result is in the cache. Anything else, and the run learns the facts as before.

A run entry is not trusted, as a file's entry is not: it carries the format, the tool's version and
a SHA-256 checksum of what it holds, and a malformed one reads as a miss (and is written again).
There is one run entry per setting (folder, roots, options): a run over edited files replaces it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from torchfix_device import __version__
from torchfix_device.files.disk_log import observations, still_true
from torchfix_device.files.safe_paths import read_regular, root_of
from torchfix_device.files.sources import atomic_write
from torchfix_device.options import RunOptions
from torchfix_device.results import FileResult
from torchfix_device.run.job import file_salt, process_file

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.run.cache import ResultCache

FORMAT = "1"
FACT_OPTIONS = frozenset({
    "write", "own_move_classes", "cuda_taking_nothing", "known_classes", "star_imports", "unimported",
    "project_attributes", "legacy_functions",
})
"""Options left out of a run entry's setting: the facts themselves, and whether files are written
(an ``apply`` may use what a ``check`` kept)."""


Kept = Mapping[str, str]
"""Each file of the run (as the run names it) → its salt."""


class RunMemo:
    """The run entry of one setting (see the module docstring)."""

    def __init__(
        self, cache: "ResultCache", files: Sequence[Path], roots: Sequence[Path], options: RunOptions,
    ) -> None:
        setting = [  # the codemods selected are in the cache's salt
            FORMAT, __version__, sys.version, os.getcwd(), [os.path.abspath(r) for r in roots],
            {f.name: _plain(getattr(options, f.name)) for f in fields(options) if f.name not in FACT_OPTIONS},
        ]
        self.cache = cache
        self.entry = cache.folder / f"run-{_digest(cache.salt, json.dumps(setting, default=repr))}.json"
        contents = hashlib.sha256()
        for path in files if cache.usable else ():
            try:
                data: bytes | None = read_regular(path).data
            except OSError:
                data = None
            contents.update(json.dumps([str(path), hashlib.sha256(data).hexdigest() if data is not None else None]).encode())
        self.files = contents.hexdigest()

    def kept(self) -> Kept | None:
        """What the last run of this setting kept, if it is for these files and still holds."""
        if not self.cache.usable:
            return None
        try:
            data = json.loads(self.entry.read_bytes().decode("utf-8"))
            if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("version") == __version__):
                return None
            body = data["body"]
            if data["checksum"] != _checksum(body) or body["files"] != self.files:
                return None
            salts, seen = body["salts"], body["observations"]
            if not (isinstance(salts, dict) and all(isinstance(k, str) and _is_salt(v) for k, v in salts.items())):
                return None
            if not _observations(seen):
                return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if not still_true([tuple(o) for o in seen]):  # type: ignore[misc]
            return None
        return salts

    def keep(
        self, files: Sequence[Path], codemods: Sequence["CodemodRef | type[Codemod]"], options: RunOptions,
        cache: "ResultCache", noted: "dict[tuple[str, str], object]", limit: int,
    ) -> dict[str, str]:
        """Keep each file's salt in ``cache`` (as the run's facts in ``options`` key it), and what
        the disk told the facts (``noted``, modules read up to ``limit`` bytes); return the salts
        (the run's jobs key their entries with them, each made once)."""
        salts = {str(path): file_salt(path, codemods, options, cache) for path in files}
        if not self.cache.usable:
            return salts
        body = {"files": self.files, "salts": salts, "observations": observations(noted, limit)}
        data = {"format": FORMAT, "version": __version__, "body": body, "checksum": _checksum(body)}
        try:
            atomic_write(self.entry, json.dumps(data).encode("utf-8"), 0o600, durable=False)
        except OSError:
            pass
        return salts


def answered(
    kept: Kept, cache: "ResultCache", files: Sequence[Path], codemods: Sequence["CodemodRef | type[Codemod]"],
    options: RunOptions, roots: Sequence[Path],
) -> list[FileResult] | None:
    """Every file's result from the cache, keyed by the salts ``kept``; None as soon as one file has
    none (the run then learns its facts and goes as usual). Nothing is written here: the runner
    writes the changed files once every file is answered, where ``options.write``."""
    cache = cache.with_file_salts(kept)
    dry = replace(options, write=False)
    results: list[FileResult] = []
    for path in files:
        if str(path) not in kept:
            return None
        result = process_file(path, codemods, options=dry, cache=cache, cached_only=True, root=root_of(path, roots))
        if result is None:
            return None
        results.append(result)
    return results


def _plain(value: object) -> object:
    """``value`` as JSON that does not depend on the order of a set."""
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)  # type: ignore[type-var]
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _checksum(body: object) -> str:
    return _digest(FORMAT, __version__, json.dumps(body, sort_keys=True, separators=(",", ":")))


def _is_salt(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _observations(seen: object) -> bool:
    return isinstance(seen, list) and all(
        isinstance(o, list) and len(o) == 3 and isinstance(o[0], str) and isinstance(o[1], str) for o in seen
    )
