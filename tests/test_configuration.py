"""``[tool.torchfix-device] device-expression`` and ``--device-expression``, through the console
script (the other keys are covered in test_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

LEGACY = "import torch\n\nstate = torch.load('ckpt.pt')\n"
ACCELERATOR = "torch.accelerator.current_accelerator()"


def _configure(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text(f'[project]\nname = "demo"\n\n[tool.torchfix-device]\n{body}\n')


def test_configured_device_expression_is_inserted_and_recognised_next_time(tmp_path: Path) -> None:
    _configure(tmp_path, f'device-expression = "{ACCELERATOR}"')
    (tmp_path / "m.py").write_text(LEGACY)
    assert run_cli("apply", ".", cwd=tmp_path).returncode == 0
    first = (tmp_path / "m.py").read_text()
    assert first == f"import torch\n\ndevice = {ACCELERATOR}\n\nstate = torch.load('ckpt.pt', map_location=device)\n"
    # a later rewrite in the same file reuses the inserted binding instead of adding another
    (tmp_path / "m.py").write_text(first + "x = torch.zeros(3).cuda()\n")
    run_cli("apply", ".", cwd=tmp_path)
    second = (tmp_path / "m.py").read_text()
    assert second.count("device = ") == 1 and second.endswith("x = torch.zeros(3).to(device)\n")


def test_device_expression_follows_the_files_torch_alias(tmp_path: Path) -> None:
    _configure(tmp_path, "device-expression = 'torch.device(\"cuda:0\")'")
    (tmp_path / "m.py").write_text("import torch as T\n\nstate = T.load('ckpt.pt')\n")
    run_cli("apply", ".", cwd=tmp_path)
    assert (tmp_path / "m.py").read_text() == "import torch as T\n\ndevice = T.device(\"cuda:0\")\n\nstate = T.load('ckpt.pt', map_location=device)\n"


def test_command_line_device_expression_wins(tmp_path: Path) -> None:
    _configure(tmp_path, f'device-expression = "{ACCELERATOR}"')
    (tmp_path / "m.py").write_text(LEGACY)
    out = run_cli("apply", "--diff", "--device-expression", 'torch.device("cpu")', ".", cwd=tmp_path)
    assert '+device = torch.device("cpu")\n' in out.stdout.decode()
    default = run_cli("apply", "--diff", "m.py", cwd=tmp_path)
    assert f"+device = {ACCELERATOR}\n" in default.stdout.decode()


def test_without_configuration_the_default_expression_is_used(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(LEGACY)
    out = run_cli("apply", "--diff", ".", cwd=tmp_path)
    assert '+device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in out.stdout.decode()


@pytest.mark.parametrize(
    "body, message",
    [
        ('device-expression = "torch.device("', "device-expression 'torch.device(' is not a Python expression"),
        ("device-expression = 3", "[tool.torchfix-device] device-expression must be a string"),
        ('device-expression = "  "', "device-expression is empty"),
        ('device-expresion = "x"', "unknown key(s) device-expresion; known: cache-dir, device-expression, exclude, extend-exclude, extend-select, file-memory-limit, file-time-limit, force-exclude, ignore, max-file-size, per-file-ignores, select, unsafe-fixes"),
    ],
)
def test_bad_device_expression_is_a_clear_error(tmp_path: Path, body: str, message: str) -> None:
    _configure(tmp_path, body)
    (tmp_path / "m.py").write_text(LEGACY)
    for command in ("apply", "check"):
        out = run_cli(command, ".", cwd=tmp_path)
        stderr = out.stderr.decode()
        assert out.returncode == 2 and message in stderr and "pyproject.toml" in stderr, stderr
        assert "Traceback" not in stderr
    assert (tmp_path / "m.py").read_text() == LEGACY


def test_bad_device_expression_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(LEGACY)
    out = run_cli("apply", "--device-expression", "torch.device(", ".", cwd=tmp_path)
    assert out.returncode == 2 and "is not a Python expression" in out.stderr.decode()
    assert (tmp_path / "m.py").read_text() == LEGACY
