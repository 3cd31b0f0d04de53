"""Find files, prefilter, parse once, apply the selected codemods until stable.

The runner never raises on a bad file: every file yields one :class:`FileResult` (changed,
unchanged, failed with a reason, or skipped).
"""

from __future__ import annotations

import ast
import difflib
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Literal, Sequence

import libcst as cst
from libcst.codemod import CodemodContext

from torchfix_device import _cst
from torchfix_device.candidates import SITES, FileFacts, candidate_codemods, parse_facts, statements_with_sites
from torchfix_device.codemod import CHECK_FAST_NAMES, REGISTRY, Codemod, Finding, SharedWrapper
from torchfix_device.fileio import SourceError, SourceFile, WriteError, atomic_replace, read_source
from torchfix_device import file_selection
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions
from torchfix_device.suppressions import (
    NO_SUPPRESSIONS,
    Suppressions,
    UnusedSuppression,
    may_hold_directives,
    parse_suppressions,
    unused_suppressions,
)

if TYPE_CHECKING:
    from torchfix_device.cache import ResultCache
    from torchfix_device.progress import FileProgress
    from torchfix_device.shard import Shard

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "__pycache__", "build", "dist", "site-packages", ".tox", ".nox",
        ".venv", "venv", ".eggs", "node_modules", ".mypy_cache", ".pytest_cache",
        ".torchfix_device_cache",
    }
)
MAX_PASSES = 6
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
def active_codemods(text: str, codemods: Sequence[type[Codemod]]) -> list[type[Codemod]]:
    """The codemods whose trigger substrings occur in ``text`` (the cheap prefilter)."""
    return [c for c in codemods if any(t in text for t in c.triggers)]


def transform_source(
    text: str,
    codemods: Sequence[type[Codemod]],
    *,
    unsafe_fixes: bool = False,
    filename: str | None = None,
    options: RunOptions | None = None,
) -> TransformOutput:
    """Apply ``codemods`` to ``text`` until the tree stops changing (see
    :func:`transform_unfiltered`), running only the codemods that stage 1 (``candidates``, the
    stdlib ``ast``) says may match; a file where none may is never parsed by libcst.

    The result is the same as :func:`transform_unfiltered`'s: a codemod left out cannot report or
    change anything in the original file, nor in any intermediate rewrite that stage 1 also finds
    no candidate in (the runs see the same trees up to the first change by a left-out codemod, so
    there is none). When stage 1 does find one in a rewrite (an inserted
    ``torch.cuda.is_available()`` can wake TFD008), the file is transformed again with those
    codemods added, until no left-out codemod has a candidate in any rewrite.
    """
    triggered = active_codemods(text, codemods)
    stage1 = Stage1Memo()
    facts = stage1.facts(text) if triggered else None
    if facts is not None:
        running = candidate_codemods(facts, triggered)
        if not running:
            return TransformOutput(text, [], [])
        while len(running) < len(triggered):
            rewrites: list[str] = []
            try:
                output = transform_unfiltered(
                    text, running, unsafe_fixes=unsafe_fixes, filename=filename, options=options, rewrites=rewrites,
                    stage1=stage1,
                )
            except Exception:
                break  # let the full run below report it, in its own words
            left_out = [c for c in triggered if c not in running]
            woken = {c for code in rewrites for c in stage1.candidates_in(code, left_out)}
            if not woken:
                return output
            running = [c for c in triggered if c in running or c in woken]
    return transform_unfiltered(text, codemods, unsafe_fixes=unsafe_fixes, filename=filename, options=options, stage1=stage1)


class Stage1Memo:
    """Stage 1's facts of each code version one file's transform meets (the original, its
    libcst rendering, every rewrite), so none is parsed by CPython twice."""

    def __init__(self) -> None:
        self._facts: dict[str, FileFacts | None] = {}

    def facts(self, code: str) -> FileFacts | None:
        if code not in self._facts:
            self._facts[code] = parse_facts(code)
        return self._facts[code]

    def candidates_in(self, code: str, codemods: Sequence[type[Codemod]]) -> Sequence[type[Codemod]]:
        """The codemods of ``codemods`` stage 1 finds a candidate for in ``code`` (all of them
        when CPython cannot parse it)."""
        facts = self.facts(code)
        return codemods if facts is None else candidate_codemods(facts, codemods)

    def parsed(self, code: str) -> bool:
        """CPython has already parsed ``code`` without error."""
        return self._facts.get(code) is not None


@_cst.forgetting_children
def transform_unfiltered(
    text: str,
    codemods: Sequence[type[Codemod]],
    *,
    unsafe_fixes: bool = False,
    filename: str | None = None,
    options: RunOptions | None = None,
    rewrites: list[str] | None = None,
    stage1: "Stage1Memo | None" = None,
) -> TransformOutput:
    """Apply ``codemods`` to ``text`` until the tree stops changing.

    Findings carry positions in ``text``. Raises ``libcst.ParserSyntaxError`` for code that does
    not parse and :class:`InternalError` when the result does not compile.

    With ``stage1`` (the memo :func:`transform_source` keeps), a codemod in a pass after the
    first runs only when stage 1 finds a candidate for it in the tree it would be given
    (otherwise it cannot change that tree: the same argument as for the first pass), and a
    codemod with a site function skips the top-level statements without a site.
    """
    active = active_codemods(text, codemods)
    if not active:
        return TransformOutput(text, [], [])
    if stage1 is None or not stage1.parsed(text):
        _check_cpython_parses(text, filename)
    original = cst.parse_module(text)
    rendered = original.code  # libcst's rendering of the untouched tree: not always ``text``
    findings: set[Finding] = set()
    suppressed: set[Finding] = set()
    notes: list[str] = []
    shared = SharedWrapper(original)  # one wrapper per module version, the original's included
    current, current_code = original, rendered
    configure = _codemod_configurer(text, options or DEFAULT_OPTIONS, stage1=stage1)
    for pass_number in range(MAX_PASSES):
        changed_in_pass = False
        for codemod_class in active:
            if pass_number and stage1 is not None and codemod_class not in stage1.candidates_in(current_code, active):
                continue  # no candidate in the tree it would get: it would change nothing
            try:
                codemod = codemod_class(CodemodContext(filename=filename), unsafe_fixes=unsafe_fixes, shared=shared)
                configure(codemod, current_code)
                codemod.keeps_findings = pass_number == 0 and current is original
                result = codemod.transform_module(current)
                if pass_number == 0:
                    if current is original:
                        findings.update(codemod.findings)
                        suppressed.update(codemod.suppressed_findings)
                        notes.extend(codemod.checkpoint_notes)
                    else:  # positions must refer to the file as it was: look at the original tree
                        fresh = codemod_class(
                            CodemodContext(filename=filename), unsafe_fixes=unsafe_fixes, shared=shared
                        )
                        configure(fresh, rendered)
                        fresh.transform_module(original)
                        findings.update(fresh.findings)
                        suppressed.update(fresh.suppressed_findings)
                        notes.extend(fresh.checkpoint_notes)
            except RecursionError:
                raise  # a tree too deep for Python's recursion limit: the input's problem
            except Exception as exc:  # name the codemod in the bug report
                raise InternalError(
                    f"{codemod_class.code} ({codemod_class.name}) raised {type(exc).__name__}: {exc}; "
                    "file left unchanged — please report this bug"
                ) from exc
            result_code = result.code if codemod.changed_tree or CHECK_FAST_NAMES else current_code
            if CHECK_FAST_NAMES and not codemod.changed_tree:
                assert result_code == current_code, f"{codemod_class.code} changed the code without replacing a node"
            if result_code != current_code:
                current, current_code = result, result_code
                changed_in_pass = True
                if rewrites is not None:  # every tree a later codemod sees (for stage 1's check)
                    rewrites.append(result_code)
        if not changed_in_pass:
            break
    else:
        raise InternalError(f"codemods {', '.join(c.code for c in active)} did not reach a fixed point")
    if current_code == rendered:
        current_code = text
    elif rendered != text:
        current_code = _keep_untouched_lines(text, rendered, current_code)
    if current_code != text:
        try:
            compile(current_code, filename or "<rewrite>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise InternalError(
                f"rewrite by {', '.join(c.code for c in active)} does not compile "
                f"(line {exc.lineno}: {exc.msg}); file left unchanged — please report this bug"
            ) from None
    return TransformOutput(current_code, sorted(findings), notes, tuple(sorted(suppressed)))


def _codemod_configurer(text: str, options: RunOptions, *, stage1: Stage1Memo | None = None):
    """A function giving a codemod the run's settings, the code it is about to transform and
    that code's ``noqa`` comments. The comments are read from that code itself, since rewrites
    before it may have moved lines (an inserted ``device = ...``); comments move with their lines.

    With ``stage1``, a codemod with a stage-1 site function also learns which top-level
    statements of that code hold a site (it skips the others)."""
    cache: dict[str, Suppressions] = {}
    has_directives = may_hold_directives(text)

    def configure(codemod: Codemod, code: str) -> None:
        codemod.device_expression = options.device_expression
        codemod.source_code = code
        if has_directives:
            if code not in cache:
                cache[code] = parse_suppressions(code)
            codemod.suppressions = cache[code]
        else:
            codemod.suppressions = NO_SUPPRESSIONS
        if stage1 is not None and codemod.code in SITES:
            facts = stage1.facts(code)
            if facts is not None:
                codemod.statements_with_sites = statements_with_sites(facts, codemod.code)

    return configure


def _lines(text: str) -> list[str]:
    """Lines ended by ``\\n`` only (``\\r\\n`` stays inside a line)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _keep_untouched_lines(text: str, rendered: str, new: str) -> str:
    """``new`` with every line the codemods did not touch taken from ``text`` byte for byte.

    libcst does not render every file exactly as read: a form feed that starts a line of code
    (``\\x0cx = 1``, a page break) is dropped (cf. Instagram/LibCST#446). The rewrite must not
    carry such losses into lines it never meant to change, let alone change a file that has
    nothing to fix.
    """
    text_lines, rendered_lines, new_lines = _lines(text), _lines(rendered), _lines(new)
    if len(text_lines) != len(rendered_lines):
        raise InternalError(
            "libcst cannot reproduce this file byte for byte (its lines come out differently); "
            "file left unchanged — please report this bug"
        )
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, rendered_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out.extend(text_lines[i1:i2] if tag == "equal" else new_lines[j1:j2])
    return "".join(out)


def _check_cpython_parses(text: str, filename: str | None) -> None:
    """Parse with CPython's parser before libcst's: CPython refuses nesting deeper than it
    supports (200 brackets, its parser stack), while libcst's native parser overflows the C stack
    on such input and kills the whole process (a segfault on ``x = ((((...1))))`` 2000 deep).
    Code CPython cannot read (a ``TabError``, ``f() = 1``) is reported as the syntax error it is.

    Raises ``libcst.ParserSyntaxError`` or ``RecursionError``.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not our business
            compile(text, filename or "<source>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        raise cst.ParserSyntaxError(
            exc.msg, lines=text.splitlines(keepends=True) or [""], raw_line=exc.lineno or 1, raw_column=max((exc.offset or 1) - 1, 0)
        ) from None
    except (RecursionError, MemoryError):  # "too complex", "parser stack overflowed"
        raise RecursionError("nested too deeply for CPython's parser") from None
    except ValueError as exc:  # e.g. NUL bytes (already refused when reading)
        raise cst.ParserSyntaxError(str(exc), lines=[""], raw_line=1, raw_column=0) from None


def _parse_error_message(exc: cst.ParserSyntaxError, text: str) -> str:
    """``line N:C: syntax error: ...`` at the place CPython names (libcst's native parser can
    point a line late), with a hint when the line looks like Python 2."""
    line, column, message = exc.raw_line, exc.raw_column + 1, exc.message
    try:
        ast.parse(text)
    except SyntaxError as py_exc:
        if py_exc.lineno:
            line, column, message = py_exc.lineno, py_exc.offset or 1, py_exc.msg
    except (ValueError, RecursionError, MemoryError):
        pass
    lines = text.splitlines()
    stripped = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    hint = ""
    if stripped.startswith(("print ", "exec ")) or (stripped.startswith("except ") and "," in stripped) or "Missing parentheses" in message:
        hint = " (Python 2 syntax? this tool reads Python 3 only; convert with 2to3 first)"
    return f"line {line}:{column}: syntax error: {message}{hint}"


def process_file(
    path: Path,
    codemods: Sequence[type[Codemod]],
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
    skip = file_selection.skip_reason(source.text, options)
    if skip is not None:
        return FileResult(path, shown, "skipped", error=skip.message, source=source, skip_kind=skip.kind)
    try:
        output = _transform_cached(source, codemods, unsafe_fixes, str(path), cache, options)
    except cst.ParserSyntaxError as exc:
        return FileResult(path, shown, "failed", error=_parse_error_message(exc, source.text), source=source)
    except Exception as exc:  # a codemod bug must not stop the other files
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
    """The ``failed`` result for an exception raised while transforming (parse errors aside)."""
    if isinstance(exc, RecursionError):
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
        suppressions, [(f.line, f.code) for f in result.suppressed], selected, sorted(REGISTRY)
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


def _transform_cached(
    source: SourceFile,
    codemods: Sequence[type[Codemod]],
    unsafe_fixes: bool,
    filename: str,
    cache: "ResultCache | None",
    options: RunOptions | None,
) -> TransformOutput:
    """:func:`transform_source`, through ``cache`` when there is one (failures are not cached)."""
    hit = cache.get(source.raw) if cache is not None else None
    if hit is not None:
        new_text, findings, notes, suppressed = hit
        return TransformOutput(source.text if new_text is None else new_text, findings, notes, suppressed)
    output = transform_source(source.text, codemods, unsafe_fixes=unsafe_fixes, filename=filename, options=options)
    if cache is not None:
        new_text = None if output.text == source.text else output.text
        cache.put(source.raw, new_text, output.findings, output.notes, output.suppressed)
    return output


def _has_cached_result(cache: "ResultCache | None", path: Path) -> bool:
    if cache is None or path.suffix != ".py":
        return False
    try:
        return cache.has(path.read_bytes())
    except OSError:
        return False


def run(
    paths: Sequence[Path],
    codemods: Sequence[type[Codemod]],
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
