"""The step limit and the run record (always installed).

* After ``HARNESS_STEPS`` optimizer steps (all optimizers together, counted by a global
  ``torch.optim.optimizer.register_optimizer_step_post_hook``) the process writes its record,
  prints ``[run-harness] step limit reached`` on stderr and leaves with status 86 (``os._exit``:
  no ``try``/``except`` of the script can swallow it). ``HARNESS_FORWARDS`` does the same after
  that many ``nn.Module`` calls (a global forward hook), for loops without an optimizer.
* ``random``, NumPy and torch are seeded with 0 when imported, so that the three variants of a
  script start alike (unseeded tutorials otherwise fail at a different idiom from run to run);
  a script's own ``seed`` calls still win.
* Each process writes ``$HARNESS_RECORD_DIR/record.<pid>.json``: steps, module calls, how it
  ended, its uncaught exception (as the traceback's last line shows it) and, where CUDA is
  available, ``torch.cuda.max_memory_allocated()`` at exit (the ``--device cuda`` check that the
  run allocated on the GPU at all).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import sys
import threading
import traceback

LIMIT_STATUS = 86
MARKER = "[run-harness] step limit reached"

_state = {
    "pid": os.getpid(),
    "top": False,
    "steps": 0,
    "forwards": 0,
    "ended": None,
    "exception": None,
    "cuda_available": None,
    "cuda_max_memory_allocated": None,
}
_written = False
_lock = threading.Lock()


def _int_env(name: str) -> int:
    try:
        return int(os.environ.get(name, "0") or 0)
    except ValueError:
        return 0


def _cuda_figures() -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        available = bool(torch.cuda.is_available())
        _state["cuda_available"] = available
        if available and torch.cuda.is_initialized():
            _state["cuda_max_memory_allocated"] = int(torch.cuda.max_memory_allocated())
        elif available:
            _state["cuda_max_memory_allocated"] = 0
    except Exception as error:  # a record must still be written
        _state["cuda_error"] = repr(error)


def write_record(ended: str) -> None:
    global _written
    with _lock:
        if _state["ended"] is None or ended == "limit":
            _state["ended"] = ended
        _cuda_figures()
        folder = os.environ.get("HARNESS_RECORD_DIR")
        if not folder:
            return
        _state["pid"] = os.getpid()
        path = os.path.join(folder, f"record.{os.getpid()}.json")
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as out:
                json.dump(_state, out)
            os.replace(path + ".tmp", path)
            _written = True
        except OSError:
            pass


def _stop(what: str) -> None:
    write_record("limit")
    try:
        sys.stdout.flush()
    except Exception:
        pass
    sys.stderr.write(f"\n{MARKER} ({what})\n")
    sys.stderr.flush()
    os._exit(LIMIT_STATUS)


def _on_step(optimizer, args, kwargs) -> None:
    _state["steps"] += 1
    limit = _int_env("HARNESS_STEPS")
    if limit and _state["steps"] >= limit:
        _stop(f"{_state['steps']} optimizer steps")


def _on_forward(module, args, output) -> None:
    _state["forwards"] += 1
    limit = _int_env("HARNESS_FORWARDS")
    if limit and _state["forwards"] >= limit:
        _stop(f"{_state['forwards']} module calls")


def _patch_torch(torch) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    torch.manual_seed(0)  # the same start in the three variants (a script's own seed still wins)

    register_optimizer_step_post_hook(_on_step)
    if _int_env("HARNESS_FORWARDS"):
        from torch.nn.modules.module import register_module_forward_hook

        register_module_forward_hook(_on_forward)


def _exception_record(exc_type, exc, tb) -> None:
    if exc_type is None or issubclass(exc_type, SystemExit):
        return
    last = traceback.format_exception_only(exc_type, exc)[-1].strip()
    name, _, message = last.partition(": ")
    _state["exception"] = {"type": name, "name": exc_type.__name__, "message": message}
    _state["ended"] = "exception"


def install() -> None:
    from . import when_imported

    top = os.environ.get("HARNESS_TOP_PID")
    if not top:
        os.environ["HARNESS_TOP_PID"] = str(os.getpid())
        _state["top"] = True
    when_imported("torch", _patch_torch)
    random.seed(0)
    when_imported("numpy", lambda np: np.random.seed(0))

    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        _exception_record(exc_type, exc, tb)
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    previous_thread_hook = threading.excepthook

    def thread_hook(args):
        if _state["exception"] is None:
            _exception_record(args.exc_type, args.exc_value, args.exc_traceback)
        previous_thread_hook(args)

    threading.excepthook = thread_hook
    atexit.register(lambda: write_record("exit"))
    os.register_at_fork(after_in_child=_forked)


def _forked() -> None:
    _state.update(pid=os.getpid(), top=False, ended=None, exception=None)
