"""`verify`'s runs forked from an interpreter that has imported torch (verify/warm.py): each run
still starts as a new interpreter would, a run that overstays is killed, a server that dies is
replaced, and a report is the one new interpreters give."""

from __future__ import annotations

import json
import os
import textwrap
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchfix_device.verify import warm  # noqa: E402
from torchfix_device.verify.contract import bundled_models, read_spec  # noqa: E402
from torchfix_device.verify.user_verifier import verify_user_file  # noqa: E402
from torchfix_device.verify.verifier import verify_model  # noqa: E402

LEAVES_STATE = '''
import os

import torch
import torch.nn as nn

# What a run in another process would have left, were it forked from a parent it changed: each
# must be absent (this process imports the file once per device: its own marks may be there).
if getattr(torch, "_left_by_a_run", os.getpid()) != os.getpid():
    raise AssertionError("torch's module state of an earlier run")
if __import__("sys").modules.get("leftover_module", os.getpid()) != os.getpid():
    raise AssertionError("a module an earlier run imported")
if not hasattr(torch, "_left_by_a_run") and torch.get_default_dtype() != torch.float32:
    raise AssertionError("the default dtype an earlier run set")
torch._left_by_a_run = os.getpid()
torch.set_default_dtype(torch.float64)
__import__("sys").modules["leftover_module"] = os.getpid()
with open(os.path.join(os.environ["TFD_TEST_FOLDER"], f"{os.getpid()}.json"), "w") as f:
    f.write(__import__("json").dumps({"cwd": os.getcwd(), "argv": __import__("sys").argv}))


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x.to(self.fc.weight.dtype))


def make_model():
    return Small()


def example_inputs():
    return (torch.ones(2, 3),)
'''

SLEEPS = '''
import os
import time

import torch.nn as nn

with open(os.path.join(os.environ["TFD_TEST_FOLDER"], f"{os.getpid()}.pid"), "w") as f:
    f.write(str(os.getpid()))
time.sleep(120)


class Never(nn.Module):
    def forward(self, x):
        return x
'''


@pytest.fixture
def folder(tmp_path: Path, monkeypatch) -> Path:
    seen = tmp_path / "seen"
    seen.mkdir()
    monkeypatch.setenv("TFD_TEST_FOLDER", str(seen))
    monkeypatch.delenv(warm.COLD_ENV, raising=False)
    return seen


def _model(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_each_forked_run_starts_clean_of_what_the_runs_before_left(tmp_path: Path, folder: Path) -> None:
    path = _model(tmp_path, "leaves_state", LEAVES_STATE)
    reports = [verify_user_file(read_spec(path), "meta") for _ in range(2)]
    for (report,) in reports:
        assert report.ok, report.to_json()
        assert all(run["status"] == "ran" for run in report.runs.values()), report.runs
    seen = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    assert len(seen) == 4  # original and rewrite, twice: four processes, none of them the server
    assert all(Path(s["cwd"]).name.startswith("tfd-verify-leaves_state-") for s in seen), seen
    assert sorted(Path(*s["argv"]).name for s in seen) == [path.name] * 4, seen  # a script run without arguments
    server = warm.server_for(_env_of_runs())
    assert server is not None and server.alive and str(server._proc.pid) + ".json" not in {p.name for p in folder.glob("*")}


def _env_of_runs() -> dict[str, str]:
    from torchfix_device.verify.verifier import _env

    return _env("meta")


def test_a_run_over_its_time_is_killed_and_reported_as_a_timeout(tmp_path: Path, folder: Path) -> None:
    path = _model(tmp_path, "sleeps", SLEEPS)
    started = time.monotonic()
    (report,) = verify_user_file(read_spec(path), "meta", timeout=2)
    assert time.monotonic() - started < 60
    assert report.problem is not None and "Timeout: no result after 4 s" in report.problem, report.to_json()
    pids = [int(p.read_text()) for p in folder.glob("*.pid")]
    assert pids, "the runs started"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped: no process is left behind


def test_a_server_that_dies_fails_its_runs_and_the_next_run_gets_a_new_one(tmp_path: Path, folder: Path) -> None:
    path = _model(tmp_path, "sleeps", SLEEPS)
    result: list = []
    thread = threading.Thread(target=lambda: result.append(verify_user_file(read_spec(path), "meta", timeout=60)))
    thread.start()
    deadline = time.monotonic() + 60
    while len(list(folder.glob("*.pid"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    server = warm.server_for(_env_of_runs())
    server._proc.kill()
    thread.join(60)
    assert not thread.is_alive()
    ((report,),) = result
    assert report.problem is not None and "the interpreter ended" in report.problem, report.to_json()
    for pid in (int(p.read_text()) for p in folder.glob("*.pid")):
        os.kill(pid, 9)  # the runs of a killed server are orphans now: end them here
    fresh = warm.server_for(_env_of_runs())
    assert fresh is not server and fresh.alive
    good = _model(tmp_path, "leaves_state", LEAVES_STATE)
    (report,) = verify_user_file(read_spec(good), "meta")
    assert report.ok, report.to_json()


def _comparable(report) -> dict:
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("seconds", "log")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(report.to_json())


def test_a_forked_run_reports_what_a_new_interpreter_reports(monkeypatch) -> None:
    (path,) = [p for p in bundled_models() if p.stem == "host_transfer"]
    monkeypatch.delenv(warm.COLD_ENV, raising=False)
    forked = verify_model(path, "meta")
    monkeypatch.setenv(warm.COLD_ENV, "1")
    new = verify_model(path, "meta")
    assert forked.ok and _comparable(forked) == _comparable(new)


def test_cuda_and_the_cold_setting_start_new_interpreters(monkeypatch) -> None:
    monkeypatch.delenv(warm.COLD_ENV, raising=False)
    assert warm.usable(["meta", "cpu"]) and warm.usable(["cpu"])
    assert not any(warm.usable([d]) for d in ("cuda", "cuda:1", "mps", "xpu:0")) and not warm.usable(["meta", "cuda"])
    monkeypatch.setenv(warm.COLD_ENV, "1")
    assert not warm.usable(["meta", "cpu"])


def test_a_server_serves_runs_that_share_what_is_settled_at_start(folder: Path) -> None:
    env = _env_of_runs()
    server = warm.server_for(env)
    assert warm.server_for({**env, "TFD_TEST_FOLDER": "elsewhere", "PYTEST_CURRENT_TEST": "x"}) is server
    other = warm.server_for({**env, "PYTHONHASHSEED": "1"})
    assert other is not None and other is not server and other.alive
    assert warm.server_for(env) is server


def test_a_server_not_ready_in_time_leaves_the_runs_to_new_interpreters(tmp_path: Path, folder: Path, monkeypatch) -> None:
    import subprocess

    from torchfix_device.verify import verifier

    monkeypatch.setattr(warm, "START_TIMEOUT_S", 0)
    monkeypatch.setenv("PYTHONWARNINGS", "ignore::DeprecationWarning")  # a new server's environment
    started = []
    real_run = subprocess.run
    monkeypatch.setattr(verifier.subprocess, "run", lambda command, *a, **k: started.append(command) or real_run(command, *a, **k))
    path = _model(tmp_path, "leaves_state", LEAVES_STATE)
    (report,) = verify_user_file(read_spec(path), "meta")
    assert report.ok, report.to_json()
    assert len(started) == 2 and all(c[1:3] == ["-m", "torchfix_device.verify.harness"] for c in started), started
    servers = dict(warm._servers)
    assert warm.server_for(verifier._env("meta")) is None
    assert warm._servers == servers  # not started again for every run, each waiting START_TIMEOUT_S


def test_a_run_sent_as_the_server_ends_fails_and_the_next_gets_a_new_server(tmp_path: Path, folder: Path, monkeypatch) -> None:
    env = _env_of_runs()
    server = warm.server_for(env)

    def broken_pipe(message):
        raise BrokenPipeError("the server has ended")

    monkeypatch.setattr(server, "_send", broken_pipe)
    assert server.run(["x.py"], tmp_path, env, tmp_path / "out", tmp_path / "err", 5) is None
    assert not server.alive and not server._waiting
    server.close()
    fresh = warm.server_for(env)
    assert fresh is not server and fresh.alive


# -- scripts (the run harness's CPU runs, benchmarks/run_harness) --------------------------------
SCRIPT = '''
import atexit, json, os, subprocess, sys, threading, time

atexit.register(lambda: print("atexit ran", flush=True))
print(json.dumps({"name": __name__, "argv": sys.argv[1:], "file": os.path.basename(__file__),
                  "path0": sys.path[0], "site": os.environ.get("SEEN_BY_SITE"), "cwd": os.getcwd()}))
mode = sys.argv[1]
if mode == "thread":  # the interpreter waits for a thread that is not a daemon
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done", flush=True))).start()
elif mode == "exit":
    sys.exit(3)
elif mode == "message":
    sys.exit("bad input")
elif mode == "raise":
    raise KeyError("tensor(12)")
elif mode == "sleep":  # a process it started must end with it
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(os.path.join(os.environ["TFD_TEST_FOLDER"], "child.pid"), "w") as f:
        f.write(str(child.pid))
    time.sleep(120)
'''

SITECUSTOMIZE = '''
import os
if os.environ.get("MARK"):  # what a new interpreter runs first, under the run's environment
    os.environ["SEEN_BY_SITE"] = os.environ["MARK"]
'''


@pytest.fixture(scope="module")
def script_setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """A script in a sub-folder, a ``sitecustomize`` on ``PYTHONPATH``, and the environment both
    the server and the runs share (one server serves this module's runs)."""
    root = tmp_path_factory.mktemp("scripts")
    site = root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    (root / "work" / "sub").mkdir(parents=True)
    script = root / "work" / "sub" / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MARK", "TFD_TEST"))}
    env.update(PYTHONPATH=str(site), PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    return script, root / "work", env


@pytest.mark.parametrize("mode", ["plain", "thread", "exit", "message", "raise"])
def test_a_forked_script_runs_as_python_script_py_would(tmp_path: Path, script_setup, mode: str) -> None:
    """A script forked from the server (``script=True``) gives the exit status, standard output and
    last line of standard error that ``python script.py`` gives: ``__main__``, its arguments, its
    folder first on ``sys.path``, ``sitecustomize`` run under the run's own environment, threads
    waited for, ``atexit`` functions run, ``sys.exit`` with a number or a message, an uncaught
    exception."""
    import subprocess

    script, work, env = script_setup
    run_env = {**env, "MARK": mode}
    cold = subprocess.run([sys.executable, str(script), mode], cwd=work, env=run_env, capture_output=True, text=True, timeout=60)
    server = warm.server_for(env)  # started without MARK: its own sitecustomize saw nothing
    assert server is not None
    out, err = tmp_path / "out", tmp_path / "err"
    status = server.run([str(script), mode], work, run_env, out, err, 60, script=True)
    assert (status, out.read_text()) == (cold.returncode, cold.stdout)
    assert err.read_text().strip().splitlines()[-1:] == cold.stderr.strip().splitlines()[-1:]
    shown = json.loads(cold.stdout.splitlines()[0])
    assert shown["name"] == "__main__" and shown["argv"] == [mode] and shown["file"] == "train.py"
    assert shown["site"] == mode and shown["path0"] == str(script.parent) and shown["cwd"] == str(work)
    assert cold.stdout.rstrip().endswith("atexit ran")
    assert ("thread done" in cold.stdout) == (mode == "thread")
    assert cold.returncode == {"exit": 3, "message": 1, "raise": 1}.get(mode, 0)


def test_a_forked_script_over_its_time_is_killed_with_what_it_started(tmp_path: Path, script_setup) -> None:
    script, work, env = script_setup
    server = warm.server_for(env)
    started = time.monotonic()
    run_env = {**env, "TFD_TEST_FOLDER": str(tmp_path)}
    status = server.run([str(script), "sleep"], work, run_env, tmp_path / "out", tmp_path / "err", 1.5, script=True)
    assert status is None and time.monotonic() - started < 30 and server.alive
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while not _ended(child):
        if time.monotonic() > deadline:
            pytest.fail("the process the script started outlived it")
        time.sleep(0.1)


def _ended(pid: int) -> bool:
    """Gone, or a zombie (killed; reaping it is up to whoever adopted it, not to the server)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")
