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
        "train.ipynb:cell 3:2:9: TFD001 [*] `torch.load('m.pt').cuda()` hard-codes CUDA: use `.to(device)`",
        "train.ipynb:cell 3:2:9: TFD005 [*] `torch.load` without `map_location`: add `map_location=device`",
        "train.ipynb:cell 5:2:5: TFD001 [*] `torch.randn(3).cuda()` hard-codes CUDA: use `.to(device)`",
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
    nb.cells = [new_code_cell("x = torch.load('p')\nif True\n    pass"), new_code_cell("y = f(1,\nz = 2")]
    nbformat.write(nb, str(tmp_path / "all_broken.ipynb"))
    all_broken = (tmp_path / "all_broken.ipynb").read_bytes()
    _notebook(tmp_path, "good.ipynb")
    out = run_cli("apply", ".", cwd=tmp_path)
    stderr = out.stderr.decode()
    assert out.returncode == 1
    assert "failed: broken.ipynb: not a readable notebook: not JSON (line 1, column 2: Expecting property name enclosed in double quotes)" in stderr
    # one cell that does not parse: named with its line, left as it is, the others read
    assert "not read: syntax.ipynb:cell 2:2:8: syntax error: expected ':'; cell left as it is" in stderr, stderr
    assert (tmp_path / "syntax.ipynb").read_bytes() == before
    # no code cell can be read: the notebook is refused as a whole
    assert "failed: all_broken.ipynb: cell 1: line 2:" in stderr and "syntax error" in stderr, stderr
    assert (tmp_path / "all_broken.ipynb").read_bytes() == all_broken
    assert "to(device)" in (tmp_path / "good.ipynb").read_text()  # the others are still processed
    assert "4 files scanned, 1 changed, 2 failed, 1 notebook cell not read" in stderr
    assert "Traceback" not in stderr


# -- a cell that does not parse (issue 20 idiom 7) ------------------------------------------------
BROKEN_CELL = "plt.plot(losses,\nplt.show()"  # an unclosed paren, as in a real course notebook


def _with_a_broken_cell(folder: Path) -> Path:
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    nb.cells = [
        new_code_cell("%matplotlib inline\nimport torch\nfrom torch.autograd import Variable"),
        new_code_cell("net = torch.load('net.pth').cuda()\n!nvidia-smi"),
        new_code_cell(BROKEN_CELL, outputs=[new_output("stream", name="stdout", text="x\n")]),
        new_code_cell("x = Variable(torch.zeros(2).cuda(async=True))\nprint(net(x).data[0])"),
        new_code_cell("  import numpy as np\n  y = torch.load('y.pt')\n  %time z = np.ones(2)"),  # IPython drops the indent
        new_code_cell("w = torch.ones(1).cuda(async=True)  # noqa: TFD016\n"),
    ]
    path = folder / "course.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_a_cell_that_does_not_parse_is_left_as_it_is_and_the_others_are_migrated(tmp_path: Path) -> None:
    path = _with_a_broken_cell(tmp_path)
    before = json.loads(path.read_text())
    check = run_cli("check", "--no-cache", "course.ipynb", cwd=tmp_path)
    assert check.returncode == 1
    assert "course.ipynb:cell 4:1:34: TFD016 [*] `.cuda(async=True)`" in check.stdout.decode()
    problems = [line for line in check.stderr.decode().splitlines() if line.startswith("not read: ")]
    assert problems == [
        "not read: course.ipynb:cell 3:1:9: syntax error: '(' was never closed; cell left as it is",
        "not read: course.ipynb:cell 6:1:24: syntax error: `async=` at line 1: `async` is a reserved word since Python 3.7 "
        "(PyTorch 0.4 renamed the argument `non_blocking=`): rename it, then run torchfix-device again (TFD016 would fix it, "
        "suppressed by `# noqa` here); cell left as it is",
    ]
    as_json = json.loads(run_cli("check", "--no-cache", "--output-format", "json", "course.ipynb", cwd=tmp_path).stdout)
    problems = [r for r in as_json if r["code"] is None]  # ruff's JSON: records with no rule
    assert [(Path(r["filename"]).name, r["kind"], r["cell"], r["location"], r["message"].split(" syntax error")[0]) for r in problems] == [
        ("course.ipynb", "not read", 3, {"row": 1, "column": 9}, "not read:"),
        ("course.ipynb", "not read", 6, {"row": 1, "column": 24}, "not read:"),
    ]
    out = run_cli("apply", "--no-cache", "--report", "report.json", "course.ipynb", cwd=tmp_path)
    assert out.returncode == 1, out.stderr.decode()
    assert "1 file scanned, 1 changed, 0 failed, 2 notebook cells not read" in out.stderr.decode()
    report = json.loads((tmp_path / "report.json").read_text())
    assert [p["status"] for p in report["not_processed"]] == ["not read", "not read"]
    after = json.loads(path.read_text())
    sources = ["".join(c["source"]) for c in after["cells"]]
    assert after["cells"][2] == before["cells"][2] and after["cells"][5] == before["cells"][5]  # left as they were
    assert sources[0].startswith("%matplotlib inline\nimport torch")  # the Variable import went with its last use
    # one program: cell 1's imports serve the others, one device binding for the notebook
    assert sources[1] == (
        "\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
        "net = torch.load('net.pth', map_location=device).to(device)\n!nvidia-smi"
    )
    assert "torch.zeros(2).to(device, non_blocking=True)" in sources[3]
    assert sources[4] == "  import numpy as np\n  y = torch.load('y.pt', map_location=device)\n  %time z = np.ones(2)"
    assert sum(s.count("device = torch.device(") for s in sources) == 1
    again = run_cli("apply", "--diff", "--no-cache", "course.ipynb", cwd=tmp_path)
    assert again.stdout == b""  # a second run changes nothing


def test_a_cell_holding_a_raw_control_character_in_its_json_is_left_byte_identical(tmp_path: Path) -> None:
    """Strict JSON forbids a raw newline inside a string (nbformat refuses such a file); the
    other cells are migrated and every byte outside their sources stays."""
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    nb.cells = [
        new_code_cell("import torch\nx = torch.load('m.pt')"),
        new_code_cell("torch.dot(torch.Tensor([2, 3]), torch.Tensor([2, 1]))RAW7.0"),
        new_code_cell("y = torch.zeros(2).cuda()\nprint(y)"),
    ]
    text = nbformat.writes(nb).replace("RAW", "\n")
    path = tmp_path / "pasted.ipynb"
    path.write_text(text)
    with pytest.raises(Exception):
        nbformat.reads(text, as_version=4)
    out = run_cli("apply", "--no-cache", "pasted.ipynb", cwd=tmp_path)
    assert out.returncode == 1
    assert (
        "not read: pasted.ipynb:cell 2:1: the notebook's JSON holds a raw control character (U+000A) in this cell, "
        "which JSON does not allow; cell left as it is"
    ) in out.stderr.decode()
    fixed = nb.copy()
    fixed.cells = [
        new_code_cell(
            "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
            "x = torch.load('m.pt', map_location=device)"
        ),
        nb.cells[1],
        new_code_cell("y = torch.zeros(2).to(device)\nprint(y)"),
    ]
    for new, old in zip(fixed.cells, nb.cells):
        new["id"] = old["id"]
    assert path.read_text() == nbformat.writes(fixed).replace("RAW", "\n")


def test_a_line_that_goes_on_with_a_statement_is_python_even_when_it_starts_with_percent(tmp_path: Path) -> None:
    """``% (epoch, loss))`` inside brackets or after a backslash is string formatting, not a
    magic (IPython reads magics only where a statement starts): the cell is migrated, not
    refused, and a real magic next to it still survives."""
    cell = (
        "%time y = 1\n"
        "for epoch in range(2):\n"
        "    loss = torch.zeros(1).cuda()\n"
        "    print('[%d] loss: %.3f' \\\n"
        "          % (epoch, loss.sum()))\n"
        "    line = (\n"
        "        'epoch %d'\n"
        "        % epoch)\n"
        "    !echo {line}\n"
        '    doc = """\n'
        "%not a magic either\n"
        '"""'
    )
    nb = new_notebook()
    nb.cells = [new_code_cell("import torch"), new_code_cell(cell)]
    path = tmp_path / "formats.ipynb"
    nbformat.write(nb, str(path))
    out = run_cli("apply", "--no-cache", "formats.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    source = "".join(json.loads(path.read_text())["cells"][1]["source"])
    device = '\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
    assert source == cell.replace("%time y = 1\n", "%time y = 1\n" + device).replace(
        "torch.zeros(1).cuda()", "torch.zeros(1).to(device)"
    )


# -- every byte outside the rewrite (issue 33, item 15) -----------------------------------------
def _unusual_layouts() -> dict[str, str]:
    """Notebooks as other writers lay them out: 1-space indent and ``\\u00e9`` escapes (Python's
    ``json`` defaults), keys in an unusual order, no final newline, a source as one string, a
    compact list, and a raw ``é`` with 4-space indent."""
    cells = [
        {"source": ["# caf\u00e9 \u2014 setup\n", "import torch\n"], "cell_type": "code", "metadata": {}, "outputs": [],
         "execution_count": None},
        {"cell_type": "markdown", "source": ["R\u00e9sum\u00e9: `x.cuda()`"], "metadata": {}},
        {"outputs": [], "execution_count": 3, "metadata": {"z": 1, "a": 2}, "cell_type": "code",
         "source": ["x = 1  # d\u00e9j\u00e0 vu\n", "m = torch.load('m.pt')\n", "print(m)  # \u00e9t\u00e9"]},
    ]
    document = {"nbformat_minor": 5, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "cells": cells}
    one_string = json.loads(json.dumps(document))
    one_string["cells"][2]["source"] = "".join(one_string["cells"][2]["source"])
    return {
        "escaped_one_space.ipynb": json.dumps(document, indent=1),  # ensure_ascii: \u00e9; no final newline
        "raw_four_spaces.ipynb": json.dumps(document, indent=4, ensure_ascii=False) + "\n",
        "one_string.ipynb": json.dumps(one_string, indent=1, sort_keys=True) + "\r\n",
        "compact.ipynb": json.dumps(document, separators=(",", ":")),
    }


@pytest.mark.parametrize("name", sorted(_unusual_layouts()))
def test_a_rewritten_notebook_keeps_every_byte_outside_its_changed_lines(tmp_path: Path, name: str) -> None:
    """The README promises that every byte outside a rewrite survives: a notebook not in
    nbformat's own layout was re-serialised (escapes decoded, indentation and key order
    changed, a final newline added). Now the text before and after the changed cell's source
    value is byte-identical, the lines of that source that did not change keep their JSON text,
    and a new line is written the way the file writes strings (``\\u00e9`` or ``é``)."""
    text = _unusual_layouts()[name]
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    out = run_cli("apply", name, cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    new = path.read_bytes().decode("utf-8")
    assert new != text
    start = text.rindex('"source"')  # the last cell's source, its last key in every layout
    value_at = text.index(":", start) + 1
    value_at += len(text[value_at:]) - len(text[value_at:].lstrip())
    _, end = json.JSONDecoder().raw_decode(text, value_at)
    prefix, suffix = text[:value_at], text[end:]
    assert new.startswith(prefix) and new.endswith(suffix), (text, new)
    value = json.loads(new[len(prefix): len(new) - len(suffix)])
    source = "".join(value) if isinstance(value, list) else value
    assert source.endswith("x = 1  # d\u00e9j\u00e0 vu\nm = torch.load('m.pt', map_location=device)\nprint(m)  # \u00e9t\u00e9")
    assert isinstance(value, list) == isinstance(json.loads(text[value_at:end]), list)
    escaped = "\\u00e9" in text
    if isinstance(value, list):  # the unchanged lines keep their JSON text
        for line in ("x = 1  # d\u00e9j\u00e0 vu\n", "print(m)  # \u00e9t\u00e9"):
            old_item = json.dumps(line, ensure_ascii=escaped)
            assert old_item in text[value_at:end] and old_item in new[len(prefix): len(new) - len(suffix)]
    assert ("\\u00e9" in new) == escaped and ("\u00e9" in new) == (not escaped)
    assert run_cli("apply", name, cwd=tmp_path).returncode == 0 and path.read_bytes().decode("utf-8") == new  # stable


# -- malformed and old notebooks (issue 33, item 16) --------------------------------------------
def _cell(source: object) -> dict:
    return {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}


def test_malformed_and_old_notebooks_are_reported_by_file_and_cell(tmp_path: Path) -> None:
    """``"source": 5`` was "internal error: AttributeError"; a cell without an ``id`` printed
    nbformat's MissingIDFieldWarning on stderr; an nbformat 3 notebook (cells in ``worksheets``)
    was passed over in silence, 0 findings and exit 0."""
    legacy = "import torch\nx = torch.load('a')\n"
    (tmp_path / "five.ipynb").write_text(json.dumps(
        {"cells": [_cell(legacy), _cell(5)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    no_ids = json.dumps({"cells": [_cell(legacy)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    (tmp_path / "no_ids.ipynb").write_text(no_ids)
    (tmp_path / "v3.ipynb").write_text(json.dumps({
        "metadata": {"name": ""}, "nbformat": 3, "nbformat_minor": 0,
        "worksheets": [{"cells": [{"cell_type": "code", "collapsed": False, "input": legacy.splitlines(True),
                                   "language": "python", "metadata": {}, "outputs": []}], "metadata": {}}],
    }))
    out = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    stderr = out.stderr.decode()
    assert out.returncode == 1
    assert "failed: five.ipynb: cell 2: not a valid cell: its `source` is int 5, not text" in stderr, stderr
    assert "internal error" not in stderr and "AttributeError" not in stderr
    assert "Warning" not in stderr and "normalize()" not in stderr, stderr
    assert out.stdout.decode().startswith("no_ids.ipynb:cell 1:2:5: TFD005 [*] ")  # read all the same
    assert (
        "failed: v3.ipynb: nbformat 3 notebook: only nbformat 4 is read; convert it with "
        "`jupyter nbconvert --to notebook --nbformat 4 FILE` and run again"
    ) in stderr, stderr
    assert "3 files scanned, 1 would change, 2 failed" in stderr
    applied = run_cli("apply", "--no-cache", "no_ids.ipynb", cwd=tmp_path)
    assert applied.returncode == 0 and "Warning" not in applied.stderr.decode()
    assert '"id"' not in (tmp_path / "no_ids.ipynb").read_text()  # nothing added to the cells


def test_a_late_from_future_import_in_a_cell_does_not_stop_the_migration(tmp_path: Path) -> None:
    """IPython compiles a cell statement by statement, so ``import numpy as np`` then
    ``from __future__ import print_function`` runs there, though the cell as a module does not
    compile (mila-iqia's tutorials). The rewrite keeps that error of the input as it is and
    migrates the rest; it does not report an internal error."""
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    nb.cells = [
        new_code_cell("import numpy as np\nfrom __future__ import print_function"),
        new_code_cell("import torch\nfrom torch.autograd import Variable\nx = Variable(torch.ones(2))\nprint(x)"),
    ]
    path = tmp_path / "tutorial.ipynb"
    nbformat.write(nb, str(path))
    out = run_cli("apply", "--no-cache", "tutorial.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert "1 changed, 0 failed" in out.stderr.decode()
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert sources == ["import numpy as np\nfrom __future__ import print_function", "import torch\nx = torch.ones(2)\nprint(x)"]


def test_a_rewrite_that_breaks_compilation_is_still_an_internal_error(tmp_path: Path) -> None:
    """The input's own compile error excuses only the same error in the rewrite."""
    from torchfix_device.engine import _fails_as_well

    with pytest.raises(SyntaxError) as late:
        compile("import os\nfrom __future__ import division\n", "<x>", "exec")
    assert _fails_as_well("import os\nfrom __future__ import division\n", late.value)
    assert not _fails_as_well("import os\n", late.value)  # the input compiles: the rewrite broke it
    with pytest.raises(SyntaxError) as other:
        compile("def f(:\n", "<x>", "exec")
    assert not _fails_as_well("import os\nfrom __future__ import division\n", other.value)


def test_a_notebook_is_read_as_json_whatever_its_outputs_hold(tmp_path: Path) -> None:
    """Outputs are never read: one without ``output_type`` (which nbformat's own reader stumbles
    on when it lays the notebook out again) does not stop the rewrite; an unknown nbformat
    version and a source holding a number are named."""
    from torchfix_device.run.notebook import NotebookError, read_notebook

    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [{"text": ["odd output"]}],
            "source": ["import torch\n", "state = torch.load('m.pt')\n"]}
    text = json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 2}, indent=1)
    (tmp_path / "odd.ipynb").write_text(text)
    out = run_cli("apply", "odd.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    after = json.loads((tmp_path / "odd.ipynb").read_text())
    assert "map_location=device" in "".join(after["cells"][0]["source"])
    assert after["cells"][0]["outputs"] == cell["outputs"]
    assert read_notebook(text.encode())["cells"][0]["source"] == "import torch\nstate = torch.load('m.pt')\n"
    for bad, message in [
        ({"cells": [], "nbformat": 5}, "unsupported nbformat version 5"),
        ({"cells": [{"cell_type": "code", "source": ["x = 1\n", 5]}], "nbformat": 4}, "cell 1: not a valid cell"),
        ([1, 2], "its JSON is not an object"),
    ]:
        with pytest.raises(NotebookError, match=message):
            read_notebook(json.dumps(bad).encode())
