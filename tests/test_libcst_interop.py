"""libcst interop (item 9): our codemods run through ``python -m libcst.tool codemod`` too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from torchfix_device.codemods.catalog import all_codemods

CONFIG = """\
generated_code_marker: '@generated'
formatter: []
blacklist_patterns: []
modules:
- 'torchfix_device.codemods'
repo_root: '.'
"""
LEGACY = """\
import torch

model = torch.load("m.pt").cuda()
x = y.cuda(dev)
"""
RESIDUAL = """\
import torch.nn as nn


class Block(nn.Module):
    def forward(self, x):
        out = self.body(x)
        out += x
        return out
"""


def libcst_tool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "libcst.tool", *args], cwd=cwd, capture_output=True, timeout=300
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".libcst.codemod.yaml").write_text(CONFIG)
    return tmp_path


def test_libcst_tool_lists_every_codemod_with_its_code(project: Path) -> None:
    out = libcst_tool("list", cwd=project)
    assert out.returncode == 0, out.stderr.decode()
    listed = out.stdout.decode()
    for codemod in all_codemods():
        module = codemod.__module__.removeprefix("torchfix_device.codemods.")
        assert f"{module}.{codemod.__name__} - {codemod.code} {codemod.name}: " in listed


def test_cuda_call_through_libcst_tool_matches_our_own_apply(project: Path) -> None:
    ours = project / "ours"
    ours.mkdir()
    (ours / "m.py").write_text(LEGACY)
    (project / "m.py").write_text(LEGACY)
    out = libcst_tool("codemod", "--no-format", "--hide-progress", "cuda_call.CudaCall", "m.py", cwd=project)
    stderr = out.stderr.decode()
    assert out.returncode == 0, stderr
    assert "Transformed 1 files successfully" in stderr
    # a place left for manual review becomes a libcst warning
    assert "WARNING: 4:5 TFD001 `y.cuda(dev)` names a device explicitly" in stderr
    assert run_cli("apply", "--allow-dirty", "--select", "TFD001", "m.py", cwd=ours).returncode == 0
    assert (project / "m.py").read_text() == (ours / "m.py").read_text()
    assert "model = torch.load(\"m.pt\").to(device)" in (project / "m.py").read_text()


def test_unsafe_fixes_option_through_libcst_tool(project: Path) -> None:
    (project / "block.py").write_text(RESIDUAL)
    held = libcst_tool("codemod", "--no-format", "inplace_op_in_forward.InplaceOpInForward", "block.py", cwd=project)
    assert held.returncode == 0 and (project / "block.py").read_text() == RESIDUAL
    assert b"TFD012" in held.stderr  # the held-back fix is named
    out = libcst_tool(
        "codemod", "--no-format", "inplace_op_in_forward.InplaceOpInForward", "--unsafe-fixes", "block.py", cwd=project
    )
    assert out.returncode == 0, out.stderr.decode()
    assert "out = out + x" in (project / "block.py").read_text()
