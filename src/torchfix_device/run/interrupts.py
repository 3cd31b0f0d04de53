"""How a run stops when it is asked to: Ctrl-C (SIGINT), SIGTERM or SIGHUP.

All three stop a run the same way: the file being written is finished (writes hold these
signals until the file is replaced or untouched, :func:`torchfix_device.files.sources.signals_deferred`),
pool workers finish the file they are on, the results so far are reported, and the process
exits with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), saying
how far it got. Once a run is stopping, further signals are ignored until it has (a second
Ctrl-C used to abandon the workers' last results or hang); SIGKILL still ends it at once, and
the workers with it (:mod:`torchfix_device.run.parallel`).

The command line (:func:`install`) goes through three phases: *before* the runner starts, a
signal ends the process at once, saying nothing was written; while it *works* (the run, then
the rewrites held for the git check or the review), a signal stops the run as above; once the
writing is over (*finishing*: the summary, the report), signals are ignored so that the summary
and the exit status stay true. Code that calls the runner without :func:`install` keeps the
handlers it had.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

STOP_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C raises ``KeyboardInterrupt``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_phase: list[str] = []
"""Empty until :func:`install`; then ``before``, ``working`` or ``finishing``."""


def _on_signal(signum: int, frame: object) -> None:
    phase = _phase[0] if _phase else "working"
    if phase == "finishing":
        return
    if phase == "before":
        sys.stderr.write(f"{word(signum)} before any file was processed; nothing was written\n")
        raise SystemExit(exit_code(signum))
    if signum == signal.SIGINT:
        raise KeyboardInterrupt()
    raise Terminated(signum)


def install() -> None:
    """The command line's handling of Ctrl-C, SIGTERM and SIGHUP (main thread only; a signal
    that is ignored, as SIGHUP under ``nohup``, stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _on_signal)
    _phase[:] = ["before"]


def working() -> None:
    """The runner has started: a signal now stops the run and reports how far it got."""
    if _phase:
        _phase[:] = ["working"]


def finishing() -> None:
    """Every file is written: signals are ignored from now on, the summary and the exit included.

    Ignored by the operating system (``SIG_IGN``), not only by our handler: at exit the
    interpreter puts the default action back for the handlers it installed, so a second Ctrl-C
    arriving then ended the process by SIGINT (status -2) instead of 130; an ignored signal
    stays ignored to the end."""
    if _phase:
        _phase[:] = ["finishing"]
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is _on_signal:
                    signal.signal(signum, signal.SIG_IGN)


def signal_of(stop: BaseException) -> int:
    """The signal behind an interruption (SIGINT for a plain ``KeyboardInterrupt``)."""
    return getattr(stop, "signum", signal.SIGINT)


def exit_code(signum: int) -> int:
    """128 + the signal's number, as shells report a process ended by it."""
    return 128 + int(signum)


def word(signum: int) -> str:
    return "interrupted" if signum == signal.SIGINT else "terminated"


@contextmanager
def ignoring() -> Iterator[None]:
    """Ignore Ctrl-C, SIGTERM and SIGHUP inside the block (a run already stopping finishes
    stopping), then put the handlers back (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for signum in previous:
        signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)  # type: ignore[arg-type]
