"""A time and memory budget per file (issue 22, item 9): a file over it is reported and left
untouched, and the run goes on; and the quadratic step the profile of a large file showed."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from torchfix_device.devices import source as device_source
from torchfix_device.run.budget import DEFAULT_MEMORY, DEFAULT_SECONDS, parse_memory
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.options import RunOptions

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)\n'
)


def big_legacy_file(functions: int) -> str:
    """A file with 30 findings a function (TFD001, TFD005, TFD006)."""
    lines = ["import torch", ""]
    for i in range(functions):
        lines.append(f"def step_{i}(model, batch, path):")
        for j in range(10):
            lines.append(f"    out_{j} = model(batch.cuda()).data[0]")
            lines.append(f"    ckpt_{j} = torch.load(path + '_{i}_{j}.pt')")
        lines += ["    return out_0", ""]
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "big.py").write_text(big_legacy_file(100))
    (tmp_path / "small.py").write_text(LEGACY)
    return tmp_path


def _configure(project: Path, setting: str) -> None:
    (project / "pyproject.toml").write_text(f"[tool.torchfix-device]\n{setting}\n")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_file_over_the_time_limit_is_reported_and_left_untouched(project: Path, jobs: str) -> None:
    """One file of a few seconds against a limit of 0.3 s: given up, said so; the other file is
    rewritten. With ``--jobs 2`` the file is in a pool worker, with ``--jobs 1`` here."""
    _configure(project, "file-time-limit = 0.3")
    big = (project / "big.py").read_bytes()
    out = run_cli("apply", "--no-cache", "--jobs", jobs, ".", cwd=project)
    stderr = out.stderr.decode()
    assert "Traceback" not in stderr, stderr
    assert "skipped: big.py: took more than the 0.3 s time limit for one file (file-time-limit); left unchanged" in stderr, stderr
    assert "1 skipped (1 time limit)" in stderr, stderr
    assert out.returncode == 0, stderr
    assert (project / "big.py").read_bytes() == big
    assert (project / "small.py").read_text() == FIXED


def test_a_file_over_the_memory_limit_is_reported_and_left_untouched(project: Path) -> None:
    _configure(project, 'file-memory-limit = "20MB"')
    big = (project / "big.py").read_bytes()
    out = run_cli("apply", "--no-cache", "--jobs", "1", ".", cwd=project)
    stderr = out.stderr.decode()
    assert "skipped: big.py: needed more than the 20 MB memory limit for one file (file-memory-limit); left unchanged" in stderr, stderr
    assert out.returncode == 0, stderr
    assert (project / "big.py").read_bytes() == big
    assert (project / "small.py").read_text() == FIXED


def test_the_limits_can_be_lifted_and_default_to_generous_values(project: Path) -> None:
    assert (RunOptions().file_time_limit, RunOptions().file_memory_limit) == (DEFAULT_SECONDS, DEFAULT_MEMORY) == (120.0, 2 * 1024**3)
    _configure(project, 'file-time-limit = 0\nfile-memory-limit = "0"')
    (project / "big.py").write_text(big_legacy_file(3))
    out = run_cli("apply", "--no-cache", ".", cwd=project)
    assert out.returncode == 0, out.stderr.decode()
    assert "2 files scanned, 2 changed" in out.stderr.decode()


@pytest.mark.parametrize(
    "setting, message",
    [
        ("file-time-limit = -1", "file-time-limit: a number of seconds (0: no limit)"),
        ('file-time-limit = "60"', "file-time-limit: a number of seconds (0: no limit)"),
        ('file-memory-limit = "lots"', "file-memory-limit: 'lots' is not a memory size"),
        ("file-memory-limit = true", "file-memory-limit: a memory size, not true or false"),
    ],
)
def test_a_bad_limit_is_a_configuration_error(project: Path, setting: str, message: str) -> None:
    _configure(project, setting)
    out = run_cli("check", ".", cwd=project)
    assert out.returncode == 2
    assert message in out.stderr.decode(), out.stderr.decode()


def test_memory_sizes() -> None:
    assert parse_memory(512) == 512 * 1024**2
    assert parse_memory("2GB") == parse_memory("2 gb") == parse_memory("2G") == 2 * 1024**3
    assert parse_memory("1.5 GB") == int(1.5 * 1024**3)
    assert parse_memory("300MB") == 300 * 1024**2 and parse_memory("64KB") == 64 * 1024
    assert parse_memory(0) is None and parse_memory("0MB") is None


def test_the_module_level_device_names_are_read_once_per_module_not_once_per_site(monkeypatch: pytest.MonkeyPatch) -> None:
    """Profiling a 990 kB file with 20,000 findings: every site scanned every module-level
    statement for device bindings (``sites × statements``). Read once per module now."""
    calls = []
    real = device_source.DeviceSource._looks_like_device

    def counting(self, value):
        calls.append(1)
        return real(self, value)

    monkeypatch.setattr(device_source.DeviceSource, "_looks_like_device", counting)
    constants = [f"SETTING_{i} = {i}" for i in range(40)]
    loads = [f"    s{i} = torch.load(path + '{i}')" for i in range(200)]
    text = "\n".join(["import torch", *constants, "", "", "def restore(path):", *loads, "    return s0", ""])
    output = transform_source(text, all_codemods())
    assert sum(f.code == "TFD005" and f.fixed for f in output.findings) == 200
    assert len(calls) <= 40 * 10, len(calls)  # a few DeviceSource instances, 40 assignments each
