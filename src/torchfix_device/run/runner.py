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
from typing import TYPE_CHECKING, Iterable, Sequence

from torchfix_device.files.disk_log import recording
from torchfix_device.files.selection import display_path, find_files
from torchfix_device.files.sources import remove_stale_temp_files
from torchfix_device.run import interrupts
from torchfix_device.run.interrupts import signal_of
from torchfix_device.run.job import finished_before, process_file, write_result
from torchfix_device.run.run_memo import RunMemo, answered
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions
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
        memo = RunMemo(cache, files, roots, settings) if cache is not None else None
        kept = memo.kept() if memo is not None else None
        if kept is not None:  # a tree as the last run saw it: every result may be in the cache
            assert cache is not None
            chosen = shard.select(files, display_path) if shard is not None else files
            if tidy:
                _remove_stale_temp_files(chosen)
            early = answered(kept, cache, chosen, codemods, settings, roots)
            if early is not None:  # written one by one, as jobs write: a Ctrl-C reports what was
                files = chosen
                if progress is not None:
                    progress.start(len(files))
                for result in early:
                    if settings.write and result.status == "changed":
                        write_result(result)
                    results.append(result)
                    if progress is not None:
                        progress.advance(result.path)
                return problems + results
        from torchfix_device.run.run_facts import LEGACY_CODE, MAX_MODULE_BYTES  # the facts: not for a run the cache answers whole

        learns_legacy = any(c.code == LEGACY_CODE for c in codemods)
        # over every file, before sharding: one answer for all shards
        with recording() as noted:
            own, known, bare, stars, legacy, attributes, unimported = _project_facts(files, roots, settings, legacy=learns_legacy)
        if attributes or unimported:
            options = replace(options or DEFAULT_OPTIONS, project_attributes=attributes, unimported=unimported)
        if legacy:
            options = replace(options or DEFAULT_OPTIONS, legacy_functions=legacy)
            cache = cache.for_run_facts("legacy", legacy.digest) if cache is not None else None
        if own:
            options = replace(options or DEFAULT_OPTIONS, own_move_classes=own, known_classes=known, cuda_taking_nothing=bare)
        if stars:
            options = replace(options or DEFAULT_OPTIONS, star_imports=stars)
        if memo is not None and cache is not None:
            cache = cache.with_file_salts(memo.keep(files, codemods, options or DEFAULT_OPTIONS, cache, noted, MAX_MODULE_BYTES))
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
) -> tuple:
    """What the codemods learn from every file of the run (:func:`torchfix_device.run.run_facts.project_facts`),
    imported only by a run the cache does not answer whole."""
    from torchfix_device.run import run_facts

    return run_facts.project_facts(files, roots, options, legacy=legacy)


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
