"""The fixture harness: every codemod is checked against its own fixture folder.

tests/fixtures/<codemod module name>/
    <case>.in.py / <case>.out.py   the codemod alone turns .in into exactly .out
    <case>.noop.py                 a trap: must come out byte-identical (first comment says why)

Also: running again on .out changes nothing; every codemod has fixtures of each kind and the
documentation sections.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchfix_device.options import RunOptions
from torchfix_device.codemods.base import DOC_SECTIONS

from torchfix_device.codemods.catalog import all_codemods, rule_slug
from torchfix_device.engine import transform_source

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CODEMODS = {rule_slug(c.__module__): c for c in all_codemods()}


def _cases(kind: str):
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name in CODEMODS):
        for path in sorted(folder.glob(f"*.{kind}.py")):
            yield pytest.param(CODEMODS[folder.name], path, id=f"{folder.name}/{path.name}")


def _rewrite(codemod, path: Path, text: str | None = None, unsafe: bool = False) -> str:
    source = path.read_text(encoding="utf-8") if text is None else text
    return transform_source(source, [codemod], filename=str(path), options=RunOptions(unsafe_fixes=unsafe)).text


def _unsafe(path: Path) -> bool:
    return ".unsafe" in path.name


@pytest.mark.parametrize("codemod, path", list(_cases("in")))
def test_in_gives_out(codemod, path: Path) -> None:
    expected = path.with_name(path.name.replace(".in.py", ".out.py"))
    assert expected.exists(), f"{path.name} has no matching .out.py"
    assert _rewrite(codemod, path, unsafe=_unsafe(path)) == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize("codemod, path", list(_cases("out")))
def test_second_run_changes_nothing(codemod, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _rewrite(codemod, path, text, unsafe=_unsafe(path)) == text


@pytest.mark.parametrize("codemod, path", list(_cases("out")))
def test_out_compiles(codemod, path: Path) -> None:
    compile(path.read_text(encoding="utf-8"), str(path), "exec")


@pytest.mark.parametrize("codemod, path", list(_cases("noop")))
def test_trap_is_byte_identical(codemod, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.lstrip().startswith("#"), f"{path.name}: a trap's first comment must say why it is left alone"
    assert _rewrite(codemod, path, text, unsafe=True) == text


@pytest.mark.parametrize("codemod", all_codemods(), ids=lambda c: c.code)
def test_every_codemod_has_each_kind_of_fixture(codemod) -> None:
    folder = FIXTURES / rule_slug(codemod.__module__)
    assert folder.is_dir(), f"{codemod.code}: no fixture folder {folder.name}/"
    for kind in ("in", "out", "noop"):
        assert list(folder.glob(f"*.{kind}.py")), f"{codemod.code}: no .{kind}.py fixture"


@pytest.mark.parametrize("codemod", all_codemods(), ids=lambda c: c.code)
def test_every_codemod_has_its_doc_sections(codemod) -> None:
    sections = codemod.documentation()
    for heading in DOC_SECTIONS:
        assert sections.get(heading), f"{codemod.code}: doc section {heading!r} missing or empty"
    assert codemod.summary and codemod.name and codemod.triggers
