"""A time and memory budget for one file (``[tool.torchfix-device] file-time-limit`` and
``file-memory-limit``; docs/data-safety.md).

A file whose transform takes more processor time, or makes the process grow by more memory,
than its budget is given up: the transform is stopped (:class:`OverBudget`), the file is
reported and left untouched, and the run goes on with the other files. Processor time, not
wall time: a loaded machine or ``--jobs`` beyond the cores does not make a file fail.

How: while a file is transformed, a timer (``setitimer``, every 50 ms) wakes the process's main
thread, which compares the processor time spent and the resident memory (Linux:
``/proc/self/statm``; elsewhere the peak from ``getrusage``) with the budget and raises
:class:`OverBudget` in the transform when one is passed. It applies in pool workers and in the
main process alike; where there is no such timer (Windows) or off the main thread, files run
without a budget. Writing is never under the timer: a file is written whole or not at all.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from torchfix_device.options import DEFAULT_MEMORY, DEFAULT_SECONDS  # noqa: F401 - the budget's defaults, kept with the options

TICK = 0.05
_UNITS = {"": 1024**2, "K": 1024, "KB": 1024, "M": 1024**2, "MB": 1024**2, "G": 1024**3, "GB": 1024**3}


class OverBudget(BaseException):
    """Raised in a transform that passed its budget. A ``BaseException``, as ``KeyboardInterrupt``
    is: an ``except Exception`` on the way must not swallow it."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        """``time limit`` or ``memory limit``: how the run's summary counts it."""


def parse_memory(value: object) -> int | None:
    """A memory size from the configuration: an integer (MB) or a string such as ``"2GB"``,
    ``"512 MB"``, ``"1.5G"``; 0 means no limit (None). Raises ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError("a memory size, not true or false")
    if isinstance(value, (int, float)):
        number, unit = float(value), ""
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]B?)?\s*", value.upper())
        if match is None:
            raise ValueError(f"{value!r} is not a memory size such as \"2GB\" or \"512MB\"")
        number, unit = float(match.group(1)), match.group(2) or ""
    else:
        raise ValueError("a memory size such as \"2GB\", or a number of MB")
    if number < 0:
        raise ValueError("a memory size cannot be negative")
    size = int(number * _UNITS[unit])
    return size or None


def parse_seconds(value: object) -> float | None:
    """A time limit from the configuration: seconds (a number); 0 means no limit (None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError("a number of seconds (0: no limit)")
    return float(value) or None


def describe_memory(size: int) -> str:
    return f"{size / 1024**3:g} GB" if size >= 1024**3 else f"{size / 1024**2:g} MB"


def _resident() -> int | None:
    """This process's resident memory in bytes (its peak where the current size is unknown)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
    except (ImportError, OSError):
        return None


def _usable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def enforced(seconds: float | None, memory: int | None) -> Iterator[None]:
    """Run the block under the budget (``None``: no limit of that kind); raise
    :class:`OverBudget` inside it when the file passes one."""
    if (seconds is None and memory is None) or not _usable():
        yield
        return
    start_cpu = time.process_time()
    start_memory = _resident() if memory is not None else None
    armed = [True]

    def check(signum: int, frame: object) -> None:
        if not armed[0]:
            return
        if seconds is not None and time.process_time() - start_cpu > seconds:
            armed[0] = False
            raise OverBudget(
                f"took more than the {seconds:g} s time limit for one file (file-time-limit); left unchanged", "time limit"
            )
        if memory is not None and start_memory is not None:
            now = _resident()
            if now is not None and now - start_memory > memory:
                armed[0] = False
                raise OverBudget(
                    f"needed more than the {describe_memory(memory)} memory limit for one file (file-memory-limit); "
                    "left unchanged", "memory limit",
                )

    previous = signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, TICK, TICK)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
