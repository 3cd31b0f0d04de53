"""Interpreters that start with torch already imported: the harness's runs, forked from one.

Each version of a model (original, rewrite) runs in an interpreter of its own, so that nothing
one leaves behind (its module, the shims, torch's global state) reaches the other. Importing
torch is most of what such an interpreter costs (about two CPU-seconds, against well under one
for a small model's run), and `verify` of a project starts two per model file. Here one server
process imports torch and the harness once; each run is a child forked from it, which takes its
own working folder, environment, arguments, and files for its standard output and error,
seeds Python's `random` afresh as a new interpreter would (the harness then seeds every
generator with 0), runs the harness's ``main`` and exits with its status. The server has run no
torch operation, so the children start as fresh interpreters that imported torch would (a
`DataLoader`'s workers are forked the same way).

Used on Linux for runs on the CPU and ``meta``; runs on CUDA, MPS or XPU (a device runtime must
not be inherited), on other systems, or where ``TORCHFIX_DEVICE_VERIFY_COLD=1`` asks for it,
start a new interpreter each (``python -m torchfix_device.verify.harness``). Each run gets its own
environment; a server serves only runs that agree with the one it started with on what is read
when an interpreter starts or imports torch (:data:`SETTLED`: the hash seed, ``PYTHONPATH``, the
locale, torch's, OpenMP's and the BLAS libraries' variables...); a run that does not gets a
server of its own.

A run may instead be a script, as ``python script.py args`` would run it (``script``: the run
harness's CPU runs of legacy scripts, ``benchmarks/run_harness``): the child becomes the leader
of a process group of its own (a timeout ends what it started too), runs ``sitecustomize`` again
under the run's environment (a new interpreter runs it at start; the server ran it under its own),
then the script as ``__main__`` with ``sys.argv`` and ``sys.path[0]`` set as Python sets them,
an uncaught exception going through ``sys.excepthook``, and the ``atexit`` functions at the end.
:func:`run_script` runs one and gives back its status and output (the run harness's warm runs,
and the tests' runs of a user's script before and after a migration).

The protocol, one JSON object per line: the client writes ``{"id", "argv", "cwd", "env",
"stdout", "stderr"}`` (and ``"script": true`` for a script) to start a run, ``{"kill": id}`` to
end one; the server answers ``{"id", "status"}`` when the run's process has ended (the exit
status; negative for a signal).
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

START_TIMEOUT_S = 180
"""A server not ready after this long (torch not importable, a hung import) is given up: the runs
start new interpreters."""

COLD_ENV = "TORCHFIX_DEVICE_VERIFY_COLD"
"""Set to 1: every run of the harness starts a new interpreter."""

SETTLED = (
    "PYTHON", "LC_", "LANG", "TZ", "HOME", "TMPDIR", "XDG_", "LD_", "MALLOC", "TORCH", "PYTORCH",
    "CUDA", "NVIDIA", "OMP_", "KMP_", "MKL_", "OPENBLAS", "GOTO", "NPY_", "NUMPY", "SYMPY", "MPMATH",
)
"""Prefixes of the variables a server must share with a run: read when the interpreter starts, or
when torch and what it imports are imported (the rest are the run's own)."""


def usable(devices: list[str]) -> bool:
    """Forked runs for these devices: on Linux, for the CPU and ``meta`` only (a CUDA, MPS or XPU
    runtime must not be inherited, and macOS's frameworks are not safe to use after a fork)."""
    return sys.platform.startswith("linux") and os.environ.get(COLD_ENV) != "1" \
        and all(d.split(":")[0] in ("cpu", "meta") for d in devices)


class Server:
    """One server process and the runs it has under way (safe to use from several threads)."""

    def __init__(self, env: dict[str, str], python: str | None = None) -> None:
        home = tempfile.mkdtemp(prefix="tfd-warm-")  # its working folder: nothing to import there
        self._proc = subprocess.Popen(
            [python or sys.executable, "-m", "torchfix_device.verify.warm"], cwd=home, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, list] = {}  # id -> [event, status]
        self.alive = select.select([self._proc.stdout], [], [], START_TIMEOUT_S)[0] != [] and self._proc.stdout.readline() == b"ready\n"
        self.started = self.alive
        """Whether it ever served: one that never did is not started again (each try would wait)."""
        if not self.alive:  # runs then start new interpreters, whose output says what went wrong
            self._proc.kill()
            self._proc.wait()
        os.rmdir(home)  # the server has started there (`-m` put it first on sys.path): not needed now
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:
                answer = json.loads(line)
                run_id, status = answer["id"], answer["status"]
            except (ValueError, TypeError, KeyError):
                continue  # not an answer (nothing else should write there)
            with self._lock:
                slot = self._waiting.pop(run_id, None)
            if slot is not None:
                slot[1] = status
                slot[0].set()
        with self._lock:  # the server is gone: no run under way will get an answer
            self.alive = False
            left, self._waiting = list(self._waiting.values()), {}
        for slot in left:
            slot[0].set()

    def _send(self, message: dict) -> None:
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        self._proc.stdin.flush()

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], out: Path, err: Path, timeout: float,
            script: bool = False) -> int | None:
        """The run's exit status; None after ``timeout`` seconds (the run is killed) or when the
        server ended (``alive`` is then False). ``script``: ``argv`` is ``[script, *arguments]``
        of a ``python script.py ...`` run (see the module's text)."""
        slot: list = [threading.Event(), None]
        with self._lock:
            if not self.alive:
                return None
            run_id = next(self._ids)
            self._waiting[run_id] = slot
            try:
                self._send({"id": run_id, "argv": argv, "cwd": str(cwd), "env": env, "stdout": str(out),
                            "stderr": str(err), "script": script})
            except OSError:  # the server has ended, and the reader has not seen it yet
                self.alive = False
                self._waiting.pop(run_id, None)
                return None
        if not slot[0].wait(timeout):
            with self._lock:
                if self.alive:
                    try:
                        self._send({"kill": run_id})
                    except OSError:
                        self.alive = False
            slot[0].wait(10)
            return None
        return slot[1]

    def close(self) -> None:
        try:
            self._proc.stdin.close()  # the server ends once its runs have
            self._proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()


_servers: dict[frozenset, Server] = {}
_servers_lock = threading.Lock()


def server_for(env: dict[str, str], python: str | None = None) -> Server | None:
    """This process's server for runs in ``env`` under the interpreter ``python`` (this one by
    default; it must be able to import torch and this package), started on first use, again after
    one ended; None if it cannot start."""
    key = frozenset([("", python or sys.executable), *((k, v) for k, v in env.items() if k.startswith(SETTLED))])
    with _servers_lock:
        server = _servers.get(key)
        if server is None or (server.started and not server.alive):
            if not _servers:
                import atexit

                atexit.register(close_all)
            server = _servers[key] = Server(env, python)
        return server if server.alive else None


def run_script(argv: list[str], cwd: Path, env: dict[str, str], timeout: float, *, python: str | None = None,
               server_env: dict[str, str] | None = None, scratch: Path | None = None) -> tuple[int | None, str, str] | None:
    """``python argv[0] argv[1:]`` in ``cwd`` and ``env``, forked from this process's server for
    ``server_env`` (``env`` by default) under ``python``: its exit status (None after ``timeout``
    seconds: killed, with what it started) and its standard output and error as text. None where
    no server can serve it (not Linux, ``TORCHFIX_DEVICE_VERIFY_COLD``, a server that cannot start
    or ended during the run): the caller starts a new interpreter instead. The output goes
    through files in a temporary folder under ``scratch`` (the system's by default)."""
    if not usable(["cpu"]):
        return None
    server = server_for(env if server_env is None else server_env, python)
    if server is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tfd-script-", dir=scratch) as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        status = server.run(argv, cwd, env, out, err, timeout, script=True)
        if status is None and not server.alive:
            return None
        texts = [path.read_bytes().decode("utf-8", "replace") if path.exists() else "" for path in (out, err)]
    return status, texts[0], texts[1]


def close_all() -> None:
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()


# -- the server process -------------------------------------------------------------------------
def _child(request: dict) -> None:
    """In the forked child: become the harness run, exit with its status (never returns)."""
    import random
    import traceback

    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, name in ((1, "stdout"), (2, "stderr")):
            fd = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, target)
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.chdir(request["cwd"])
        random.seed()
        if request.get("script"):
            os.setsid()
            code = _script(request["argv"])
            return
        sys.path[0] = request["cwd"]  # `python -m` puts the working folder first
        from torchfix_device.verify import harness

        sys.argv = [harness.__file__, *request["argv"]]
        code = harness.main(request["argv"])
    except SystemExit as exc:
        code = _exit_status(exc)
    except BaseException:  # noqa: BLE001 - what a new interpreter would print, and its status
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _script(argv: list[str]) -> int:
    """``python argv[0] argv[1:]`` in this (forked) process: its exit status."""
    import atexit
    import importlib
    import runpy
    import threading

    script = os.path.abspath(argv[0])
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(script)
    try:
        if "sitecustomize" in sys.modules:
            importlib.reload(sys.modules["sitecustomize"])
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc)
    except BaseException:  # noqa: BLE001 - as the interpreter does with an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # the interpreter waits for its threads
    except Exception:  # noqa: BLE001
        pass
    atexit._run_exitfuncs()
    return code


def _exit_status(exc: SystemExit) -> int:
    """The status ``raise SystemExit(code)`` gives an interpreter (a message is printed, status 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends the server quietly, with the runs
    import torch  # noqa: F401 - what every run would import first

    from torchfix_device.verify import checker, harness, legacy, user_harness  # noqa: F401

    with checker.DeviceChecker():  # torch's first meta operation imports ~800 modules (~2 s): here,
        layer = torch.nn.Linear(3, 2, device="meta")  # once; on meta tensors only, so no
        layer(torch.empty(4, 3, device="meta")).relu().sum()  # thread pool is started before a fork
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    runs: dict[int, int] = {}  # pid -> id
    groups: set[int] = set()  # the runs that lead a process group of their own (scripts)
    pending = b""
    open_input = True
    while open_input or runs:
        ready, _, _ = select.select([0] if open_input else [], [], [], 0.02 if runs else None)
        if ready:
            chunk = os.read(0, 65536)
            open_input = bool(chunk)
            if not open_input:  # the client has gone, and no one waits for these runs
                for pid in runs:
                    _kill(pid, pid in groups)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in filter(None, lines):
                request = json.loads(line)
                if "kill" in request:
                    for pid, run_id in runs.items():
                        if run_id == request["kill"]:
                            _kill(pid, pid in groups)
                    continue
                os.environ.clear()
                os.environ.update(request["env"])
                pid = os.fork()
                if pid == 0:
                    _child(request)
                runs[pid] = request["id"]
                if request.get("script"):
                    groups.add(pid)
        while runs:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in groups:  # what the script started (DataLoader workers) ends with it
                groups.discard(pid)
                _kill(pid, True, reaped=True)
            out.write(json.dumps({"id": runs.pop(pid), "status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            out.flush()


def _kill(pid: int, group: bool, reaped: bool = False) -> None:
    """Kill run ``pid``; ``group``: its process group too (the run itself as well, in case it has
    not made its group yet, unless it has been ``reaped``: its number may be another's by now)."""
    if group:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if not reaped:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    serve()
