"""One file's job: read it (Python source or a notebook), answer from the cache or hand it to
the engine, and write the rewrite atomically. The runner runs it file by file; the process pool
(:mod:`torchfix_device.run.parallel`) runs it in its workers.

A job never raises on a bad file: every file yields one :class:`FileResult` (changed,
unchanged, failed with a reason, or skipped). It imports no libcst: the engine (stage 1, parse
once, codemods until stable, re-check) and the notebook support are imported for the first file
the cache has no result for, so a run answered from the cache never loads libcst or the
codemods.
"""

from __future__ import annotations

import ast
import gc
import io
import json
import os
import tokenize
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from torchfix_device.run import budget

from torchfix_device.codemods import catalog

from torchfix_device.files import selection as file_selection
from torchfix_device.files.selection import MAX_FILE_BYTES, display_path
from torchfix_device.files.sources import SourceError, SourceFile, WriteError, atomic_replace, read_source
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions, ignored_codes
from torchfix_device.files.safe_paths import FolderId, FolderReplaced, NotRegularFile, read_regular
from torchfix_device.results import FileResult, InternalError, TransformOutput
from torchfix_device.syntax.suppressions import UnusedSuppression, parse_suppressions, unused_suppressions

if TYPE_CHECKING:
    from torchfix_device.run.cache import CachedResult, ResultCache
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod


def process_file(
    path: Path,
    codemods: Sequence["CodemodRef | type[Codemod]"],
    *,
    options: RunOptions | None = None,
    source: SourceFile | None = None,
    shown: str | None = None,
    cache: "ResultCache | None" = None,
    cached_only: bool = False,
    root: Path | None = None,
) -> FileResult | None:
    """Read, transform and (when ``options.write``) atomically replace one file. Never raises.

    ``source`` (with ``shown``, the name for messages) is text already read, e.g. from stdin.
    ``cached_only``: None instead of a transform when ``cache`` holds no result for the file
    (the runner hands those to its process pool). ``root``: the folder named on the command
    line that ``path`` was found under (no symbolic link below it is followed, reading or
    writing).
    """
    codemods, cache = _for_this_file(path, codemods, options or DEFAULT_OPTIONS, cache)
    if cached_only and cache is None:
        return None
    options = options or DEFAULT_OPTIONS
    if cache is not None:
        cache = _keyed_by_run_facts(cache, path, options)
    if source is None and path.suffix == ".ipynb":
        return process_notebook(path, codemods, options=options, root=root, cache=cache, cached_only=cached_only)
    shown = shown or display_path(path)
    if source is None:
        try:
            size = os.stat(path, follow_symlinks=False).st_size
        except OSError:
            size = 0  # read_source names the problem
        limit = options.max_file_bytes or MAX_FILE_BYTES
        if size > limit:
            return FileResult(
                path, shown, "skipped",
                error=f"file is {size / 1e6:.1f} MB, over the {limit / 1e6:g} MB limit for one file; skipped "
                "(raise it with --max-file-size or max-file-size in [tool.torchfix-device])",
                skip_kind="over the size limit",
            )
        try:
            source = read_source(path, root)
        except SourceError as exc:
            if exc.skip_kind:
                return FileResult(path, shown, "skipped", error=exc.message, skip_kind=exc.skip_kind)
            where = f"line {exc.line}: " if exc.line else ""
            return FileResult(path, shown, "failed", error=f"{where}{exc.message}")
    hit, marks = None, None
    if cache is not None:  # the marks are kept with the result, so read them once
        hit = _compiling(cache.get(source.raw), str(path))
        if hit is None and cached_only:
            return None
        marks = hit.marks if hit is not None else file_selection.read_marks(source.text)
    skip = file_selection.skip_reason(source.text, options, marks)
    if skip is not None:
        return FileResult(path, shown, "skipped", error=skip.message, source=source, skip_kind=skip.kind)
    if hit is not None and hit.error is not None:
        return FileResult(path, shown, "failed", error=hit.error, source=source, cached=True)
    try:
        if hit is not None:
            output = TransformOutput(source.text if hit.new_text is None else hit.new_text, hit.findings, hit.notes, hit.suppressed)
        else:
            with collecting_cycles_after():
                output = _transform_and_keep(source, codemods, str(path), cache, options, marks)
    except budget.OverBudget as over:  # reported, left untouched; the run goes on
        return FileResult(path, shown, "skipped", error=over.message, source=source, skip_kind=over.kind)
    except Exception as exc:  # a parse error, or a codemod bug: it must not stop the other files
        failed = failure_result(exc, path, shown, source)
        if cache is not None and _is_syntax_error(exc):  # these bytes never parse: kept
            assert marks is not None and failed.error is not None
            cache.put_failure(source.raw, failed.error, marks)
        return failed
    result = FileResult(
        path, shown, "unchanged", findings=output.findings, source=source, notes=output.notes, suppressed=list(output.suppressed),
        cached=hit is not None,
    )
    if options.report_unused_suppressions:
        _judge_suppressions(result, codemods)
        if result.status == "skipped":
            return result
    if output.text == source.text:
        return result
    result.status = "changed"
    result.new_text = output.text
    if options.write:
        write_result(result)
    return result


def _keyed_by_run_facts(cache: "ResultCache", path: Path, options: RunOptions) -> "ResultCache":
    """``cache`` with entries keyed by what the run's other files tell about ``path`` too: what
    its star imports bind, the classes with their own moves it reaches, the project's attributes
    and functions it imports, whether some file of the run imports it. A cache holding each file's
    keys as a run kept them (:attr:`~torchfix_device.run.cache.ResultCache.file_salts`) uses those."""
    if cache.file_salts is not None:
        return cache.at_salt(cache.file_salts[str(path)])
    stars = options.star_imports.of(path) if options.star_imports else None
    if stars is not None:
        cache = cache.for_stars(stars.digest)
    own = options.own_move_classes_of(str(path))
    cache = cache.for_classes(own, options.known_classes_of(str(path)), own & options.cuda_taking_nothing)
    attributes = options.project_attributes.of(path) if options.project_attributes else None
    if attributes is not None:
        cache = cache.for_run_facts("attributes", attributes.digest)
    if str(path) not in options.unimported:  # the answer of most files unsalted
        cache = cache.for_run_facts("imported", "1")
    return cache


def file_salt(path: Path, codemods: Sequence["CodemodRef | type[Codemod]"], options: RunOptions, cache: "ResultCache") -> str:
    """The salt :func:`process_file` keys ``path``'s entries in ``cache`` with, for a run whose
    facts ``options`` holds (what :mod:`torchfix_device.run.run_memo` keeps for a warm run)."""
    _, ignoring = _for_this_file(path, codemods, options, cache)
    assert ignoring is not None
    return _keyed_by_run_facts(ignoring, path, options).salt


def _for_this_file(
    path: Path, codemods: Sequence["CodemodRef | type[Codemod]"], options: RunOptions, cache: "ResultCache | None"
) -> tuple[Sequence["CodemodRef | type[Codemod]"], "ResultCache | None"]:
    """The codemods ``per-file-ignores`` leaves for ``path``, and the cache keyed by them."""
    ignored = ignored_codes(path, options) & {c.code for c in codemods}
    if not ignored:
        return codemods, cache
    kept = [c for c in codemods if c.code not in ignored]
    return kept, cache.for_ignored(ignored) if cache is not None else None


def process_notebook(
    path: Path, codemods: Sequence["CodemodRef | type[Codemod]"], *, options: RunOptions | None = None, root: Path | None = None,
    cache: "ResultCache | None" = None, cached_only: bool = False,
) -> FileResult | None:
    """Read, transform (:mod:`torchfix_device.run.notebook`) and (when ``options.write``) atomically
    replace one notebook. Never raises. ``cache`` (keyed for this file): its result when it
    holds one for these bytes, else the transform's is kept there; ``cached_only``: None
    instead of a transform when it holds none."""
    options = options or DEFAULT_OPTIONS
    shown = display_path(path)
    try:
        raw, folder = read_regular(path, root)
    except NotRegularFile as exc:
        return FileResult(path, shown, "skipped", error=exc.strerror, skip_kind="not a regular file")
    except FolderReplaced as exc:
        return FileResult(path, shown, "failed", error=f"{exc.strerror}; not read")
    except OSError as exc:
        return FileResult(path, shown, "failed", error=f"cannot read: {exc.strerror or exc}")
    if cache is not None:
        cache = cache.for_run_facts("notebook", "1")
        hit = _notebook_hit(cache.get(raw))
        if hit is not None:
            source = _notebook_source(path, raw, root, folder)
            output = TransformOutput(source.text if hit.new_text is None else hit.new_text, hit.findings, hit.notes, problems=hit.problems)
            return _notebook_result(output, path, shown, source, options, cached=True)
        if cached_only:
            return None
    from torchfix_device.run import notebook  # libcst

    try:
        nb = notebook.read_notebook(raw)
    except notebook.NotebookError as exc:
        return FileResult(path, shown, "failed", error=str(exc))
    source = _notebook_source(path, raw, root, folder)
    if not notebook.is_python_notebook(nb):
        return FileResult(path, shown, "skipped", error="not a Python notebook (its kernel language is not Python)", source=source)
    try:
        with collecting_cycles_after(), budget.enforced(options.file_time_limit, options.file_memory_limit):
            output = notebook.transform_notebook(
                nb, source.text, codemods, filename=str(path), options=options
            )
    except budget.OverBudget as over:
        return FileResult(path, shown, "skipped", error=over.message, source=source, skip_kind=over.kind)
    except notebook.NotebookError as exc:  # a syntax error, in a cell it names
        return FileResult(path, shown, "failed", error=str(exc), source=source)
    except Exception as exc:  # a codemod bug must not stop the other files
        return failure_result(exc, path, shown, source)
    if cache is not None:
        new_text = None if output.text == source.text else output.text
        cache.put(raw, new_text, output.findings, output.notes, (), file_selection.Marks(None, False), output.problems)
    return _notebook_result(output, path, shown, source, options, cached=False)


def _notebook_source(path: Path, raw: bytes, root: Path | None, folder: "FolderId | None") -> SourceFile:
    """A notebook's bytes as a :class:`SourceFile` (read as UTF-8, as its JSON is)."""
    return SourceFile(path=path, raw=raw, text=raw.decode("utf-8"), encoding="utf-8", bom=False, root=root, folder=folder)


def _notebook_hit(hit: "CachedResult | None") -> "CachedResult | None":
    """``hit`` if its rewrite (if any) reads as a notebook's JSON, as a fresh rewrite does; else
    None (a miss: the notebook is transformed again)."""
    if hit is None or hit.new_text is None:
        return hit
    try:
        data = json.loads(hit.new_text, strict=False)
    except ValueError:
        return None
    return hit if isinstance(data, dict) and isinstance(data.get("cells"), list) else None


def _notebook_result(output: TransformOutput, path: Path, shown: str, source: SourceFile, options: RunOptions, *, cached: bool) -> FileResult:
    """The result of a notebook's transform (written when ``options.write`` and it changes)."""
    result = FileResult(
        path, shown, "unchanged", findings=output.findings, source=source, notes=output.notes, problems=list(output.problems),
        cached=cached,
    )
    if output.text == source.text:
        return result
    result.status = "changed"
    result.new_text = output.text
    if options.write:
        write_result(result)
    return result


def _compiling(hit: "CachedResult | None", filename: str) -> "CachedResult | None":
    """``hit`` if its rewrite (if any) compiles, as a fresh rewrite must; else None (a miss:
    the file is transformed again). The cache is not trusted with what is written."""
    if hit is None or hit.new_text is None:
        return hit
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(hit.new_text, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return hit


def _transform_and_keep(
    source: SourceFile,
    codemods: Sequence["CodemodRef | type[Codemod]"],
    filename: str,
    cache: "ResultCache | None",
    options: RunOptions | None,
    marks: "file_selection.Marks | None",
) -> TransformOutput:
    """:func:`torchfix_device.engine.transform_source` (libcst is imported on the first call),
    its result kept in ``cache`` when there is one (a syntax error is kept by the caller)."""
    from torchfix_device import engine

    options = options or DEFAULT_OPTIONS
    with budget.enforced(options.file_time_limit, options.file_memory_limit):
        output = engine.transform_source(source.text, codemods, filename=filename, options=options)
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


def failure_result(exc: Exception, path: Path, shown: str, source: SourceFile) -> FileResult:
    """The ``failed`` result for an exception raised while transforming: a syntax error where
    CPython places it, else what went wrong."""
    from libcst import ParserSyntaxError  # raised only by a transform: libcst is loaded by then

    if isinstance(exc, ParserSyntaxError):
        from torchfix_device.engine import parse_error_message

        error = parse_error_message(exc, source.text)
    elif isinstance(exc, RecursionError):
        line = deepest_line(source.text)
        error = f"{f'line {line}: ' if line else ''}expression nested too deeply for the parser; skipped"
    elif isinstance(exc, InternalError):
        error = f"internal error: {exc}"
    else:
        error = f"internal error: {type(exc).__name__}: {exc}"
    return FileResult(path, shown, "failed", error=error, source=source)


def _is_syntax_error(exc: Exception) -> bool:
    """Whether ``exc`` says the file does not parse (not that the parser ran out of stack)."""
    from libcst import ParserSyntaxError

    return isinstance(exc, ParserSyntaxError)


def finished_before(stop: BaseException) -> FileResult | None:
    """The result of the file whose write an interruption waited for, if it was written."""
    return getattr(stop, "result", None)


def deepest_line(text: str) -> int | None:
    """The line of the most deeply nested code of ``text`` (where a parser runs out of
    recursion): the deepest node of CPython's ``ast``; when CPython gives up too, the first line
    of the logical line with the most operators and brackets (a chain ``a + a + ...`` nests as
    deep as it is long)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    if tree is not None:
        deepest, line = 0, None
        stack: list[tuple[ast.AST, int]] = [(tree, 0)]
        while stack:
            node, depth = stack.pop()
            if depth > deepest and getattr(node, "lineno", None):
                deepest, line = depth, node.lineno  # type: ignore[attr-defined]
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
        return line
    best, line, count, start = 0, None, 0, None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if start is None and token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                start = token.start[0]
            if token.type == tokenize.OP:
                count += 1
                if count > best:
                    best, line = count, start
            elif token.type == tokenize.NEWLINE:
                count, start = 0, None
    except (tokenize.TokenError, SyntaxError, RecursionError, MemoryError):
        pass
    return line


def _judge_suppressions(result: FileResult, codemods: Sequence["CodemodRef | type[Codemod]"]) -> None:
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
    becomes ``failed`` with the reason and the file keeps its old content. An interruption that
    arrives once the file is replaced carries the result (:func:`finished_before`)."""
    source = result.source
    assert source is not None and result.new_text is not None
    try:
        atomic_replace(result.path, source.encode(result.new_text), source.raw, root=source.root, folder=source.folder)
    except KeyboardInterrupt as stop:
        if getattr(stop, "written", False):
            stop.result = result  # type: ignore[attr-defined]
        raise
    except (WriteError, OSError) as exc:
        result.status = "failed"
        result.error = str(exc) if isinstance(exc, WriteError) else f"cannot write: {exc.strerror or exc}"
    except UnicodeEncodeError as exc:
        result.status = "failed"
        result.error = f"rewrite cannot be encoded as {source.encoding}: {exc.reason}"
