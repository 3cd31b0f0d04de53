"""Stage 1's memo lets a code version's ``ast`` go before libcst parses it, and answers from
what it kept exactly as it would have from the tree."""

from __future__ import annotations

import gc
import weakref

import libcst as cst
import pytest

from conftest import FIXTURES, ROOT
from torchfix_device import engine
from torchfix_device.prefilter.candidates import candidate_codemods, parse_facts, statements_with_sites
from torchfix_device.codemods.catalog import load_codemods, refs
from torchfix_device.codemods.catalog import lookup

ALL = load_codemods(refs())

LEGACY = (
    "import torch\nimport torch.nn as nn\n\n\n@decorated\nclass Net(nn.Module):\n"
    "    class Config:\n        size = 2\n\n        @staticmethod\n        def make():\n            return torch.zeros(2)\n\n"
    "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n"
    "    @property\n    def noise(self):\n        return torch.randn(2)\n\n\ndef helper(x):\n    x.cuda()\n    return 2\n"
)


def _sources() -> list[str]:
    texts = [LEGACY]
    for path in sorted([*FIXTURES.rglob("*.py"), *(ROOT / "examples").rglob("*.py")]):
        texts.append(path.read_text(encoding="utf-8"))
    return texts


SOURCES = _sources()


def test_the_ast_of_a_file_is_gone_when_libcst_parses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    trees: list[weakref.ref] = []
    alive_at_parse: list[int] = []
    real_facts, real_parse = engine.parse_facts, cst.parse_module

    def recording_facts(code: str):
        facts = real_facts(code)
        if facts is not None and facts.tree is not None:
            trees.append(weakref.ref(facts.tree))
        return facts

    def checking_parse(code, *args, **kwargs):
        alive_at_parse.append(sum(ref() is not None for ref in trees))
        return real_parse(code, *args, **kwargs)

    monkeypatch.setattr(engine, "parse_facts", recording_facts)
    monkeypatch.setattr(cst, "parse_module", checking_parse)
    enabled = gc.isenabled()
    gc.disable()  # as in a run: nothing may wait for the collector to let a tree go
    try:
        output = engine.transform_source(LEGACY, ALL)
    finally:
        if enabled:
            gc.enable()
    assert output.text != LEGACY and trees and alive_at_parse == [0]


@pytest.mark.parametrize("text", SOURCES, ids=[f"source{i}" for i in range(len(SOURCES))])
def test_settled_answers_are_the_trees_answers(text: str) -> None:
    facts = parse_facts(text)
    if facts is None:
        pytest.skip("CPython cannot parse it")
    expected = candidate_codemods(facts, ALL)
    memo = engine.Stage1Memo(ALL)
    assert memo.candidates_in(text, ALL) == expected  # from the live tree
    settled = memo.settle(text)
    assert settled is not None and memo.parsed(text)
    assert memo.candidates_in(text, ALL) == expected  # from what was kept
    for codemod in ALL:
        wanted = statements_with_sites(facts, codemod) if codemod in expected else None
        assert settled.sites[codemod.code] == wanted, codemod.code
    assert settled.classes == facts.class_outlines  # facts: a parse of its own


def test_class_outlines_hold_member_first_lines_one_level_down() -> None:
    outlines = parse_facts(LEGACY).class_outlines
    assert list(outlines) == [2]
    net = outlines[2]
    assert net.member_lines == [7, 14, 18]  # the property's decorator line, not its def
    assert list(net.classes) == [0]
    assert net.classes[0].member_lines == [8, 10] and net.classes[0].classes == {}


def test_a_codemod_it_was_not_settled_for_is_answered_after_parsing_again() -> None:
    factory, cuda_call = lookup("TFD003"), lookup("TFD001")
    memo = engine.Stage1Memo([factory])
    first = memo.settle(LEGACY)
    assert first is not None and cuda_call.code not in first.sites
    again = memo.settle(LEGACY, [cuda_call])
    assert again is not None and set(again.sites) == {factory.code, cuda_call.code}
    assert again.sites[cuda_call.code] == statements_with_sites(parse_facts(LEGACY), cuda_call)
    assert memo.candidates_in(LEGACY, [cuda_call, factory]) == [cuda_call, factory]


def test_code_cpython_cannot_parse_settles_to_nothing_and_keeps_every_candidate() -> None:
    memo = engine.Stage1Memo(ALL)
    assert memo.settle("def broken(:\n    pass\n") is None
    assert not memo.parsed("def broken(:\n    pass\n")
    assert memo.candidates_in("def broken(:\n    pass\n", ALL) == ALL
