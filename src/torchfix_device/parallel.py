"""``--jobs N``: files spread over a pool of processes, results kept in display order.

Work is handed out biggest file first (a large file started last would keep one worker busy
after the others finish), and collected in the order of ``files``, so the output is the same as
with one process. Workers ignore SIGINT: on Ctrl-C each finishes the file it is on (writes are
atomic), the files not started are dropped, and every finished result is kept for the report.
A pool that cannot start or breaks (a worker killed, say, for memory) leaves the remaining files
to be processed here, one by one.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from torchfix_device.job import process_file
from torchfix_device.results import FileResult
from torchfix_device.safe_paths import root_of

if TYPE_CHECKING:
    from torchfix_device.catalog import CodemodRef
    from torchfix_device.codemod import Codemod
    from torchfix_device.cache import ResultCache
    from torchfix_device.options import RunOptions
    from torchfix_device.progress import FileProgress


def default_jobs() -> int:
    """The number of cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def process_in_pool(
    files: Sequence[Path],
    codemods: Sequence["CodemodRef | type[Codemod]"],
    results: list[FileResult],
    *,
    write: bool,
    unsafe_fixes: bool,
    cache: "ResultCache | None",
    jobs: int,
    options: "RunOptions | None" = None,
    progress: "FileProgress | None" = None,
    roots: Sequence[Path] = (),
) -> None:
    """Append one result per file of ``files`` to ``results``, in the order of ``files``
    (``roots``: the folders named, which the files were found under).

    On Ctrl-C, the results of every file finished by then are appended (in order) before
    ``KeyboardInterrupt`` propagates.
    """
    settings = dict(write=write, unsafe_fixes=unsafe_fixes, cache=cache, options=options)

    def done(result: FileResult) -> None:
        results.append(result)
        if progress is not None:
            progress.advance(result.path)

    try:
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(files)), initializer=_ignore_sigint)
    except (OSError, NotImplementedError, ValueError):
        for path in files:
            done(process_file(path, codemods, root=root_of(path, roots), **settings))
        return
    futures: dict[int, Future] = {}
    collected = 0
    try:
        for index in sorted(range(len(files)), key=lambda i: -_size(files[i])):
            futures[index] = pool.submit(process_file, files[index], codemods, root=root_of(files[index], roots), **settings)
        for index in range(len(files)):
            try:
                done(futures[index].result())
            except BrokenProcessPool:
                done(process_file(files[index], codemods, root=root_of(files[index], roots), **settings))
            collected = index + 1
    except KeyboardInterrupt:
        pool.shutdown(wait=True, cancel_futures=True)
        for index in range(collected, len(files)):
            future = futures.get(index)
            if future is not None and future.done() and not future.cancelled() and future.exception() is None:
                results.append(future.result())
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
