"""A cache of transform results, so a second run over an unchanged tree parses nothing.

An entry is keyed by the file's bytes, the tool (its version and a hash of its own source files,
so an edited checkout never reads stale results), the selected codemods and the options that
change results (``--unsafe-fixes``, the device expression). It holds the transform's result —
the rewritten text when the file changes, the findings, the checkpoint notes, the findings
``# noqa`` suppressed — so ``apply`` still writes a file whose
cached result says it changes. A file that does not parse keeps its syntax error, for the
Python version that found it (CPython's parser places the error, and its grammar grows): the
error depends on nothing else, and a warm run over a tree holding one broken file should not
parse that file again, nor learn the run's facts again. Other failures (a codemod's internal
error, input nested too deeply for the parser) are not cached: they are analysed again.

Where the cache lives: ``.torchfix_device_cache/`` next to the nearest ``pyproject.toml`` above
the first path given (the file the settings are read from), with a ``.gitignore`` holding ``*``
inside it; without a ``pyproject.toml``, in ``$XDG_CACHE_HOME/torchfix-device`` (by default
``~/.cache/torchfix-device``), so no folder appears in arbitrary directories. Every entry is one
small JSON file written atomically (:func:`~torchfix_device.files.sources.atomic_write`), so parallel
workers share the cache safely. A cache that cannot be read or written is silently skipped.

The cache is not trusted: an entry carries the tool version, the key it was written for and a
SHA-256 checksum of both and of its result, and every field is type-checked when it is read.
An entry that does not validate (edited, torn, malformed, copied over another file's entry,
written by another version) reads as a miss: the file is analysed again and the entry rewritten.
A cached rewrite is compiled before it is used, like a fresh one (:mod:`torchfix_device.run.job`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
from dataclasses import asdict, fields
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, NamedTuple, Sequence

from torchfix_device import __version__
from torchfix_device.finding import Finding
from torchfix_device.files.pyproject import find_pyproject
from torchfix_device.files.selection import Marks
from torchfix_device.files.sources import atomic_write
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions

if TYPE_CHECKING:
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod

CACHE_DIR_NAME = ".torchfix_device_cache"
ENTRY_MODE = 0o600
"""Entries are readable by their owner only."""


class CachedResult(NamedTuple):
    new_text: str | None
    """The rewrite, or None when the file does not change."""
    findings: list[Finding]
    notes: list[str]
    suppressed: tuple[Finding, ...]
    marks: Marks
    """The file's ``@generated``/skip-file comments: whether a run skips it needs no tokenizing."""
    problems: tuple[str, ...] = ()
    """A notebook's cells left as they are, and why (``TransformOutput.problems``)."""
    error: str | None = None
    """The syntax error the file failed with (then nothing else is kept: no rewrite, no findings)."""


FORMAT = "7"


@lru_cache(maxsize=1)
def tool_fingerprint() -> str:
    """The version and a hash of this package's own ``.py`` files."""
    digest = hashlib.sha256(f"{__version__}|{FORMAT}".encode())
    package = package_root()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            pass
    return digest.hexdigest()


def package_root() -> Path:
    """The ``torchfix_device`` folder: every codemod and fact whose change must miss the cache."""
    return Path(__file__).resolve().parent.parent


def default_cache_folder(paths: Sequence[Path]) -> Path:
    """``.torchfix_device_cache`` next to the nearest ``pyproject.toml``, else the user cache."""
    pyproject = find_pyproject(paths[0] if paths else Path.cwd())
    if pyproject is not None:
        return pyproject.parent / CACHE_DIR_NAME
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchfix-device"


class ResultCache:
    """Transform results on disk, one JSON file per entry. Picklable: workers get a copy."""

    def __init__(
        self, folder: Path, codemods: Sequence["CodemodRef | type[Codemod]"], options: RunOptions = DEFAULT_OPTIONS
    ) -> None:
        """Entries keyed by the tool's own code, ``codemods`` and the options that change a result
        (whether unsafe fixes apply, the device expression)."""
        self.folder = folder
        codes = ",".join(c.code for c in codemods)
        settings = json.dumps({"unsafe": options.applies(safe=False), "device_expression": options.device_expression})
        self._salt = _chained(b"", f"{tool_fingerprint()}|{codes}|{settings}|".encode())
        self._usable = self._prepare()
        self.file_salts: Mapping[str, str] | None = None
        """Each file's salt as a run kept it (:mod:`torchfix_device.run.run_memo`), used instead of
        the salt the run's facts give: a warm run then need not learn them."""

    @property
    def usable(self) -> bool:
        return self._usable

    @property
    def salt(self) -> str:
        """What keys every entry of this cache with the file's bytes: a SHA-256 chained over the
        tool, the codemods, the options, then what each ``for_*`` added (32 bytes, hex)."""
        return self._salt.hex()

    def with_file_salts(self, salts: Mapping[str, str]) -> "ResultCache":
        """This cache, each file keyed by its entry in ``salts`` (see :attr:`file_salts`)."""
        salted = copy.copy(self)
        salted.file_salts = salts
        return salted

    def at_salt(self, salt: str) -> "ResultCache":
        """This cache with the salt ``salt`` (a :attr:`salt` a run kept)."""
        salted = copy.copy(self)
        salted._salt = bytes.fromhex(salt)
        salted.file_salts = None
        return salted

    def _with(self, part: bytes) -> "ResultCache":
        salted = copy.copy(self)
        salted._salt = _chained(self._salt, part)
        return salted

    def for_classes(
        self, own_move_classes: frozenset[str], known_classes: frozenset[str] = frozenset(), taking_nothing: frozenset[str] = frozenset(),
    ) -> "ResultCache":
        """This cache with entries keyed by the classes that move themselves a file can reach, the
        other classes it then reaches, and those of the first whose ``cuda()`` takes nothing, too (a
        class gaining a ``cuda()`` in one file changes what is safe in the files importing it)."""
        if not own_move_classes:
            return self
        return self._with(",".join(sorted(own_move_classes)).encode() + b";" + ",".join(sorted(known_classes)).encode() + b";" + ",".join(sorted(taking_nothing)).encode() + b"|")

    def for_ignored(self, codes: frozenset[str]) -> "ResultCache":
        """This cache with entries keyed by the codemods ``per-file-ignores`` leaves out of a file."""
        return self._with(b"ignored:" + ",".join(sorted(codes)).encode() + b"|")

    def for_run_facts(self, label: str, digest: str) -> "ResultCache":
        """This cache with entries keyed by another fact learnt over the run's files too (the
        legacy autograd Functions: a use of one in a file changes what the others may do)."""
        return self._with(label.encode() + b":" + digest.encode() + b"|")

    def for_stars(self, digest: str) -> "ResultCache":
        """This cache with entries keyed by what a file's star imports bind too (a module it
        star-imports changing its imports changes what is safe in the file)."""
        return self._with(b"stars:" + digest.encode() + b"|")

    def _prepare(self) -> bool:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            ignore = self.folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# created by torchfix-device: the cache is never committed\n*\n", encoding="utf-8")
            return os.access(self.folder, os.W_OK)
        except OSError:
            return False

    def key(self, raw: bytes) -> str:
        return hashlib.sha256(self._salt + raw).hexdigest()

    def _entry(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key[2:]}.json"

    def get(self, raw: bytes) -> CachedResult | None:
        """The cached result for a file holding ``raw``, if there is one that validates."""
        if not self._usable:
            return None
        key = self.key(raw)
        try:
            data = json.loads(self._entry(key).read_bytes().decode("utf-8"))
            return _validated(data, key)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(
        self,
        raw: bytes,
        new_text: str | None,
        findings: Sequence[Finding],
        notes: Sequence[str],
        suppressed: Sequence[Finding],
        marks: Marks,
        problems: Sequence[str] = (),
        *,
        error: str | None = None,
    ) -> None:
        """Keep a transform's result (``new_text`` None when unchanged) for a file holding
        ``raw``, with the file's :class:`~torchfix_device.files.selection.Marks` (and, for a
        notebook, the cells it left as they are: ``problems``)."""
        if not self._usable:
            return
        key = self.key(raw)
        entry = self._entry(key)
        result = {
            "text": new_text,
            "findings": [asdict(f) for f in findings],
            "notes": list(notes),
            "suppressed": [asdict(f) for f in suppressed],
            "marks": [marks.generated_line, marks.skip_file],
            "problems": list(problems),
            "error": None if error is None else [_python(), error],
        }
        data = {"format": FORMAT, "version": __version__, "key": key, "result": result, "checksum": _checksum(key, result)}
        try:
            entry.parent.mkdir(exist_ok=True)  # not the cache folder itself: deleted, it stays so
            # not synced to disk: a cold run writes an entry per file, and an entry a crash
            # loses or tears is only a miss (read errors are one)
            atomic_write(entry, json.dumps(data).encode("utf-8"), ENTRY_MODE, durable=False)
        except OSError:
            pass

    def put_failure(self, raw: bytes, error: str, marks: Marks) -> None:
        """Keep the syntax error a file holding ``raw`` failed with (under this Python version:
        another reads the entry as a miss, and parses the file itself)."""
        self.put(raw, None, (), (), (), marks, error=error)


def _python() -> str:
    return "%d.%d" % sys.version_info[:2]


def _chained(salt: bytes, part: bytes) -> bytes:
    """The salt after ``part`` is added to ``salt``: one digest, however long the parts were."""
    return hashlib.sha256(salt + part).digest()


def _checksum(key: str, result: dict) -> str:
    body = json.dumps([FORMAT, __version__, key, result], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class _Invalid(ValueError):
    pass


def _check(condition: bool) -> None:
    if not condition:
        raise _Invalid()


def _finding(item: object) -> Finding:
    """A finding from an entry, every field of the right type."""
    _check(isinstance(item, dict) and set(item) == FINDING_FIELDS)
    assert isinstance(item, dict)
    _check(all(type(item[k]) is int and item[k] >= 0 for k in ("line", "column")))
    _check(all(type(item[k]) is str for k in ("code", "message")))
    _check(all(type(item[k]) is bool for k in ("fixed", "held_back", "declined", "unsafe")))
    _check(item["cell"] is None or (type(item["cell"]) is int and item["cell"] > 0))
    return Finding(**item)


FINDING_FIELDS = frozenset(f.name for f in fields(Finding))


def _validated(data: object, key: str) -> CachedResult:
    """The result an entry holds; :class:`_Invalid` (a ``ValueError``) unless it is an entry of
    this format and version, written for ``key``, with the checksum of what it holds and fields
    of the right types."""
    _check(isinstance(data, dict) and data.get("format") == FORMAT and data.get("version") == __version__)
    assert isinstance(data, dict)
    result = data["result"]
    _check(data["key"] == key and isinstance(result, dict) and data["checksum"] == _checksum(key, result))
    text, notes, marks, problems, error = result["text"], result["notes"], result["marks"], result["problems"], result["error"]
    # a syntax error holds for the Python version that found it: another reads a miss
    _check(error is None or (isinstance(error, list) and len(error) == 2 and error[0] == _python() and isinstance(error[1], str)))
    _check(text is None or isinstance(text, str))
    _check(isinstance(notes, list) and all(isinstance(n, str) for n in notes))
    _check(isinstance(problems, list) and all(isinstance(p, str) for p in problems))
    _check(isinstance(marks, list) and len(marks) == 2 and type(marks[1]) is bool)
    _check(marks[0] is None or (type(marks[0]) is int and marks[0] > 0))
    _check(isinstance(result["findings"], list) and isinstance(result["suppressed"], list))
    return CachedResult(
        text,
        [_finding(f) for f in result["findings"]],
        list(notes),
        tuple(_finding(f) for f in result["suppressed"]),
        Marks(marks[0], marks[1]),
        tuple(problems),
        None if error is None else error[1],
    )
