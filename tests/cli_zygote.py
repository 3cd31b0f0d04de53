"""Runs of the command line in fresh processes forked from one interpreter that has already
imported it: the tests' way to run ``torchfix-device`` hundreds of times without paying for
hundreds of interpreter start-ups (about one second each, a third of it importing libcst).

Each run is still a process of its own, made for it: its own arguments, working folder,
environment, standard streams (pipes, as ``subprocess.run`` gives) and exit status; nothing one
run does reaches the next, since each is forked from the same interpreter that has only imported
modules. What it cannot give is what an interpreter settles when it starts: the hash seed, and
what the environment says then (``PYTHON*``, the locale, :data:`IMPORT_TIME_ENV`). A run whose
environment differs from the server's there is made by ``subprocess.run`` of the console script,
as are the tests of the process itself (signals, terminals, hash seeds, imports), which never
come here.

The server (``python tests/cli_zygote.py FD FOLDER``) reads requests on a Unix socket: the
standard streams' descriptors and a pickled ``(argv, cwd, env, umask)``. It forks; the child takes
the descriptors as 0, 1 and 2 and calls the console script's function; the server answers with
the child's pid, then its wait status.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

IMPORT_TIME_ENV = ("TORCHFIX_DEVICE_CHECK_NAMES",)
"""Variables the package reads when it is imported (not when it runs)."""

NOT_PRELOADED = ("torch", "numpy", "torchfix_device.verify")
"""``verify`` and what only it imports: the command line's runs here never import them."""


def preload() -> list[str]:
    """What the server imports before it forks: every module of the package (``verify`` aside)
    and every module they import, at their top or inside a function (the command line imports
    most lazily: libcst, rich and typer only when a run needs them)."""
    import ast
    import importlib.util

    package = Path(importlib.util.find_spec("torchfix_device").origin).parent
    names = set()
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).with_suffix("")
        names.add(".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts))
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return sorted(n for n in names if n != "torchfix_device.__main__"
                  and not any(n == x or n.startswith(x + ".") for x in NOT_PRELOADED))


def _settled_at_start(env: dict[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in env.items()
        if k.startswith(("PYTHON", "LC_")) or k in ("LANG", "LANGUAGE") or k in IMPORT_TIME_ENV
    }


# --- the server -------------------------------------------------------------------------------

def _child(fds: list[int], argv: list[str], cwd: str, env: dict[str, str], sock: socket.socket) -> None:
    """In the forked child: become the run, exit with its status (never returns)."""
    code = 1
    try:
        sock.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        from torchfix_device.cli import main

        try:
            main(argv[1:])
            code = 0
        except SystemExit as stop:
            code = _exit_status(stop.code)
        except BaseException:  # as the interpreter does with an uncaught exception
            import traceback

            traceback.print_exc()
            code = 1
        try:
            threading._shutdown()  # type: ignore[attr-defined]  # joins threads, stops pools
        except Exception:
            pass
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = code or 120  # what the interpreter exits with when it cannot flush
    finally:
        os._exit(code)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _recv(sock: socket.socket) -> tuple[list[int], bytes] | None:
    """A request: 8 bytes of length carrying the three descriptors, then the pickle."""
    header, fds, _flags, _addr = socket.recv_fds(sock, 8, 3, socket.MSG_WAITALL)
    if len(header) < 8 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    (size,) = struct.unpack("!Q", header)
    payload = sock.recv(size, socket.MSG_WAITALL)
    if len(payload) < size:
        return None
    return list(fds), payload


def serve(fd: int, script_folder: str) -> None:
    sys.path[0] = script_folder  # where the console script's interpreter looks first, not tests/
    sock = socket.socket(fileno=fd)
    for name in preload():
        try:
            __import__(name)
        except ImportError:  # an optional dependency (tomli before Python 3.11, ...)
            pass
    if "torch" in sys.modules:  # the command line must not import it (test_verify checks it too)
        raise SystemExit("cli_zygote: importing the package imported torch; the forks would inherit it")
    sock.sendall(b"ready\n")
    while True:
        got = _recv(sock)
        if got is None:
            return
        fds, payload = got
        argv, cwd, env, umask = pickle.loads(payload)
        pid = os.fork()
        if pid == 0:
            os.umask(umask)
            _child(fds, argv, cwd, env, sock)
        for received in fds:
            os.close(received)
        sock.sendall(struct.pack("!q", pid))
        _, status = os.waitpid(pid, 0)
        sock.sendall(struct.pack("!q", os.waitstatus_to_exitcode(status)))


# --- the client -------------------------------------------------------------------------------

class Zygote:
    """One server per test process, started on first use."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.process: subprocess.Popen | None = None
        self.settled: dict[str, str] = {}
        self.forks = 0
        """How many runs were forked (the others were made by ``subprocess.run``)."""

    def _start(self, script: str, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno()), os.path.dirname(script)], pass_fds=[theirs.fileno()],
            env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        )
        theirs.close()
        if ours.recv(6, socket.MSG_WAITALL) != b"ready\n":
            raise RuntimeError("the command-line server did not start (see stderr above)")
        self.sock = ours
        self.settled = _settled_at_start(env)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.process is not None:
            self.process.wait(timeout=30)
            self.process = None

    def run(self, argv: list[str], *, cwd: Path | str | None, env: dict[str, str], input: bytes | None,
            timeout: float) -> subprocess.CompletedProcess:
        if self.sock is None:
            self._start(argv[0], env)
        if _settled_at_start(env) != self.settled:
            return subprocess.run(argv, cwd=cwd, input=input, capture_output=True, env=env, timeout=timeout)
        assert self.sock is not None
        in_r, in_w = os.pipe() if input is not None else (_inherited_stdin(), -1)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        umask = os.umask(0o022)
        os.umask(umask)
        # What subprocess.run gives the child by inheritance, taken now: this process's folder
        # and umask (a test may have changed either since the server started).
        payload = pickle.dumps((list(argv), str(cwd) if cwd is not None else os.getcwd(), dict(env), umask))
        try:
            socket.send_fds(self.sock, [struct.pack("!Q", len(payload))], [in_r, out_w, err_w])
            self.sock.sendall(payload)
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        (pid,) = struct.unpack("!q", self._answer())
        self.forks += 1
        outputs = {out_r: bytearray(), err_r: bytearray()}
        readers = [threading.Thread(target=_drain, args=(fd, outputs[fd]), daemon=True) for fd in outputs]
        if input is not None:
            readers.append(threading.Thread(target=_feed, args=(in_w, input), daemon=True))
        for reader in readers:
            reader.start()
        self.sock.settimeout(timeout)
        try:
            status = self._answer()
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self.sock.settimeout(None)
            self._answer()
            raise subprocess.TimeoutExpired(argv, timeout) from None
        finally:
            if self.sock is not None:
                self.sock.settimeout(None)
        for reader in readers:
            reader.join()
        (code,) = struct.unpack("!q", status)
        return subprocess.CompletedProcess(list(argv), code, bytes(outputs[out_r]), bytes(outputs[err_r]))


    def _answer(self) -> bytes:
        assert self.sock is not None
        answer = self.sock.recv(8, socket.MSG_WAITALL)
        if len(answer) != 8:
            raise RuntimeError(f"the command-line server stopped (exit status {self.process.poll()})")
        return answer


def _inherited_stdin() -> int:
    """What ``subprocess.run`` without ``input`` gives the child: this process's standard input."""
    try:
        return os.dup(0)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)


def _drain(fd: int, into: bytearray) -> None:
    try:
        while chunk := os.read(fd, 1 << 16):
            into += chunk
    finally:
        os.close(fd)


def _feed(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
