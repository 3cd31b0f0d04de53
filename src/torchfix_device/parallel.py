"""``--jobs N``: files spread over a pool of processes, results kept in display order.

Work is handed out biggest file first (a large file started last would keep one worker busy
after the others finish); progress is reported as each file finishes, and the results are put
in the order of ``files``, so the output is the same as with one process. Workers ignore SIGINT: on Ctrl-C each finishes the file it is on (writes are
atomic), the files not started are dropped, and every finished result is kept for the report.
A pool that cannot start or breaks (a worker killed, say, for memory) leaves the remaining files
to be processed here, one by one.
"""

from __future__ import annotations

import signal
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from torchfix_device.job import process_file
from torchfix_device.options import default_jobs  # noqa: F401 - where it used to live
from torchfix_device.results import FileResult

if TYPE_CHECKING:
    from torchfix_device.catalog import CodemodRef
    from torchfix_device.codemod import Codemod
    from torchfix_device.cache import ResultCache
    from torchfix_device.options import RunOptions
    from torchfix_device.progress import FileProgress


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
) -> None:
    """Append one result per file of ``files`` to ``results``, in the order of ``files``.

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
            done(process_file(path, codemods, **settings))
        return
    futures: dict[int, Future] = {}
    finished: dict[int, FileResult] = {}
    try:
        for index in sorted(range(len(files)), key=lambda i: -_size(files[i])):
            futures[index] = pool.submit(process_file, files[index], codemods, **settings)
        index_of = {future: index for index, future in futures.items()}
        for future in as_completed(futures.values()):  # progress as files finish, not in path order
            index = index_of[future]
            try:
                finished[index] = future.result()
            except BrokenProcessPool:
                finished[index] = process_file(files[index], codemods, **settings)
            if progress is not None:
                progress.advance(finished[index].path)
        results.extend(finished[index] for index in range(len(files)))
    except KeyboardInterrupt:
        pool.shutdown(wait=True, cancel_futures=True)
        for index in range(len(files)):
            future = futures.get(index)
            if index in finished:
                results.append(finished[index])
            elif future is not None and future.done() and not future.cancelled() and future.exception() is None:
                results.append(future.result())
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
