"""The bundled legacy project: the README's main job, end to end."""

from __future__ import annotations

import ast
import json
import shlex
import shutil
import sys
from pathlib import Path

from conftest import ROOT, run_cli, tree_snapshot

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
    """``verify --run`` on the example, as its README says: ``train.py`` fails before the
    migration (``loss.data[0]``) and trains after it; the example itself is left as it was."""
    before = tree_snapshot(EXAMPLE)
    done = run_cli(
        "verify", "--json", "--run", f"{shlex.quote(sys.executable)} train.py", "--unsafe-fixes", "examples/legacy_project",
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["verdict"] == "the migration made it run"
    runs = {r["copy"]: r for r in report["runs"] if not r["stand_in"]}
    assert runs["before"]["exception"]["where"] == "examples/legacy_project/train.py:42"
    assert "invalid index of a 0-dim tensor" in runs["before"]["exception"]["message"]
    assert runs["after"]["ok"] and "epoch 0 loss" in runs["after"]["stdout_tail"]
    assert report["unsafe_fixes"] and report["migration"]["held_back"] == []  # --unsafe-fixes passed through
    assert tree_snapshot(EXAMPLE) == before

    copy = tmp_path / "legacy_project"
    shutil.copytree(EXAMPLE, copy)
    assert run_cli("apply", str(copy)).returncode == 0
    leftover = [
        (p.name, node.lineno)
        for p in copy.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cuda"
    ]
    assert leftover == []  # no `.cuda(` call left (none of the example's is reported for review)
    assert run_cli("apply", "--diff", str(copy)).stdout == b""  # a second run changes nothing
