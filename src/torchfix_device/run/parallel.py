"""``--jobs N``: files spread over a pool of processes, results kept in display order.

Where workers are forked (Linux), the engine and the codemods are imported before the pool
starts, so that no worker imports them again. Each worker gets the run's options (its facts:
77 MB pickled on the torch tree) and cache once, when it starts; a task is a path. Work is handed out biggest file first (a large file started last would keep one worker busy
after the others finish); progress is reported as each file finishes, and the results are put
in the order of ``files``, so the output is the same as with one process. Workers ignore SIGINT and SIGTERM (the main process decides): on Ctrl-C or
SIGTERM each finishes the file it is on (writes are atomic), the files not started are dropped,
and every finished result is kept for the report; further signals are ignored meanwhile
(:mod:`torchfix_device.run.interrupts`). A pool that cannot start or breaks (a worker killed, say,
for memory) leaves the remaining files to be processed here, one by one.

Workers never outlive the main process: on Linux the kernel sends them SIGUSR1 when it dies
(``prctl(PR_SET_PDEATHSIG)``), elsewhere a thread of each worker watches the main process's
pid; either way the worker exits at once, or right after the write it is in the middle of.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from torchfix_device.run.interrupts import STOP_SIGNALS, ignoring
from torchfix_device.run.job import finished_before, process_file
from torchfix_device.options import default_jobs  # noqa: F401 - where it used to live
from torchfix_device.results import FileResult
from torchfix_device.files.safe_paths import process_alive, root_of

if TYPE_CHECKING:
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.run.cache import ResultCache
    from torchfix_device.options import RunOptions
    from torchfix_device.report.progress import FileProgress


PARENT_GONE = getattr(signal, "SIGUSR1", None)
"""The signal a worker gets when the main process dies (held during a write, like Ctrl-C)."""
_PR_SET_PDEATHSIG = 1


def _exit_now(signum: int, frame: object) -> None:
    os._exit(1)


_shared: dict[str, object] = {}
"""A worker's options and cache (:func:`_process_shared`), given once when it starts."""


def _init_worker(parent: int, shared: "dict[str, object] | None" = None) -> None:
    """A worker: Ctrl-C and SIGTERM are the main process's to handle; exit when it is gone.
    ``shared``: the options and cache of every file it will get (forked: not pickled at all)."""
    if shared is not None:
        _shared.clear()
        _shared.update(shared)
    for signum in STOP_SIGNALS:  # Ctrl-C, SIGTERM, SIGHUP
        signal.signal(signum, signal.SIG_IGN)
    if PARENT_GONE is not None:
        signal.signal(PARENT_GONE, _exit_now)
    if not _die_with_parent():
        threading.Thread(target=_watch_parent, args=(parent,), name="torchfix-device-parent-watch", daemon=True).start()
    if not process_alive(parent):  # gone before the kernel could be told to warn us
        os._exit(1)


def _die_with_parent() -> bool:
    """Ask Linux to send :data:`PARENT_GONE` when the parent dies; False where it cannot."""
    if not sys.platform.startswith("linux") or PARENT_GONE is None:
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(PARENT_GONE), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    """Where the kernel cannot warn: poll the main process's pid twice a second."""
    first = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != first or not process_alive(parent):
            if PARENT_GONE is not None:
                os.kill(os.getpid(), PARENT_GONE)  # the handler runs in the main thread, after any write
            else:  # pragma: no cover - no such signal (Windows)
                os._exit(1)
            return


def _preload(codemods: Sequence["CodemodRef | type[Codemod]"]) -> None:
    """Where the workers are forked, import the engine and the codemods here, once, before the
    pool starts: every worker begins with them (about 1 CPU-second each to import) instead of
    importing them again. A pool reaches here only for files the cache did not answer."""
    import multiprocessing

    if multiprocessing.get_start_method() != "fork":
        return
    import torchfix_device.engine  # noqa: F401 - libcst, the facts, the engine
    from torchfix_device.codemods.catalog import load_codemods

    load_codemods(codemods)


def _process_shared(path: Path, codemods: Sequence["CodemodRef | type[Codemod]"], root: Path | None) -> FileResult | None:
    """One file in a worker, with the options and cache it was given when it started: the run's
    facts (on the torch tree, every file's reachable classes, tables and star imports) went with
    every file, pickled and unpickled again each time."""
    return process_file(path, codemods, root=root, **_shared)  # type: ignore[arg-type]


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
    settings = dict(cache=cache, options=options)
    finished: dict[int, FileResult] = {}

    def advance(result: FileResult) -> None:
        if progress is not None:
            progress.advance(result.path)

    def here(index: int) -> FileResult:
        """Process a file in this process (no pool, or a broken one)."""
        try:
            return process_file(files[index], codemods, root=root_of(files[index], roots), **settings)
        except KeyboardInterrupt as stop:
            late = finished_before(stop)  # written just before the interruption: it counts
            if late is not None:
                finished[index] = late
            raise

    _preload(codemods)
    try:
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(files)), initializer=_init_worker, initargs=(os.getpid(), settings))
    except (OSError, NotImplementedError, ValueError):
        for index in range(len(files)):
            try:
                finished[index] = here(index)
            finally:
                if index in finished:
                    results.append(finished[index])
                    advance(finished[index])
        return
    futures: dict[int, Future] = {}
    try:
        for index in sorted(range(len(files)), key=lambda i: -_size(files[i])):
            futures[index] = pool.submit(_process_shared, files[index], codemods, root_of(files[index], roots))
        index_of = {future: index for index, future in futures.items()}
        for future in as_completed(futures.values()):  # progress as files finish, not in path order
            index = index_of[future]
            try:
                finished[index] = future.result()
            except BrokenProcessPool:
                finished[index] = here(index)
            advance(finished[index])
        results.extend(finished[index] for index in range(len(files)))
    except KeyboardInterrupt:
        with ignoring():  # stopping: the workers finish their files, their results are kept
            pool.shutdown(wait=True, cancel_futures=True)
            for index in range(len(files)):
                future = futures.get(index)
                if index in finished:
                    results.append(finished[index])
                elif future is not None and future.done() and not future.cancelled() and future.exception() is None:
                    results.append(future.result())
        raise
    finally:
        with ignoring():
            pool.shutdown(wait=True, cancel_futures=True)
