"""``torchfix-device verify --run COMMAND [PATH]``: the user's own check (issue 32).

Small projects written here in the PyTorch 0.3 style run through the command line: one that
fails before the migration and runs after it (with meta standing in for a GPU: the original
mixes devices, the migrated copy does not), one that runs before and after, one broken for a
reason the migration has nothing to do with, one that never ends (``--timeout``); the bundled
example project is run in ``tests/test_example.py``. Every run checks that the user's tree is left exactly as it was (bytes, mode and
modification time of every file and folder). Bad input gets exit 2 and a message naming it.
The verdict's wording, the copy and the reading of tracebacks are tested without processes.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli, tree_snapshot

from torchfix_device.verify import project_copy
from torchfix_device.verify.run_session import AFTER, BEFORE, Migration, SessionReport
from torchfix_device.verify.user_run import RunResult, exception_from_stderr

pytest.importorskip("torch")

PYTHON = shlex.quote(sys.executable)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def verify_json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[dict, object]:
    done = run_cli("verify", "--json", *args, cwd=cwd, env=env)
    assert done.stdout, done.stderr.decode()
    return json.loads(done.stdout), done


def runs(data: dict) -> dict[tuple[str, bool], dict]:
    return {(r["copy"], r["stand_in"]): r for r in data["runs"]}


# -- a PyTorch 0.3 script: fails before, runs after -------------------------------------------
LEGACY_TRAIN = {
    "src/toy/__init__.py": "",
    "src/toy/noisy.py": '''
        import torch
        import torch.nn as nn


        class NoisyNet(nn.Module):
            def __init__(self):
                super(NoisyNet, self).__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                noise = torch.randn(x.size())
                return self.fc(x + 0.01 * noise)
    ''',
    "train.py": '''
        """PyTorch 0.3 style: Variable, volatile=True, .cuda() under args.cuda, loss.data[0]."""
        import argparse

        import torch
        from torch.autograd import Variable

        from toy.noisy import NoisyNet

        parser = argparse.ArgumentParser()
        parser.add_argument("--no-cuda", action="store_true")
        parser.add_argument("--epochs", type=int, default=1)
        args = parser.parse_args()
        args.cuda = not args.no_cuda and torch.cuda.is_available()

        torch.manual_seed(0)
        model = NoisyNet()
        if args.cuda:
            model.cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(args.epochs):
            x, y = Variable(torch.randn(8, 4)), Variable(torch.randn(8, 2))
            if args.cuda:
                x, y = x.cuda(), y.cuda()
            loss = ((model(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print("epoch %d loss %.4f" % (epoch, loss.data[0]))
        test = Variable(torch.randn(2, 4), volatile=True)
        if args.cuda:
            test = test.cuda()
        print("output", tuple(model(test).size()))
        torch.save(model.state_dict(), "model.pt")
    ''',
}


def test_a_legacy_script_fails_before_the_migration_and_runs_after(tmp_path: Path) -> None:
    project = write(tmp_path / "project", LEGACY_TRAIN)
    (project / "train.py").chmod(0o750)
    before = tree_snapshot(project)
    # the package is found through an absolute PYTHONPATH into the user's tree (as an editable
    # install would): the runs must import the copies' modules, never the original's
    env = {"PYTHONPATH": os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(project / "src")])}
    data, done = verify_json("--run", f"{PYTHON} train.py --epochs 2", cwd=project, env=env)

    assert done.returncode == 0, done.stderr.decode()
    assert data["ok"] is True and data["machine"] == "cpu"
    assert data["verdict"].startswith("the migration made it run"), data["verdict"]
    legs = runs(data)
    original, migrated = legs[BEFORE, False], legs[AFTER, False]
    assert original["ok"] is False and migrated["ok"] is True
    assert original["exception"]["type"] == "IndexError"
    assert "invalid index of a 0-dim tensor" in original["exception"]["message"]
    assert original["exception"]["where"] == "train.py:28"  # print(... loss.data[0])
    assert migrated["exception"] is None and "epoch 1 loss" in migrated["stdout_tail"]
    assert original["seconds"] > 0 and migrated["seconds"] > 0
    assert not original["from_origin"] and not migrated["from_origin"]
    # on the stand-in GPU: the noise drawn on the CPU inside forward mixes devices, until TFD003
    assert original["gpu_asked"] and (BEFORE, True) in legs and (AFTER, True) in legs
    assert legs[BEFORE, True]["device_mismatch"]["where"] == "src/toy/noisy.py:12"
    assert legs[AFTER, True]["device_mismatch"] is None and legs[AFTER, True]["ok"]
    assert legs[AFTER, True]["gpu_uses"] > 0
    assert "original mixed devices at src/toy/noisy.py:12" in data["verdict"]
    assert data["migration"]["files_changed"] == 2 and {"TFD003", "TFD006", "TFD009"} <= set(data["migration"]["fixes"])
    assert tree_snapshot(project) == before  # nothing written: no model.pt, no __pycache__, same mtimes


# -- runs before and after; broken for another reason; never ends ------------------------------
def test_a_script_that_runs_before_still_runs_after_and_excluded_files_stay_as_they_are(tmp_path: Path) -> None:
    project = write(tmp_path / "project", {
        "pyproject.toml": '[tool.torchfix-device]\nexclude = ["vendor"]\n',
        "vendor/old.py": "import torch\n\n\ndef f(x):\n    return x.cuda()\n",
        "fit.py": '''
            import torch
            import torch.nn as nn
            from torch.autograd import Variable

            torch.manual_seed(0)
            x = Variable(torch.randn(16, 3))
            criterion = nn.MSELoss(size_average=False)
            loss = criterion(nn.Linear(3, 1)(x), torch.zeros(16, 1))
            print("loss", round(loss.item(), 4))
        ''',
    })
    before = tree_snapshot(project)
    done = run_cli("verify", "--run", f"{PYTHON} fit.py", str(project), cwd=tmp_path)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert "verdict: it ran before and still runs" in out
    assert "before the migration: ✓ runs" in out and "after the migration:  ✓ runs" in out
    assert "migration: 1 file changed" in out  # vendor/ is excluded, as `apply` would
    assert "no device checks: the program never asked for a GPU" in out
    assert tree_snapshot(project) == before


def test_a_script_broken_for_another_reason_still_fails(tmp_path: Path) -> None:
    project = write(tmp_path / "project", {
        "scripts/prepare.py": '''
            import torch
            from torch.autograd import Variable

            weights = Variable(torch.ones(3))
            print("weights", weights.sum().data[0])
            with open("data/train.csv") as rows:
                print(rows.read())
        ''',
    })
    before = tree_snapshot(project)
    # run from a folder inside the project: the command runs in the same folder of each copy
    data, done = verify_json("--run", f"{PYTHON} prepare.py", "..", cwd=project / "scripts")
    assert done.returncode == 1
    assert data["ok"] is False and data["workdir"] == "scripts"
    legs = runs(data)
    assert legs[BEFORE, False]["exception"]["type"] == "IndexError"  # loss.data[0] first
    after = legs[AFTER, False]["exception"]
    # the place is in the migrated code, whose lines moved (TFD009 removed an import)
    assert after["type"] == "FileNotFoundError" and after["where"] == "prepare.py:5 of the migrated code"
    assert data["verdict"] == (
        "it still fails: FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv' (prepare.py:5 of the migrated code)"
    )
    assert tree_snapshot(project) == before


def test_timeout_ends_the_command_and_everything_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    project = write(tmp_path / "project", {
        "slow.py": '''
            import os
            import subprocess
            import time

            child = subprocess.Popen(["sleep", "120"])
            with open(os.environ["PIDS_FILE"], "a") as out:
                out.write("%d %d\\n" % (os.getpid(), child.pid))
            time.sleep(120)
        ''',
    })
    done = run_cli("verify", "--run", f"{PYTHON} slow.py", "--timeout", "1", str(project), cwd=tmp_path,
                   env={"PIDS_FILE": str(pids)})
    out = done.stdout.decode()
    assert done.returncode == 1, out + done.stderr.decode()
    assert "verdict: it still fails: it did not finish within 1 s (--timeout)" in out
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 4  # the script and its `sleep`, in each copy
    for pid in started:
        status, command = Path(f"/proc/{pid}/status"), Path(f"/proc/{pid}/cmdline")
        try:
            line = command.read_bytes()
            ours = line == b"sleep\x00120\x00" or b"slow.py" in line
            alive = ours and "State:\tZ" not in status.read_text()
        except FileNotFoundError:
            alive = False  # gone while read
        # (a pid of ours may already be another process's: pid_max is 32768 on such machines)
        assert not alive, f"process {pid} outlived the timeout"


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run", "  "], "--run needs the command to run"),
        (["--run"], "'--run' requires an argument"),
        (["--run", "python x.py", "no/such/folder"], "no such folder: no/such/folder"),
        (["--run", "python x.py", "file.py"], "file.py is not a folder"),
        (["--run", "python x.py", ".", "."], "--run takes one project folder"),
        (["--run", "python x.py", "--timeout", "0"], "--timeout 0: give a number of seconds above 0"),
        (["--run", "python x.py", "--device", "meta"], "--device does not apply to --run"),
        (["--timeout", "5"], "--timeout: only with --run COMMAND"),
        (["--run", "python {project}/x.py"], "the command names the project's own folder"),
    ],
    ids=["blank-command", "no-command", "missing-path", "file-path", "two-paths", "timeout", "device", "no-run", "own-folder"],
)
def test_bad_input_is_named_and_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "file.py").write_text("print(1)\n", encoding="utf-8")
    before = tree_snapshot(tmp_path)
    done = run_cli("verify", *[a.replace("{project}", str(tmp_path.resolve())) for a in args], cwd=tmp_path)
    assert done.returncode == 2
    assert message in " ".join(done.stderr.decode().split()), done.stderr.decode()
    assert tree_snapshot(tmp_path) == before


# -- without processes: verdicts, tracebacks, the copy --------------------------------------------
def _report(before: RunResult, after: RunResult, *stand_in: RunResult) -> SessionReport:
    return SessionReport(
        command="python train.py", project=".", workdir=".", unsafe_fixes=False, migration=Migration(exit_code=0),
        runs=[before, after, *stand_in], timeout=30, project_root="/p", user_cwd="/p",
    )


def _ran(copy: str, stand_in: bool = False) -> RunResult:
    return RunResult(copy=copy, stand_in=stand_in, exit_code=0)


def _failed(copy: str, kind: str = "ValueError", stand_in: bool = False, **extra) -> RunResult:
    record = {"type": kind, "message": "bad value", "file": "train.py", "line": 3, "in_project": True}
    return RunResult(copy=copy, stand_in=stand_in, exit_code=1, exception=record, **extra)


def test_verdicts_in_plain_words() -> None:
    assert _report(_ran(BEFORE), _ran(AFTER)).verdict() == "it ran before and still runs"
    assert _report(_failed(BEFORE), _ran(AFTER)).verdict() == "the migration made it run"
    still = "it still fails: ValueError: bad value (train.py:3 of the migrated code)"
    assert _report(_failed(BEFORE), _failed(AFTER)).verdict() == still
    broke = _report(_ran(BEFORE), _failed(AFTER, "TypeError"))
    assert broke.verdict() == "the migration broke it: TypeError: bad value (train.py:3 of the migrated code)" and not broke.ok
    timed_out = RunResult(copy=AFTER, stand_in=False, exit_code=-15, timed_out=True)
    assert _report(_ran(BEFORE), timed_out).verdict() == "the migration broke it: it did not finish within 30 s (--timeout)"
    no_trace = RunResult(copy=AFTER, stand_in=False, exit_code=3)
    assert _report(_failed(BEFORE), no_trace).verdict() == "it still fails: the command exited with status 3"
    mismatch = {"type": "DeviceMismatchError", "message": "Expected all tensors", "file": "m.py", "line": 9, "in_project": True}
    mixed = _report(_ran(BEFORE), _ran(AFTER), _ran(BEFORE, True), RunResult(AFTER, True, exit_code=0, device_mismatch=mismatch))
    assert mixed.verdict() == "it ran before and still runs; but on a GPU (meta standing in) it mixes devices at m.py:9 of the migrated code"
    assert mixed.ok is False  # the migrated code would fail on a GPU: exit 1
    assert _report(_ran(BEFORE), _ran(AFTER)).ok is True
    styled = RunResult(copy=AFTER, stand_in=False, exit_code=1, exception={
        "type": "UnpicklingError", "message": "Weights only load failed, \x1b[1mdo those steps only if you trust it\x1b[0m."})
    assert _report(_ran(BEFORE), styled).verdict() == (
        "the migration broke it: UnpicklingError: Weights only load failed, do those steps only if you trust it.")


def test_a_traceback_is_read_from_stderr_when_no_hook_ran(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    stderr = textwrap.dedent(f'''
        epoch 0
        Traceback (most recent call last):
          File "{copy}/train.py", line 12, in <module>
            main()
          File "{copy}/lib/model.py", line 4, in main
            x = y.cuda()
                ^^^^^^^^
          File "/usr/lib/python3/site-packages/torch/cuda/__init__.py", line 310, in _lazy_init
            raise AssertionError("Torch not compiled with CUDA enabled")
        AssertionError: Torch not compiled with CUDA enabled
    ''')
    record = exception_from_stderr(stderr, copy)
    assert record["type"] == "AssertionError" and record["message"] == "Torch not compiled with CUDA enabled"
    assert (record["file"], record["line"], record["code"]) == ("lib/model.py", 4, "x = y.cuda()")
    assert exception_from_stderr("all good\n", copy) is None


def test_the_copy_leaves_out_version_control_and_caches_and_links_virtualenvs(tmp_path: Path) -> None:
    project = write(tmp_path / "project", {
        "train.py": "print(1)\n", ".git/HEAD": "ref\n", "__pycache__/x.pyc": "", "data/a.csv": "1\n",
        "env/pyvenv.cfg": "home = /usr\n", ".venv/bin/python": "",
    })
    (project / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (project / "run.sh").chmod(0o751)
    (project / "latest.csv").symlink_to(project / "data" / "a.csv")
    os.mkfifo(project / "pipe")
    copy = tmp_path / "copy"
    stats = project_copy.copy_project(project, copy)
    assert sorted(p.name for p in copy.iterdir()) == [".venv", "data", "env", "latest.csv", "run.sh", "train.py"]
    assert (copy / "env").is_symlink() and (copy / ".venv").resolve() == (project / ".venv").resolve()
    assert os.readlink(copy / "latest.csv") == str(copy / "data" / "a.csv")  # inside the copy
    assert stat.S_IMODE((copy / "run.sh").stat().st_mode) == 0o751
    assert stats.files == 3 and sorted(stats.linked) == [".venv", "env"] and stats.skipped == ["pipe"]
    project_copy.remove_tree(copy)
    assert not copy.exists() and (project / ".venv" / "bin" / "python").exists()
