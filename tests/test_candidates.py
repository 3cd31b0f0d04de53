"""Stage 1 (``candidates``): the stdlib-``ast`` check that decides which codemods may match a file.

Its conditions must be necessary: the engine's results with stage 1 must equal its results
without it, on every fixture and example (the positive cases of every codemod are there).
"""

from __future__ import annotations

from pathlib import Path

import libcst
import pytest

from conftest import FIXTURES, ROOT
from torchfix_device import runner
from torchfix_device.candidates import CONDITIONS, candidate_codemods, parse_facts
from torchfix_device.codemod import all_codemods
from torchfix_device.runner import transform_source, transform_unfiltered

CORPUS = sorted([*FIXTURES.rglob("*.py"), *(ROOT / "examples").rglob("*.py")])


def _outcome(fn, text: str, unsafe: bool):
    try:
        out = fn(text, all_codemods(), unsafe_fixes=unsafe, filename="x.py")
    except Exception as exc:  # the same failure is part of the same result
        return ("raised", type(exc).__name__)
    return (out.text, out.findings, out.notes)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_results_with_stage1_equal_results_without(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for unsafe in (False, True):
        assert _outcome(transform_source, text, unsafe) == _outcome(transform_unfiltered, text, unsafe)


def test_corpus_is_not_empty_and_has_findings_of_every_codemod() -> None:
    codes = set()
    for path in CORPUS:
        out = transform_unfiltered(path.read_text(encoding="utf-8"), all_codemods(), unsafe_fixes=True)
        codes.update(f.code for f in out.findings)
    assert codes == {c.code for c in all_codemods()}


def test_every_codemod_has_a_condition() -> None:
    assert {c.code for c in all_codemods()} <= set(CONDITIONS)


@pytest.fixture
def parse_counter(monkeypatch):
    calls: list[int] = []
    real = libcst.parse_module

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(runner.cst, "parse_module", counting)
    return calls


def test_file_whose_triggers_are_only_words_is_not_parsed_by_libcst(parse_counter) -> None:
    # `torch`, `cuda`, `Tensor`, `forward`, `load` all occur, but in no place a codemod matches
    text = (
        "import torch\n"
        "def load(path):\n"
        '    """Load a Tensor; move it with cuda if you like, then forward it."""\n'
        "    return open(path).read()\n"
    )
    assert runner.active_codemods(text, all_codemods())  # the substring prefilter keeps it
    out = transform_source(text, all_codemods())
    assert out.text == text and out.findings == []
    assert parse_counter == []


def test_file_with_a_candidate_is_parsed_once_and_fixed(parse_counter) -> None:
    text = "import torch\nm = torch.load('m.pt')\n"
    out = transform_source(text, all_codemods())
    assert "map_location=device" in out.text
    assert [f.code for f in out.findings] == ["TFD005"]
    assert parse_counter


def test_syntax_error_still_reported_as_before() -> None:
    text = "import torch\ntorch.load(\n"
    with pytest.raises(libcst.ParserSyntaxError):
        transform_source(text, all_codemods())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("from .module import Module\nclass A(Module):\n    def forward(self, x):\n        x += 1\n", []),
        ("import torch\nclass A(torch.nn.Module):\n    def forward(self, x):\n        x += 1\n", ["TFD004", "TFD012"]),
        ("import torch\nx = torch.zeros(3)\n", []),
        ("from torch import zeros as z\ndef f(device):\n    return z(3)\n", ["TFD003"]),
        ("x.cuda()\n", ["TFD001", "TFD002"]),
        ("y = x.data[0]\n", ["TFD006"]),
        ("from torch.autograd import Variable as V\nV(x)\n", ["TFD009"]),
    ],
)
def test_conditions_on_small_files(text: str, expected: list[str]) -> None:
    facts = parse_facts(text)
    assert facts is not None
    assert [c.code for c in candidate_codemods(facts, all_codemods())] == expected


def test_unparsable_text_gives_no_facts() -> None:
    assert parse_facts("def f(:\n") is None
