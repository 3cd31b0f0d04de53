"""Statements a codemod leaves untouched stay the same objects, the rewrite is rendered from
the statements that changed, and the collector runs after each file: none of it may change
what comes out."""

from __future__ import annotations

import gc
import weakref

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from conftest import FIXTURES, ROOT
from torchfix_device.syntax import traversal
from torchfix_device.engine.shared import SharedWrapper
from torchfix_device.codemods.catalog import lookup
from torchfix_device.engine import Stage1Memo, _codemod_configurer
from torchfix_device.engine.visiting import engine_class
from torchfix_device.options import DEFAULT_OPTIONS
from torchfix_device.run.job import collecting_cycles_after

LEGACY = (
    "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n    def noise(self):\n"
    "        return torch.randn(2)\n\n    def plain(self):\n        return 1\n\n\ndef helper():\n    return 2\n"
)


def _sources() -> list[str]:
    texts = [LEGACY, "", "\n", "# only a comment", "x = 1", "x = 1\r\n\r\n# end\r\n", "if x:\n    pass\n\n\n"]
    for path in sorted([*FIXTURES.rglob("*.py"), *(ROOT / "examples").rglob("*.py")]):
        texts.append(path.read_text(encoding="utf-8"))
    return texts


SOURCES = _sources()


@pytest.mark.parametrize("text", SOURCES, ids=[f"source{i}" for i in range(len(SOURCES))])
def test_a_module_rendered_from_its_statements_is_libcsts_rendering(text: str) -> None:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return
    rendered: dict[int, tuple[cst.CSTNode, str]] = {}
    assert traversal.module_code(module, rendered) == module.code == text
    if not module.body:
        return
    # a version with its first statement replaced reuses the others' code
    first = module.body[0].with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment("# new"))])
    changed = module.with_changes(body=[first, *module.body[1:]])
    known = dict(rendered)
    assert traversal.module_code(changed, rendered) == changed.code
    assert all(rendered[k] == v for k, v in known.items())


def test_a_file_without_a_final_newline_loses_no_code_from_a_reused_statement() -> None:
    module = cst.parse_module("a = 1\nb = 2")
    rendered: dict[int, tuple[cst.CSTNode, str]] = {}
    traversal.module_code(module, rendered)
    swapped = module.with_changes(body=[module.body[1], module.body[0]])
    assert traversal.module_code(swapped, rendered) == swapped.code == "b = 2\na = 1"


def test_untouched_statements_and_members_stay_the_same_objects() -> None:
    module = cst.parse_module(LEGACY)
    codemod = engine_class(lookup("TFD003"))(CodemodContext(), shared=SharedWrapper(module))  # no copy of the tree
    _codemod_configurer(LEGACY, DEFAULT_OPTIONS, stage1=Stage1Memo())(codemod, LEGACY)  # as the engine does
    result = codemod.transform_module(module)
    assert "device=" in result.code
    assert [s is o for s, o in zip(result.body, module.body)] == [True, True, False, True]
    new_members, old_members = result.body[2].body.body, module.body[2].body.body
    assert [s is o for s, o in zip(new_members, old_members)] == [True, False, True]


def test_cycles_made_while_a_file_is_transformed_are_collected_after_it() -> None:
    class Node:
        pass

    before = gc.isenabled()
    with collecting_cycles_after():
        assert not gc.isenabled()
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        assert alive() is not None  # a cycle: reference counting alone cannot free it
    assert gc.isenabled() == before
    assert alive() is None


def test_names_are_counted_outside_the_subtrees_left_out() -> None:
    module = cst.parse_module(
        "device = 1\nclass A:\n    x = device\n    def f(self, device=device):\n        return self.device + g(device=0)\n"
    )
    assert traversal.count_name(module, "device") == 4  # not `self.device`, not the keyword `device=`
    units = list(traversal.statement_units(module))
    assert [type(u).__name__ for u in units] == ["SimpleStatementLine", "ClassDef", "SimpleStatementLine", "FunctionDef"]
    assert traversal.count_name(module, "device", {id(units[3])}) == 2
    assert traversal.count_name(module, "device", {id(module.body[1])}) == 1
