"""Notebooks (item 7): ``.ipynb`` files rewritten cell by cell through the console script."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

nbformat = pytest.importorskip("nbformat")
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output  # noqa: E402

CELL_3 = """\
!pip install tqdm
model = torch.load('m.pt').cuda()
files = !ls
for i in range(2):
    %time x = model(i)
print(model)"""
BASH = "%%bash\necho x.cuda()"


def _notebook(folder: Path, name: str = "train.ipynb") -> Path:
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    nb.cells = [
        new_code_cell("%matplotlib inline\nimport torch", execution_count=1),
        new_markdown_cell("Markdown mentions `model.cuda()`: not code"),
        new_code_cell(CELL_3, execution_count=2, outputs=[new_output("stream", name="stdout", text="ok\n")],
                      metadata={"tags": ["keep"]}),
        new_code_cell(BASH),
        new_code_cell("torch.load?\ny = torch.randn(3).cuda()"),
    ]
    path = folder / name
    nbformat.write(nb, str(path))
    return path


def test_check_names_the_cell(tmp_path: Path) -> None:
    _notebook(tmp_path)
    out = run_cli("check", ".", cwd=tmp_path)  # found by the folder walk
    assert out.returncode == 1
    assert out.stdout.decode().splitlines() == [
        "train.ipynb:cell 3:2:9 TFD001 `.cuda()` hard-codes CUDA: use `.to(device)`",
        "train.ipynb:cell 3:2:9 TFD005 `torch.load` without `map_location`: add `map_location=device`",
        "train.ipynb:cell 5:2:5 TFD001 `.cuda()` hard-codes CUDA: use `.to(device)`",
    ]


def test_diff_is_a_patch_of_the_notebook_that_git_applies(tmp_path: Path) -> None:
    """The notebook's diff is the diff of its JSON file (what ``apply`` writes), so ``git apply``
    takes it like any other file's; the findings name the cells."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    path = _notebook(tmp_path)
    before = path.read_bytes()
    out = run_cli("apply", "--diff", "train.ipynb", cwd=tmp_path)
    assert out.returncode == 1, out.stderr.decode()  # pending changes
    diff = out.stdout.decode()
    assert diff.startswith("--- a/train.ipynb\n+++ b/train.ipynb\n@@ ")
    assert ":cell" not in diff
    assert "+    \"model = torch.load('m.pt', map_location=device).to(device)\\n\",\n" in diff
    assert path.read_bytes() == before
    (tmp_path / "fix.patch").write_bytes(out.stdout)
    applied = subprocess.run([git, "apply", "fix.patch"], cwd=tmp_path, capture_output=True)
    assert applied.returncode == 0, applied.stderr.decode()
    patched = path.read_bytes()
    assert patched != before
    path.write_bytes(before)
    assert run_cli("apply", "train.ipynb", cwd=tmp_path).returncode == 0
    assert path.read_bytes() == patched  # the patch gives exactly what apply writes


def test_apply_keeps_magics_outputs_and_metadata(tmp_path: Path) -> None:
    path = _notebook(tmp_path)
    before = json.loads(path.read_text())
    out = run_cli("apply", "train.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    after = json.loads(path.read_text())
    assert after["metadata"] == before["metadata"] and after["nbformat"] == before["nbformat"]
    assert len(after["cells"]) == len(before["cells"])
    for old, new in zip(before["cells"], after["cells"]):
        assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
    sources = ["".join(c["source"]) for c in after["cells"]]
    assert sources[0] == "%matplotlib inline\nimport torch"
    assert before["cells"][1] == after["cells"][1]  # markdown
    assert sources[3] == BASH  # a %%bash cell is not Python
    assert sources[2] == (
        "!pip install tqdm\n\n"
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "model = torch.load('m.pt', map_location=device).to(device)\n"
        "files = !ls\nfor i in range(2):\n    %time x = model(i)\nprint(model)"
    )
    assert sources[4] == "torch.load?\ny = torch.randn(3).to(device)"  # one device binding for all cells
    # written as Jupyter writes it: only source lines differ
    again = run_cli("apply", "--diff", "train.ipynb", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == b""


def test_a_notebook_without_findings_stays_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "clean.ipynb"
    text = json.dumps(
        {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                    "source": ["%load_ext autoreload\n", "import os\n", "print(os.getcwd())"]}],
         "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        indent=2,  # not the layout nbformat writes: must survive untouched
    )
    path.write_text(text)
    out = run_cli("apply", "clean.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert path.read_text() == text


def test_bad_notebooks_are_named_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json")
    nb = new_notebook()
    nb.cells = [new_code_cell("import torch"), new_code_cell("x = torch.load('p')\nif True\n    pass")]
    nbformat.write(nb, str(tmp_path / "syntax.ipynb"))
    before = (tmp_path / "syntax.ipynb").read_bytes()
    _notebook(tmp_path, "good.ipynb")
    out = run_cli("apply", ".", cwd=tmp_path)
    stderr = out.stderr.decode()
    assert out.returncode == 1
    assert "failed: broken.ipynb: not a readable notebook" in stderr
    assert "failed: syntax.ipynb: cell 2: line 2:" in stderr and "syntax error" in stderr, stderr
    assert (tmp_path / "syntax.ipynb").read_bytes() == before
    assert "to(device)" in (tmp_path / "good.ipynb").read_text()  # the others are still processed
    assert "Traceback" not in stderr
