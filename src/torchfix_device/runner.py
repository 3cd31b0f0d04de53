"""Find files, read them, answer from the cache or hand them to the engine, write results.

The runner never raises on a bad file: every file yields one :class:`FileResult` (changed,
unchanged, failed with a reason, or skipped). It imports no libcst: a file is given to
:mod:`torchfix_device.engine` (parse once, codemods until stable) only when the cache has no
result for it, so a run answered from the cache never loads libcst or the codemods.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Literal, Sequence

from torchfix_device import catalog, file_selection
from torchfix_device.fileio import SourceError, SourceFile, WriteError, atomic_replace, read_source
from torchfix_device.finding import Finding
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions
from torchfix_device.suppressions import UnusedSuppression, parse_suppressions, unused_suppressions

if TYPE_CHECKING:
    from torchfix_device.cache import ResultCache
    from torchfix_device.catalog import CodemodRef
    from torchfix_device.codemod import Codemod
    from torchfix_device.progress import FileProgress
    from torchfix_device.shard import Shard

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "__pycache__", "build", "dist", "site-packages", ".tox", ".nox",
        ".venv", "venv", ".eggs", "node_modules", ".mypy_cache", ".pytest_cache",
        ".torchfix_device_cache",
    }
)
MAX_FILE_BYTES = 1_000_000
"""Files larger than this are skipped with a message. libcst's Python-level passes handle roughly
0.1-0.5 MB of source a minute, so a bigger file (generated code, data tables) would stall the
whole run for many minutes."""

Status = Literal["changed", "unchanged", "failed", "skipped"]


@dataclass
class FileResult:
    path: Path
    display: str
    status: Status
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    """For ``failed``/``skipped``: the reason, starting with ``line N:`` where there is one."""
    source: SourceFile | None = None
    new_text: str | None = None
    notes: list[str] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    """Findings silenced by a ``# noqa`` comment: neither reported nor rewritten."""
    skip_kind: str | None = None
    """For ``skipped``: a short tag the summary groups by (``@generated``, ``skip-file``, ...)."""
    unused_suppressions: list = field(default_factory=list)
    """``UnusedSuppression`` items, filled when the run is asked to judge suppressions."""


@dataclass(frozen=True)
class TransformOutput:
    text: str
    findings: list[Finding]
    notes: list[str]
    suppressed: tuple[Finding, ...] = ()


class InternalError(Exception):
    """A codemod produced code that does not compile (a bug in the codemod, not the input)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run`: the results of the files finished before it.

    The file being processed at that moment is either unchanged or fully rewritten (writes are
    atomic renames); it is not among ``results``.
    """

    def __init__(self, results: list["FileResult"], done: int, total: int) -> None:
        super().__init__(f"interrupted after {done} of {total} files")
        self.results = results
        self.done = done
        self.total = total


def display_path(path: Path) -> str:
    """``path`` relative to the current directory when it is below it (POSIX separators)."""
    try:
        return Path(os.path.relpath(path)).as_posix() if not _outside_cwd(path) else path.as_posix()
    except ValueError:
        return path.as_posix()


def _outside_cwd(path: Path) -> bool:
    return os.path.relpath(path.absolute()).startswith("..")


# -- file discovery ---------------------------------------------------------------------------
def collect_files(paths: Sequence[Path], exclude: Iterable[str] = ()) -> tuple[list[Path], list[FileResult]]:
    """Python files under ``paths`` (sorted, de-duplicated) and results for paths that are not."""
    exclude = tuple(exclude)
    found: dict[Path, Path] = {}
    problems: list[FileResult] = []
    for given in paths:
        if given.is_symlink() and not given.is_dir():
            broken = "" if given.exists() else " (broken or looping link)"
            problems.append(FileResult(given, display_path(given), "skipped", error=f"symbolic link{broken}: not followed, never written through"))
        elif given.is_file():
            if given.suffix not in (".py", ".pyi", ".ipynb"):
                problems.append(FileResult(given, display_path(given), "failed", error="not a Python file (.py); skipped"))
            else:
                found.setdefault(given.resolve(), given)
        elif given.is_dir():
            walked = 0  # counted, not compared with len(found): `m.py pkg` finds pkg/m.py twice
            for path in _walk_python_files(given, exclude, problems):
                found.setdefault(path.resolve(), path)
                walked += 1
            if not walked:
                problems.append(FileResult(given, display_path(given), "failed", error="no Python files found in this folder"))
        else:
            problems.append(FileResult(given, display_path(given), "failed", error="no such file or folder"))
    files = sorted(found.values(), key=lambda p: display_path(p))
    return files, problems


def _walk_python_files(root: Path, exclude: tuple[str, ...], problems: list[FileResult]) -> Iterable[Path]:
    def on_error(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        problems.append(FileResult(where, display_path(where), "failed", error=f"cannot read folder: {exc.strerror}"))

    for folder, dirs, files in os.walk(root, onerror=on_error):
        base = Path(folder)
        dirs[:] = sorted(
            d for d in dirs
            if d not in SKIP_DIRS
            and not (base / d).is_symlink()
            and not (base / d / "pyvenv.cfg").exists()
            and not _excluded(base / d, exclude)
        )
        for name in sorted(files):
            path = base / name
            if name.endswith((".py", ".ipynb")) and not path.is_symlink() and not _excluded(path, exclude):
                yield path


def _excluded(path: Path, patterns: tuple[str, ...]) -> bool:
    posix = path.as_posix()
    return any(path.match(p) or Path(posix).match(p.rstrip("/") + "/**") or p.rstrip("/") in path.parts for p in patterns)


# -- transforming -----------------------------------------------------------------------------
def process_file(
    path: Path,
    codemods: Sequence["CodemodRef | type[Codemod]"],
    *,
    write: bool,
    unsafe_fixes: bool = False,
    options: RunOptions | None = None,
    source: SourceFile | None = None,
    shown: str | None = None,
    cache: "ResultCache | None" = None,
) -> FileResult:
    """Read, transform and (when ``write``) atomically replace one file. Never raises.

    ``source`` (with ``shown``, the name for messages) is text already read, e.g. from stdin.
    """
    if source is None and path.suffix == ".ipynb":
        from torchfix_device.notebook import process_notebook

        return process_notebook(path, codemods, write=write, unsafe_fixes=unsafe_fixes, options=options)
    options = options or DEFAULT_OPTIONS
    shown = shown or display_path(path)
    if source is None:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0  # read_source names the problem
        if size > MAX_FILE_BYTES:
            return FileResult(
                path, shown, "skipped",
                error=f"file is {size / 1e6:.1f} MB, over the {MAX_FILE_BYTES / 1e6:g} MB limit for one file; skipped",
                skip_kind="over 1 MB",
            )
        try:
            source = read_source(path)
        except SourceError as exc:
            where = f"line {exc.line}: " if exc.line else ""
            return FileResult(path, shown, "failed", error=f"{where}{exc.message}")
    hit, marks = None, None
    if cache is not None:  # the marks are kept with the result, so read them once
        hit = cache.get(source.raw)
        marks = hit.marks if hit is not None else file_selection.read_marks(source.text)
    skip = file_selection.skip_reason(source.text, options, marks)
    if skip is not None:
        return FileResult(path, shown, "skipped", error=skip.message, source=source, skip_kind=skip.kind)
    try:
        if hit is not None:
            output = TransformOutput(source.text if hit.new_text is None else hit.new_text, hit.findings, hit.notes, hit.suppressed)
        else:
            with collecting_cycles_after():
                output = _transform_and_keep(source, codemods, unsafe_fixes, str(path), cache, options, marks)
    except Exception as exc:  # a parse error, or a codemod bug: it must not stop the other files
        return failure_result(exc, path, shown, source)
    result = FileResult(
        path, shown, "unchanged", findings=output.findings, source=source, notes=output.notes, suppressed=list(output.suppressed)
    )
    if options.report_unused_suppressions:
        _judge_suppressions(result, codemods)
        if result.status == "skipped":
            return result
    if output.text == source.text:
        return result
    result.status = "changed"
    result.new_text = output.text
    if write:
        write_result(result)
    return result


def failure_result(exc: Exception, path: Path, shown: str, source: SourceFile) -> FileResult:
    """The ``failed`` result for an exception raised while transforming: a syntax error where
    CPython places it, else what went wrong."""
    from libcst import ParserSyntaxError  # raised only by a transform: libcst is loaded by then

    if isinstance(exc, ParserSyntaxError):
        from torchfix_device.engine import parse_error_message

        error = parse_error_message(exc, source.text)
    elif isinstance(exc, RecursionError):
        error = "expression nested too deeply for the parser; skipped"
    elif isinstance(exc, InternalError):
        error = f"internal error: {exc}"
    else:
        error = f"internal error: {type(exc).__name__}: {exc}"
    return FileResult(path, shown, "failed", error=error, source=source)


def _judge_suppressions(result: FileResult, codemods: Sequence[type[Codemod]]) -> None:
    """List the suppressions of ``result`` that suppress nothing. A file marked
    ``skip-file`` was analysed only for this: it becomes ``skipped``, its findings dropped."""
    assert result.source is not None
    suppressions = parse_suppressions(result.source.text)
    selected = [c.code for c in codemods]
    result.unused_suppressions = unused_suppressions(
        suppressions, [(f.line, f.code) for f in result.suppressed], selected, catalog.codes()
    )
    if suppressions.skip_file_line is not None:
        if not result.findings and not result.suppressed:
            result.unused_suppressions.append(UnusedSuppression(
                suppressions.skip_file_line, 1, "torchfix-device: skip-file", "nothing in this file to skip"
            ))
            result.unused_suppressions.sort()
        result.findings, result.notes, result.status = [], [], "skipped"
        result.error, result.skip_kind = file_selection.SKIP_FILE_MESSAGE, "skip-file"


def write_result(result: FileResult) -> None:
    """Atomically replace a ``changed`` result's file with its rewrite; on failure the result
    becomes ``failed`` with the reason and the file keeps its old content."""
    source = result.source
    assert source is not None and result.new_text is not None
    try:
        atomic_replace(result.path, source.encode(result.new_text), source.raw)
    except (WriteError, OSError) as exc:
        result.status = "failed"
        result.error = str(exc) if isinstance(exc, WriteError) else f"cannot write: {exc.strerror or exc}"
    except UnicodeEncodeError as exc:
        result.status = "failed"
        result.error = f"rewrite cannot be encoded as {source.encoding}: {exc.reason}"


def transform_source(text: str, codemods: Sequence["CodemodRef | type[Codemod]"], **kwargs: Any) -> TransformOutput:
    """:func:`torchfix_device.engine.transform_source` (libcst is imported on the first call)."""
    from torchfix_device.engine import transform_source as transform

    return transform(text, codemods, **kwargs)


def _transform_and_keep(
    source: SourceFile,
    codemods: Sequence["CodemodRef | type[Codemod]"],
    unsafe_fixes: bool,
    filename: str,
    cache: "ResultCache | None",
    options: RunOptions | None,
    marks: "file_selection.Marks | None",
) -> TransformOutput:
    """:func:`transform_source`, its result kept in ``cache`` when there is one (failures are
    not cached)."""
    output = transform_source(source.text, codemods, unsafe_fixes=unsafe_fixes, filename=filename, options=options)
    if cache is not None:
        assert marks is not None  # read with the cache lookup
        new_text = None if output.text == source.text else output.text
        cache.put(source.raw, new_text, output.findings, output.notes, output.suppressed, marks)
    return output


_frozen = False


@contextmanager
def collecting_cycles_after() -> Iterator[None]:
    """Python's cyclic garbage collector paused while one file is transformed, then run over
    what the file left behind (the youngest generation: the reference cycles a scope analysis
    creates, and the tree they keep alive). Parse trees are hundreds of thousands of acyclic
    objects, which the collector would otherwise traverse again and again while they are being
    built: about a quarter of the time of a run over torch's sources. The objects that exist
    when the first file starts (modules, classes, caches) are moved out of the collector's way
    for good (``gc.freeze``), so the collection after a file costs what that file left: up to
    0.2 s for torch's largest (``distributed_test.py``), 1.8 s over the 142 torch files stage 1
    sends to libcst."""
    global _frozen
    if not gc.isenabled():
        yield
        return
    if not _frozen:
        gc.freeze()
        _frozen = True
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def _has_cached_result(cache: "ResultCache | None", path: Path) -> bool:
    if cache is None or path.suffix != ".py":
        return False
    try:
        return cache.has(path.read_bytes())
    except OSError:
        return False


def run(
    paths: Sequence[Path],
    codemods: Sequence["CodemodRef | type[Codemod]"],
    *,
    write: bool,
    unsafe_fixes: bool = False,
    exclude: Iterable[str] = (),
    options: RunOptions | None = None,
    progress: "FileProgress | None" = None,
    jobs: int = 1,
    cache: "ResultCache | None" = None,
    shard: "Shard | None" = None,
) -> list[FileResult]:
    """Process every Python file under ``paths``; one result per file, in display order.

    ``jobs`` > 1 spreads the files over that many processes (same results, same order);
    ``shard`` keeps only its deterministic share of the files. ``progress`` (see
    :mod:`torchfix_device.progress`) is told the file count and each file done.
    Ctrl-C raises :class:`Interrupted` carrying the results of the files finished so far.
    """
    files: list[Path] = []
    problems: list[FileResult] = []
    results: list[FileResult] = []
    try:
        files, problems = collect_files(paths, exclude)
        if (options or DEFAULT_OPTIONS).respect_gitignore:
            files, ignored = file_selection.drop_gitignored(files, paths)
            problems += [FileResult(p, display_path(p), "skipped", error="ignored by .gitignore", skip_kind=".gitignore") for p in ignored]
        if shard is not None:
            files = shard.select(files, display_path)
        if progress is not None:
            progress.start(len(files))
        # Files with a cached result are done here: a pool (new processes importing libcst)
        # costs more than reading a cache entry. The rest go to the pool when there are several.
        pooled = [p for p in files if not _has_cached_result(cache, p)] if jobs > 1 and len(files) > 1 else []
        to_pool = set(pooled) if len(pooled) > 1 else set()
        for path in files:
            if path in to_pool:
                continue
            results.append(process_file(path, codemods, write=write, unsafe_fixes=unsafe_fixes, options=options, cache=cache))
            if progress is not None:
                progress.advance(path)
        if to_pool:
            from torchfix_device.parallel import process_in_pool

            process_in_pool(
                pooled, codemods, results, write=write, unsafe_fixes=unsafe_fixes, cache=cache, jobs=jobs,
                options=options, progress=progress,
            )
            order = {path: index for index, path in enumerate(files)}
            results.sort(key=lambda result: order[result.path])
    except KeyboardInterrupt:
        raise Interrupted(problems + results, len(results), len(files)) from None
    return problems + results
