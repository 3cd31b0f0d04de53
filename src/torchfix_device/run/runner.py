"""A run, top to bottom: one result per file, in display order.

1. **Find files** (:mod:`torchfix_device.files.selection`): the Python files and notebooks under
   the paths given, past skipped folders, ``--exclude`` patterns and what git ignores; a path
   that holds none gets a result saying why. ``--shard`` keeps its share.
2. **One job per file** (:mod:`torchfix_device.run.job`; with ``--jobs N`` in a process pool,
   :mod:`torchfix_device.run.parallel`): read the file; a cached result answers at once, otherwise
   the engine (:mod:`torchfix_device.engine`) takes it:

   a. **first stage**: the stdlib ``ast`` says which codemods may match; a file where none may
      is never parsed by libcst;
   b. **parse once** with libcst;
   c. **codemods until stable**: passes over the one tree until it stops changing;
   d. **re-check**: the rewrite must compile, and lines no codemod touched keep their bytes.
3. **Write atomically** (:func:`torchfix_device.run.job.write_result`: temp file, fsync, rename;
   never over a file changed meanwhile).
4. **Report**: the results go back to the caller (the CLI prints them through
   :mod:`torchfix_device.report.console`).

The runner never raises on a bad file: every file yields one :class:`FileResult` (changed,
unchanged, failed with a reason, or skipped); Ctrl-C raises :class:`Interrupted` with the results
so far. It imports no libcst: a run answered from the cache never loads libcst or the codemods.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from torchfix_device.facts.legacy_function_run import RunLegacyFunctions, scan_run
from torchfix_device.facts.legacy_functions import CODE as LEGACY_CODE, may_define
from torchfix_device.files.selection import MAX_FILE_BYTES, display_path, find_files, skip_reason
from torchfix_device.files.sources import remove_stale_temp_files
from torchfix_device.run import interrupts
from torchfix_device.run.interrupts import signal_of
from torchfix_device.run.job import finished_before, process_file
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions
from torchfix_device.facts.project_attributes import Imports, RunAttributes, resolved_imports, run_attributes
from torchfix_device.facts.project_placements import groups_on_cpu, places
from torchfix_device.facts.project_classes import (
    class_bases, class_names, classes_of_data, cuda_taking_nothing, imported_modules, reachable_classes, subclassed_classes, subclasses_of,
    trees_kept,
)
from torchfix_device.files.safe_paths import read_regular
from torchfix_device.facts.star_imports import Resolver, RunStars, may_hold_star_import, resolve_star_imports
from torchfix_device.results import FileResult, Interrupted
from torchfix_device.files.safe_paths import root_of

if TYPE_CHECKING:
    from torchfix_device.run.cache import ResultCache
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.report.progress import FileProgress
    from torchfix_device.run.shard import Shard


def run(
    paths: Sequence[Path],
    codemods: Sequence["CodemodRef | type[Codemod]"],
    *,
    exclude: Iterable[str] = (),
    options: RunOptions | None = None,
    progress: "FileProgress | None" = None,
    jobs: int = 1,
    cache: "ResultCache | None" = None,
    shard: "Shard | None" = None,
    tidy: bool = False,
) -> list[FileResult]:
    """Process every Python file under ``paths``; one result per file, in display order. The
    ``options`` say how (the unsafe fixes too, and whether files are written in place).

    ``jobs`` > 1 spreads the files over that many processes (same results, same order);
    ``shard`` keeps only its deterministic share of the files. ``progress`` (see
    :mod:`torchfix_device.report.progress`) is told the file count and each file done. ``tidy``
    (an in-place ``apply``): first remove the temp files that killed runs left in the folders
    of the files (:func:`~torchfix_device.files.sources.remove_stale_temp_files`).
    Ctrl-C raises :class:`Interrupted` carrying the results of the files finished so far.
    """
    files: list[Path] = []
    problems: list[FileResult] = []
    results: list[FileResult] = []
    interrupts.working()
    try:
        settings = options or DEFAULT_OPTIONS
        files, problems = find_files(paths, exclude, respect_gitignore=settings.respect_gitignore, force_exclude=settings.force_exclude)
        roots = [p for p in paths if p.is_dir() and not p.is_symlink()]
        # over every file, before sharding: one answer for all shards
        own, known, bare, stars, legacy, attributes, unimported = _project_facts(
            files, roots, settings, legacy=any(c.code == LEGACY_CODE for c in codemods)
        )
        if attributes or unimported:
            options = replace(options or DEFAULT_OPTIONS, project_attributes=attributes, unimported=unimported)
        if legacy:
            options = replace(options or DEFAULT_OPTIONS, legacy_functions=legacy)
            cache = cache.for_run_facts("legacy", legacy.digest) if cache is not None else None
        if own:
            options = replace(options or DEFAULT_OPTIONS, own_move_classes=own, known_classes=known, cuda_taking_nothing=bare)
        if stars:
            options = replace(options or DEFAULT_OPTIONS, star_imports=stars)
        if shard is not None:
            files = shard.select(files, display_path)
        if tidy:
            _remove_stale_temp_files(files)
        if progress is not None:
            progress.start(len(files))
        _process_files(
            files, codemods, results, options=options, progress=progress,
            jobs=jobs, cache=cache, roots=roots,
        )
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or SIGHUP (torchfix_device.run.interrupts)
        late = finished_before(stop)
        if late is not None and all(late is not r for r in results):
            results.append(late)  # written just before the interruption took effect
        raise Interrupted(problems + results, len(results), len(files), signum=signal_of(stop)) from None
    return problems + results


def _project_facts(
    files: Sequence[Path], roots: Sequence[Path], options: RunOptions = DEFAULT_OPTIONS, *, legacy: bool = False,
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]], frozenset[str], RunStars, RunLegacyFunctions, RunAttributes, frozenset[str]]:
    """What the codemods learn from every file of the run, each file read once: for each file,
    the classes that move themselves that it can reach by import and, where there are such
    classes, the other classes of the run it reaches (an instance of one does not move itself),
    and those of them whose every ``cuda()`` in the run takes no argument
    (:mod:`torchfix_device.facts.project_classes`); what the star imports bind
    (:mod:`torchfix_device.facts.star_imports`); and, with ``legacy`` (TFD017 is selected), the
    legacy autograd Functions and their uses (:mod:`torchfix_device.facts.legacy_function_run`;
    the files are read again only when there is one); what the attributes of the classes each
    file imports from the run hold (:mod:`torchfix_device.facts.project_attributes`), and whether its
    import group keeps its values on the CPU (:mod:`torchfix_device.facts.project_placements`); and the files
    that no file of the run imports (:func:`unimported_files`). Unreadable files are left out (the run
    reports them)."""
    with trees_kept():  # the passes below over every file parse each once
        return _gathered(files, roots, options, legacy=legacy)


def _gathered(
    files: Sequence[Path], roots: Sequence[Path], options: RunOptions, *, legacy: bool,
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]], frozenset[str], RunStars, RunLegacyFunctions, RunAttributes, frozenset[str]]:
    resolver = Resolver(roots)
    defined: dict[Path, frozenset[str]] = {}
    programs: dict[Path, bytes] = {}
    starred: dict[Path, bytes] = {}
    defining: dict[Path, bytes] = {}
    for path in files:
        if path.suffix not in (".py", ".ipynb"):
            continue
        try:
            data = read_regular(path).data  # never a FIFO or a device: a read that never ends
        except OSError:
            continue
        if path.suffix == ".ipynb":  # its cells as one program (``from main import *`` in a cell)
            program = _notebook_program(data) if may_hold_star_import(data) or b"import" in data else None
            if program is not None:
                programs[path] = program.encode("utf-8")
                if may_hold_star_import(data):
                    starred[path] = programs[path]
            continue
        programs[path] = data
        classes = classes_of_data(data)
        if classes:
            defined[resolver.absolute(path)] = classes
        if may_hold_star_import(data):
            starred[path] = data
        if legacy and may_define(data):
            defining[path] = data
    stars = resolve_star_imports(files, starred, roots) if starred else RunStars({})
    absolute = {resolver.absolute(path): data for path, data in programs.items()}
    imports: dict[Path, "list[tuple[str, int]] | None"] = {}
    placing: set[Path] = set()
    bases: dict[Path, dict[str, frozenset[str]]] = {}
    taking: dict[Path, frozenset[str]] = {}
    for path, data in absolute.items():  # one parse of each file serves them all (``parsed`` keeps the last 64)
        imports[path] = imported_modules(data)
        if places(data):
            placing.add(path)
        if b"class " in data:
            bases[path] = class_bases(data)
        if path in defined:
            taking[path] = cuda_taking_nothing(data) & defined[path]
    functions = RunLegacyFunctions()
    if defining:
        limit = options.max_file_bytes or MAX_FILE_BYTES

        def will_skip(path: Path, text: str) -> bool:
            return skip_reason(text, options) is not None or len(text.encode("utf-8", "replace")) > limit

        def reach(defined: Mapping[Path, frozenset[str]]) -> Mapping[Path, frozenset[str]]:
            return reachable_classes(defined, imports, resolver.module_files, resolver.importable)

        functions = scan_run(files, defining, _read_or_none, will_skip=will_skip, shown=display_path, reach=reach, notebook_code=_notebook_program)
    shown = {resolver.absolute(path): str(path) for path in programs}
    resolved = resolved_imports(imports, resolver.module_files)
    attributes = run_attributes(
        absolute, shown, resolved, resolver.importable, groups_on_cpu(absolute, resolved, resolver.importable, placing),
        subclassed_classes(bases, resolved),
    )
    unimported = unimported_files(absolute, shown, resolved, resolver)
    if not defined:
        return {}, {}, frozenset(), stars, functions, attributes, unimported

    grown, reached = subclasses_of(
        defined, absolute, lambda classes: reachable_classes(classes, imports, resolver.module_files, resolver.importable)
    )
    everything = reachable_classes(
        {path: class_names(data) for path, data in absolute.items()}, imports, resolver.module_files, resolver.importable
    )
    own = {str(path): reached[resolver.absolute(path)] for path in programs}
    known = {str(path): everything[resolver.absolute(path)] - reached[resolver.absolute(path)] for path in programs}
    own = {name: classes for name, classes in own.items() if classes}
    bare = _taking_nothing(grown, taking)
    return own, {name: c for name, c in known.items() if c}, bare, stars, functions, attributes, unimported


def _taking_nothing(grown: Mapping[Path, frozenset[str]], taking: Mapping[Path, frozenset[str]]) -> frozenset[str]:
    """The names of the run's classes that move themselves (``grown``, subclasses included) every
    class of which has a ``cuda(self)`` of its own taking nothing (``taking``, by file:
    :func:`~torchfix_device.facts.project_classes.cuda_taking_nothing`); a subclass that inherits
    its move, or a class of the same name elsewhere that takes more, keeps the name out."""
    other = {name for path, classes in grown.items() for name in classes - taking.get(path, frozenset())}
    return frozenset().union(*taking.values()) - other


def unimported_files(absolute: dict[Path, bytes], shown: dict[Path, str], resolved: Imports, resolver: Resolver) -> frozenset[str]:
    """The files of ``absolute`` (the run's programs, notebooks' included) that no other file of the
    run imports (``resolved``: each file's imports), nor may import (a file importing dynamically
    may import any file it can reach). The run is taken as the project, as for the classes that
    move themselves: a file left out of it is not seen. (Whether a file was named or found in a
    folder named changes nothing: a warm run finds its cached results whichever way the files are
    named.)"""
    imported: set[Path] = set()
    for path, found in resolved.items():
        if found is None:
            can = resolver.importable(path)
            imported.update(other for other in absolute if other != path and can(other))
        else:
            imported.update(target for _, _, target in found)
    return frozenset(shown[path] for path in absolute if path not in imported)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return read_regular(path).data
    except OSError:
        return None


def _notebook_program(data: bytes) -> str | None:
    from torchfix_device.run import notebook  # libcst and nbformat: only for a notebook that may spell a name asked about

    return notebook.program_of(data)


def _process_files(
    files: list[Path],
    codemods: Sequence["CodemodRef | type[Codemod]"],
    results: list[FileResult],
    *,
    options: RunOptions | None,
    progress: "FileProgress | None",
    jobs: int,
    cache: "ResultCache | None",
    roots: Sequence[Path] = (),
) -> None:
    """Append one job's result per file of ``files`` to ``results``, in the order of ``files``
    (``roots``: the folders named, which the files were found under)."""
    # Files with a cached result are done here: a pool (new processes importing libcst)
    # costs more than reading a cache entry. The rest go to the pool when there are several.
    settings = dict(options=options, cache=cache)
    pooled: list[Path] = []
    if jobs > 1 and len(files) > 1 and cache is not None:
        for path in files:  # each file read once: its cached result, or None for the pool
            result = process_file(path, codemods, cached_only=True, root=root_of(path, roots), **settings)
            if result is None:
                pooled.append(path)
                continue
            results.append(result)
            if progress is not None:
                progress.advance(path)
    elif jobs > 1 and len(files) > 1:
        pooled = list(files)
    else:
        for path in files:
            results.append(process_file(path, codemods, root=root_of(path, roots), **settings))
            if progress is not None:
                progress.advance(path)
    if len(pooled) == 1:
        results.append(process_file(pooled[0], codemods, root=root_of(pooled[0], roots), **settings))
        if progress is not None:
            progress.advance(pooled[0])
    elif pooled:
        from torchfix_device.run.parallel import process_in_pool  # process machinery: only for a pool

        process_in_pool(
            pooled, codemods, results, cache=cache, jobs=jobs,
            options=options, progress=progress, roots=roots,
        )
    order = {path: index for index, path in enumerate(files)}
    results.sort(key=lambda result: order[result.path])


def _remove_stale_temp_files(files: Sequence[Path]) -> None:
    """The temp files of runs killed between writing and renaming, in the files' folders."""
    names: dict[Path, set[str]] = {}
    for path in files:
        names.setdefault(path.parent, set()).add(path.name)
    for folder, inside in names.items():
        remove_stale_temp_files(folder, frozenset(inside))
