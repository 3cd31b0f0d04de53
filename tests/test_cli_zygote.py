"""The tests' forked runs of the command line (:mod:`cli_zygote`) behave as the console script
does: same output, same exit status, nothing carried from one run to the next."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from cli_zygote import Zygote, _settled_at_start
from conftest import _script_path, console_script

LEGACY = "import torch\nx = torch.zeros(2).cuda()\nloss = x.sum()\nprint(loss.data[0])\n"


@pytest.fixture(scope="module")
def zygote():
    server = Zygote()
    yield server
    server.close()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return {**env, "COLUMNS": "200", **extra}


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(LEGACY)
    (tmp_path / "pkg" / "broken.py").write_text("def f(:\n")
    return tmp_path


@pytest.mark.parametrize("args, stdin", [
    (["--version"], None),
    (["check", "."], None),
    (["check", "--output-format", "json", "."], None),
    (["apply", "--diff", "."], None),
    (["check", "--select", "NOPE", "."], None),
    (["check", "-", "--stdin-filename", "a.py"], LEGACY.encode()),
    (["apply", "-"], LEGACY.encode()),
    (["rules"], None),
    (["no-such-command"], None),
])
def test_a_forked_run_gives_what_the_console_script_gives(zygote, tmp_path, args, stdin):
    root = _project(tmp_path)
    env = _env(NO_COLOR="1")
    forked = zygote.run([_script_path(), *args], cwd=root, env=env, input=stdin, timeout=120)
    real = subprocess.run([*console_script(), *args], cwd=root, env=env, input=stdin, capture_output=True, timeout=120)
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert forked.stdout or forked.stderr


def test_each_run_has_its_own_folder_environment_and_files(zygote, tmp_path):
    root = _project(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "ok.py").write_text("import torch\nx = torch.zeros(2)\n")
    coloured = zygote.run([_script_path(), "check", "--select", "NOPE", "."], cwd=root, env=_env(FORCE_COLOR="1"),
                          input=None, timeout=120)
    assert "\x1b[" in coloured.stderr.decode()
    plain = zygote.run([_script_path(), "check", "--select", "NOPE", "."], cwd=root, env=_env(NO_COLOR="1"),
                       input=None, timeout=120)
    assert "\x1b[" not in plain.stderr.decode()
    assert plain.returncode == coloured.returncode == 2
    applied = zygote.run([_script_path(), "apply", "."], cwd=root, env=_env(NO_COLOR="1"), input=None, timeout=120)
    assert applied.returncode == 1  # broken.py cannot be parsed
    assert ".to(" in (root / "pkg" / "train.py").read_text()
    clean = zygote.run([_script_path(), "check", "."], cwd=other, env=_env(NO_COLOR="1"), input=None, timeout=120)
    assert (clean.returncode, clean.stdout) == (0, b"")


def test_a_run_past_its_time_is_killed_and_the_next_run_is_served(zygote, tmp_path):
    root = _project(tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run([_script_path(), "check", "."], cwd=root, env=_env(NO_COLOR="1"), input=None, timeout=0.001)
    again = zygote.run([_script_path(), "check", "."], cwd=root, env=_env(NO_COLOR="1"), input=None, timeout=120)
    assert again.returncode == 1 and b"TFD001" in again.stdout


def test_what_an_interpreter_settles_at_start_is_not_forked():
    base = {"HOME": "/root", "COLUMNS": "200"}
    assert _settled_at_start(base) == {}
    assert _settled_at_start({**base, "PYTHONHASHSEED": "1"}) == {"PYTHONHASHSEED": "1"}
    assert _settled_at_start({**base, "TORCHFIX_DEVICE_CHECK_NAMES": "1"}) == {"TORCHFIX_DEVICE_CHECK_NAMES": "1"}
    assert _settled_at_start({**base, "LC_ALL": "C"}) == {"LC_ALL": "C"}


def test_an_environment_settled_at_start_gets_a_real_interpreter(zygote, tmp_path):
    root = _project(tmp_path)
    first = zygote.run([_script_path(), "check", "."], cwd=root, env=_env(NO_COLOR="1"), input=None, timeout=120)
    forks = zygote.forks
    seeded = zygote.run([_script_path(), "check", "."], cwd=root, env=_env(NO_COLOR="1", PYTHONHASHSEED="7"),
                        input=None, timeout=120)
    assert (seeded.returncode, seeded.stdout) == (first.returncode, first.stdout)
    assert zygote.forks == forks  # made by subprocess.run, not forked
    again = zygote.run([_script_path(), "check", "."], cwd=root, env=_env(NO_COLOR="1"), input=None, timeout=120)
    assert zygote.forks == forks + 1 and again.stdout == first.stdout


def test_a_run_inherits_the_folder_and_umask_of_the_moment(zygote, tmp_path, monkeypatch):
    """As ``subprocess.run`` does: the caller's current folder and umask when the run starts."""
    root = _project(tmp_path)
    monkeypatch.chdir(root / "pkg")
    forks = zygote.forks
    modes = []
    for mask in (0o077, 0o022):
        before = os.umask(mask)
        try:
            out = zygote.run([_script_path(), "apply", "--output-dir", f"../out{mask:o}", "train.py"], cwd=None,
                             env=_env(NO_COLOR="1"), input=None, timeout=120)
        finally:
            os.umask(before)
        assert out.returncode == 0, out.stderr.decode()
        assert ".to(" in (root / f"out{mask:o}" / "train.py").read_text()
        modes.append((root / f"out{mask:o}").stat().st_mode & 0o777)
    assert modes == [0o700, 0o755] and zygote.forks == forks + 2
