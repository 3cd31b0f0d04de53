"""``apply --report FILE`` (Markdown, JSON for ``*.json``) through the console script.

The report must agree with what the run did: the same changes as the files' findings, the
places left for manual review with their reasons, the checkpoint warnings, the counts."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import run_cli

MODEL = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [nn.Linear(3, 3) for _ in range(2)]

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x + torch.randn(3)


net = Net().cuda(dev)
state = torch.load("ckpt.pt")
"""
TRAIN = """\
import torch

x = torch.zeros(3).cuda()
y = torch.ones(3).cuda()  # noqa: TFD001
"""
BLOCK = """\
import torch.nn as nn


class Block(nn.Module):
    def forward(self, x):
        out = self.body(x)
        out += x
        return self.head(out)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.py").write_text(MODEL)
    (src / "train.py").write_text(TRAIN)
    (src / "block.py").write_text(BLOCK)
    (src / "clean.py").write_text("import os\n")
    (src / "broken.py").write_text("import torch\nx = torch.load(\n")
    return tmp_path


def _findings(project: Path) -> list[dict]:
    """The findings of ``check --output-format json`` (ruff's records), in the report's terms."""
    records = json.loads(run_cli("check", "--output-format", "json", "src", cwd=project).stdout)
    return [
        {"file": Path(r["filename"]).relative_to(project).as_posix(), "line": r["location"]["row"],
         "column": r["location"]["column"], "code": r["code"], "kind": r["kind"]}
        for r in records if r["code"] is not None
    ]


def _place(item: dict) -> tuple[str, int, int, str]:
    return item["file"], item["line"], item["column"], item["code"]


def test_json_report_agrees_with_the_run(project: Path) -> None:
    expected = _findings(project)  # taken before anything is rewritten
    out = run_cli("apply", "--report", "migration.json", "src", cwd=project)
    assert out.returncode == 1  # broken.py could not be processed
    assert "report written to migration.json" in out.stderr.decode()
    data = json.loads((project / "migration.json").read_text())

    assert sorted(map(_place, data["changes"])) == sorted(_place(f) for f in expected if f["kind"] == "fix")
    assert sorted(map(_place, data["manual_review"])) == sorted(_place(f) for f in expected if f["kind"] == "manual")
    assert sorted(map(_place, data["held_back"])) == sorted(_place(f) for f in expected if f["kind"] == "unsafe-fix")
    reasons = {item["line"]: item["message"] for item in data["manual_review"]}
    assert "names a device explicitly" in reasons[16]  # Net().cuda(dev)
    assert [w["file"] for w in data["checkpoint_warnings"]] == ["src/model.py"]
    assert "state_dict() gains keys 'blocks.*'" in data["checkpoint_warnings"][0]["message"]
    assert [(p["file"], p["status"]) for p in data["not_processed"]] == [("src/broken.py", "failed")]

    summary = data["summary"]
    assert summary["files_changed"] == 2 and summary["files_failed"] == 1 and summary["suppressed"] == 1
    assert summary["changes"] == len(data["changes"]) and summary["files_scanned"] == 5
    per_codemod = {c["code"]: c for c in data["per_codemod"]}
    assert {code: c["fixed"] for code, c in per_codemod.items() if c["fixed"]} == dict(Counter(c["code"] for c in data["changes"]))
    assert per_codemod["TFD001"]["suppressed"] == 1 and per_codemod["TFD012"]["held_back"] == 1
    per_file = {f["file"]: f for f in data["per_file"]}
    assert per_file["src/train.py"] == {"file": "src/train.py", "status": "changed", "fixed": 1, "held_back": 0, "manual_review": 0, "suppressed": 1}
    assert "src/clean.py" not in per_file  # nothing to say about it
    assert data["mode"] == "files rewritten in place"
    assert data["command"] == "torchfix-device apply --report migration.json src"


def test_markdown_report_reads_as_a_record(project: Path) -> None:
    out = run_cli("apply", "--report", "migration.md", "src", cwd=project)
    assert out.returncode == 1
    text = (project / "migration.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings == [
        "Summary", "Per codemod", "Per file", "Changes", "Left for manual review",
        "Unsafe fixes held back", "Checkpoint compatibility", "Files not processed",
    ]
    assert "- `src/train.py:3:5` **TFD001** `torch.zeros(3).cuda()` hard-codes CUDA: use `.to(device)`" in text
    assert "- `src/model.py:16:7` **TFD001** `Net().cuda(dev)` names a device explicitly and nothing shows `dev` is an int GPU index: choose a device expression by hand" in text
    assert "| TFD005 | torch-load-without-map-location | 1 | 0 | 0 | 0 |" in text
    assert "| src/train.py | changed | 1 | 0 | 0 | 1 |" in text
    assert "- `src/model.py`: TFD004: Net.blocks is now registered" in text
    assert "| suppressed by noqa comments | 1 |" in text


def test_markdown_escapes_what_is_not_code(tmp_path: Path) -> None:
    """``__init__`` in a reason must not turn bold, and a ``|`` in a file name must not split a
    table cell."""
    (tmp_path / "a|b.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = torch.zeros(3).cuda()\n"
    )
    run_cli("apply", "--diff", "--report", "r.md", ".", cwd=tmp_path)
    text = (tmp_path / "r.md").read_text()
    assert "inside \\_\\_init\\_\\_ the module has no device yet" in text
    assert "| a\\|b.py | changed | 1 | 1 | 0 | 0 |" in text


def test_report_with_diff_writes_nothing_but_the_report(project: Path) -> None:
    before = {p.name: p.read_bytes() for p in (project / "src").iterdir()}
    out = run_cli("apply", "--diff", "--report", "r.json", "src", cwd=project)
    assert out.stdout.startswith(b"--- a/src/")
    assert {p.name: p.read_bytes() for p in (project / "src").iterdir()} == before
    data = json.loads((project / "r.json").read_text())
    assert data["mode"] == "dry run (--diff): nothing written" and data["summary"]["files_changed"] == 2


def test_unwritable_report_path_is_refused_before_anything_is_written(project: Path) -> None:
    before = {p.name: p.read_bytes() for p in (project / "src").iterdir()}
    out = run_cli("apply", "--report", "no/such/folder/r.md", "src", cwd=project)
    assert out.returncode == 2
    assert "--report no/such/folder/r.md: no such folder" in out.stderr.decode()
    assert {p.name: p.read_bytes() for p in (project / "src").iterdir()} == before
