"""The bundled legacy project: the README's main job, end to end."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "legacy_project"


def test_dry_run_shows_every_device_codemod_and_writes_nothing(tmp_path: Path) -> None:
    before = {p: p.read_bytes() for p in EXAMPLE.rglob("*.py")}
    out = run_cli("apply", "--diff", "examples/legacy_project", cwd=ROOT)
    assert out.returncode == 1, out.stderr.decode()  # pending changes (issue 23: as ruff's --diff)
    summary = out.stderr.decode()
    for code in ("TFD001", "TFD002", "TFD003", "TFD004", "TFD005", "TFD006"):
        assert code in summary
    assert {p: p.read_bytes() for p in EXAMPLE.rglob("*.py")} == before


def test_rewritten_example_runs_on_cpu_where_the_original_fails(tmp_path: Path) -> None:
    copy = tmp_path / "legacy_project"
    shutil.copytree(EXAMPLE, copy)
    original = subprocess.run([sys.executable, "train.py"], cwd=copy, capture_output=True, timeout=300)
    assert original.returncode != 0 and b"invalid index of a 0-dim tensor" in original.stderr

    assert run_cli("apply", str(copy)).returncode == 0
    leftover = [
        (p.name, node.lineno)
        for p in copy.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cuda"
    ]
    assert leftover == []  # no `.cuda(` call left (none of the example's is reported for review)
    rewritten = subprocess.run([sys.executable, "train.py"], cwd=copy, capture_output=True, timeout=300)
    assert rewritten.returncode == 0, rewritten.stderr.decode()
    assert b"epoch 0 loss" in rewritten.stdout
    assert run_cli("apply", "--diff", str(copy)).stdout == b""  # a second run changes nothing
