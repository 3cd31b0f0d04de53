"""Format of the real-repo development corpus manifest (issue 20); needs no network or clone."""

from __future__ import annotations

import csv
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "benchmarks" / "real_corpus"
MANIFEST = CORPUS / "manifest.csv"
REPOS = CORPUS / "repos.csv"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
ACCEPTANCE_ONLY = {"pytorch/examples", "kuangliu/pytorch-cifar", "jcjohnson/pytorch-examples"}


def _load_script():
    spec = importlib.util.spec_from_file_location("real_repos", ROOT / "benchmarks" / "real_repos.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules.setdefault("real_repos", module)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def test_manifest_columns_and_values():
    script = _load_script()
    columns, rows = _rows(MANIFEST)
    assert columns == ["repo", "commit", "path", "line", "idiom", "expected", "note"]
    assert len(rows) >= 300
    for row in rows:
        where = f"{row['repo']} {row['path']}:{row['line']}"
        assert HEX40.match(row["commit"]), where
        assert row["idiom"] in script.IDIOMS, where
        assert row["expected"] in {"fix", "keep"}, where
        assert row["line"].isdigit() and int(row["line"]) >= 1, where
        assert row["path"].endswith((".py", ".ipynb")) and not row["path"].startswith("/"), where
        if row["expected"] == "keep":
            assert row["note"].strip(), f"every keep site needs a note: {where}"


def test_manifest_has_no_duplicate_sites_and_matches_repos():
    _, repos = _rows(REPOS)
    commits = {r["repo"]: r["commit"] for r in repos}
    assert len(commits) >= 10
    assert not ACCEPTANCE_ONLY & set(commits), "acceptance repos must stay out of the development corpus"
    for repo, commit in commits.items():
        assert HEX40.match(commit), repo
    _, rows = _rows(MANIFEST)
    seen = set()
    for row in rows:
        key = (row["repo"], row["path"], row["line"], row["idiom"])
        assert key not in seen, key
        seen.add(key)
        assert commits.get(row["repo"]) == row["commit"], key
    assert {row["repo"] for row in rows} == set(commits)
    assert {row["expected"] for row in rows} == {"fix", "keep"}


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        ("a\nb\nc\n", "a\nb\nc\n", set()),
        ("a\nx.cuda()\nc\n", "a\nx.to(device)\nc\n", {2}),
        ("a\nb\nc\n", "import torch\na\nc\n", {2}),
    ],
)
def test_changed_regions_maps_lines_of_the_input(before, after, changed):
    script = _load_script()
    assert set(script.changed_regions(before, after)) == changed


def test_score_site_requires_the_legacy_token_gone():
    script = _load_script()
    row = {"idiom": "cuda moves", "expected": "fix"}
    line = "    x = Variable(x).cuda()"
    assert script.score_site(row, "    x = x.to(device)", line)
    assert not script.score_site(row, "    x = x.cuda()", line)
    assert not script.score_site(row, None, line)
    keep = {"idiom": "3 .data[0] scalars", "expected": "keep"}
    assert script.score_site(keep, None, "img = imgs.data[0]")
    assert not script.score_site(keep, "img = imgs[0].item()", "img = imgs.data[0]")


def test_a_fix_site_in_a_re_indented_region_is_scored_on_its_own_line():
    """A loop put under ``with torch.no_grad():`` is one changed region; the fixed line must not
    be scored on the text of its unfixed neighbour (the scorer counted it missed), and the
    neighbour stays missed. A keep site only re-indented is still a changed site."""
    script = _load_script()
    before = "for x in xs:\n    a = Variable(x, volatile=True)\n    b = Variable(y, volatile=True)\n    f(a, b)\n"
    after = "with torch.no_grad():\n    for x in xs:\n        a = Variable(x, volatile=True)\n        b = y\n        f(a, b)\n"
    coarse, fine = script.changed_regions(before, after), script.changed_regions(before, after, fine=True)
    assert set(coarse) == {1, 2, 3, 4} and set(fine) == {1, 2, 3, 4}
    assert fine[3] == "        b = y" and fine[2] == "        a = Variable(x, volatile=True)"
    row = {"idiom": "5 Variable/volatile", "expected": "fix"}
    lines = before.splitlines()
    assert not script.score_site(row, coarse[3], lines[2])  # the coarse region holds line 2's Variable
    assert script.score_site(row, coarse[3], lines[2], fine[3])
    assert not script.score_site(row, coarse[2], lines[1], fine[2])
    keep = {"idiom": "cuda moves", "expected": "keep"}
    assert not script.score_site(keep, coarse[4], lines[3], fine[4])


def test_notebook_view_numbers_cells_like_the_tool():
    script = _load_script()
    notebook = (
        '{"nbformat": 4, "nbformat_minor": 2, "metadata": {}, "cells": ['
        '{"cell_type": "markdown", "metadata": {}, "source": ["# title"]},'
        '{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null,'
        ' "source": ["x = 1\\n", "y = x.cuda()"]}]}'
    )
    assert script.notebook_view(notebook) == "# %% cell 2\nx = 1\ny = x.cuda()\n"
