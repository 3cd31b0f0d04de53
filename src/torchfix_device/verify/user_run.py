"""One run of the user's command for ``verify --run``, in one copy of the project, and what it
did: exit status, wall time, the first exception (type, message, file and line in the project),
device mismatches, and what the start-up hook (:mod:`~torchfix_device.verify.child_hook`)
recorded.

The command runs through the shell (``sh -c COMMAND``), in its own process group (a timeout or
Ctrl-C ends the whole group, and only it), with stdin closed, its output kept in files of the
run's temp folder. Every Python process it starts loads the start-up hook first; a process that
does not (``python -I``, another language) still gets its last traceback read from stderr.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from torchfix_device.verify import child_hook, legacy

OUTPUT_TAIL = 4000
"""Characters of the end of the command's stdout and stderr kept in the result."""
TRACEBACK = "Traceback (most recent call last):"
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
GPU_WANTED = re.compile(
    r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|no CUDA GPUs are available|"
    r"CUDA driver version is insufficient|Attempting to deserialize object on a CUDA device"
)
"""Failures that say the program asked for a GPU that is not there."""
GRACE_S = 5.0
"""Seconds a timed-out command gets between SIGTERM and SIGKILL."""


@dataclass
class RunResult:
    """One run of the command in one copy."""

    copy: str
    """``before`` (the copy as it is) or ``after`` (the migrated copy)."""
    stand_in: bool
    """Run with ``meta`` standing in for a GPU (a machine without CUDA)."""
    exit_code: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    exception: dict | None = None
    """The first uncaught exception: ``type``, ``message``, ``file`` and ``line`` (the innermost
    frame in the project, relative to its top folder), ``code``, ``device_error``."""
    device_mismatch: dict | None = None
    """The first device mismatch, as ``exception`` (caught by the program or not)."""
    hooked: bool = False
    """A Python process of the command loaded the start-up hook."""
    torch: bool = False
    cuda_available: bool | None = None
    gpu_asked: bool = False
    """The program asked for a GPU: ``torch.cuda.is_available()``/``device_count()`` from its
    code, ``.cuda()``, or a failure saying that CUDA is missing."""
    gpu_uses: int = 0
    """Stand-in runs: calls that named the GPU (a ``"cuda"`` device, ``.cuda()``)."""
    placeholders: int = 0
    from_origin: list[str] = field(default_factory=list)
    """Modules imported from the user's own tree instead of the copy."""
    stdout_tail: str = ""
    stderr_tail: str = ""
    hook_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_json(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def write_hook(folder: Path) -> Path:
    """The start-up hook and the two modules it loads, in ``folder`` (created); returns it."""
    here = Path(child_hook.__file__).parent
    folder.mkdir(parents=True)
    for source, name in (
        ("child_hook.py", "sitecustomize"), ("checker.py", child_hook.CHECKER_MODULE), ("legacy.py", child_hook.LEGACY_MODULE),
    ):  # each stands alone: the stdlib and torch only
        (folder / f"{name}.py").write_text((here / source).read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def child_environment(
    *, hook: Path, records: Path, copy_root: Path, origin: Path, stand_in: bool, cwd: Path,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """The command's environment: the caller's, the hook first on ``PYTHONPATH`` (whose entries
    inside the project name the copy instead), and no bytecode written (``.pyc`` files already
    there are still read): nothing lands in the user's tree through a linked virtualenv or a
    module imported from the tree itself."""
    env = dict(os.environ if base is None else base)
    entries = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]
    env["PYTHONPATH"] = os.pathsep.join([str(hook), *(_in_copy(e, origin, copy_root) for e in entries)])
    env[child_hook.RECORDS_ENV] = str(records)
    env[child_hook.COPY_ENV] = str(copy_root)
    env[child_hook.ORIGIN_ENV] = str(origin)
    env.pop(child_hook.STAND_IN_ENV, None)
    if stand_in:
        env[child_hook.STAND_IN_ENV] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # never into the user's tree (a linked virtualenv, an editable install)
    env["PWD"] = str(cwd)
    return env


def _in_copy(entry: str, origin: Path, copy_root: Path) -> str:
    if not os.path.isabs(entry):
        return entry
    real, top = Path(os.path.realpath(entry)), Path(os.path.realpath(origin))
    if real == top or top in real.parents:
        return str(copy_root / real.relative_to(top))
    return entry


def run_command(
    command: str, *, copy: str, stand_in: bool, cwd: Path, env: dict[str, str], records: Path,
    logs: Path, timeout: float | None,
) -> RunResult:
    """Run ``command`` once and gather what it did."""
    records.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    result = RunResult(copy=copy, stand_in=stand_in)
    out_path, err_path = logs / "stdout.txt", logs / "stderr.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, shell=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=os.name == "posix",
        )
        try:
            result.exit_code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            _end_group(process, signal.SIGTERM if os.name == "posix" else None)
            try:
                process.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                _end_group(process, None)
                process.wait()
            result.exit_code = process.returncode
        except BaseException:  # Ctrl-C, SIGTERM: the command must not outlive us
            _end_group(process, None)
            process.wait()
            raise
        finally:
            result.seconds = round(time.perf_counter() - started, 3)
            _end_group(process, None)  # what it left running in the background
    result.stdout_tail = _tail(out_path)
    result.stderr_tail = _tail(err_path)
    _gather(result, _records(records), copy_root=Path(env[child_hook.COPY_ENV]))
    return result


def _end_group(process: subprocess.Popen, sig: int | None) -> None:
    """Signal the command's process group (our own session: nothing else is in it)."""
    if os.name != "posix":
        if process.poll() is None:
            process.kill()
        return
    try:
        os.killpg(process.pid, signal.SIGKILL if sig is None else sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as stream:
            stream.seek(0, os.SEEK_END)
            size = stream.tell()
            stream.seek(max(0, size - OUTPUT_TAIL * 4))
            data = stream.read()
    except OSError:
        return ""
    return data.decode("utf-8", "replace")[-OUTPUT_TAIL:]


def _records(folder: Path) -> list[dict]:
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda r: r.get("started", 0))


def _gather(result: RunResult, records: list[dict], *, copy_root: Path) -> None:
    result.hooked = bool(records)
    result.torch = any(r.get("torch") for r in records)
    available = [r.get("cuda_available") for r in records if r.get("cuda_available") is not None]
    result.cuda_available = any(available) if available else None
    shims = [r.get("legacy_shims") or {} for r in records]
    result.gpu_uses = sum(r.get("gpu_uses", 0) for r in records) + sum(s.get(legacy.CUDA_CALL, 0) for s in shims)
    result.placeholders = sum(r.get("placeholders", 0) for r in records) + sum(s.get(legacy.META_ITEM, 0) for s in shims)
    result.from_origin = sorted({m for r in records for m in r.get("from_origin", [])})
    result.hook_errors = [e for r in records for e in r.get("hook_errors", [])]
    mismatches = sorted((r["device_mismatch"] for r in records if r.get("device_mismatch")), key=lambda m: m.get("time", 0))
    if not result.ok:
        exceptions = sorted((r["exception"] for r in records if r.get("exception")), key=lambda e: e.get("time", 0))
        result.exception = exceptions[0] if exceptions else exception_from_stderr(result.stderr_tail, copy_root)
        if result.exception is not None and "device_error" not in result.exception:
            result.exception["device_error"] = _is_device_error(result.exception.get("message", ""))
    if mismatches:
        result.device_mismatch = mismatches[0]
    elif result.exception is not None and result.exception.get("device_error"):
        result.device_mismatch = result.exception
    message = (result.exception or {}).get("message", "")
    result.gpu_asked = any(r.get("cuda_asked") for r in records) or bool(GPU_WANTED.search(message or ""))


def exception_from_stderr(text: str, copy_root: Path) -> dict | None:
    """The last traceback Python printed on stderr, as an exception record; None if none."""
    start = text.rfind(TRACEBACK)
    if start < 0:
        return None
    lines = text[start:].splitlines()[1:]
    frames: list[tuple[str, int, str]] = []
    index = 0
    while index < len(lines) and (not lines[index] or lines[index][0].isspace()):
        match = FRAME.match(lines[index])
        if match:
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            code = "" if FRAME.match(following or "") else following
            frames.append((match["file"], int(match["line"]), code))
        index += 1
    if index >= len(lines):
        return None
    kind, _, message = lines[index].partition(":")
    message = "\n".join([message.strip(), *lines[index + 1:]]).strip()
    top = os.path.realpath(copy_root)
    mine = [f for f in frames if os.path.realpath(f[0]).startswith(top.rstrip(os.sep) + os.sep)]
    file, line, code = (mine or frames or [(None, None, None)])[-1]
    if mine and file is not None:
        file = os.path.relpath(os.path.realpath(file), top)
    return {
        "type": kind.strip().rpartition(".")[2], "message": message[:2000], "file": file, "line": line,
        "code": code, "in_project": bool(mine), "from_stderr": True,
    }


def _is_device_error(message: str) -> bool:
    """The checker's test, when torch can be imported here (a device error comes from torch)."""
    if not message or importlib.util.find_spec("torch") is None:
        return False
    from torchfix_device.verify.checker import is_device_error

    return is_device_error(message)
