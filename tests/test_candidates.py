"""Stage 1 (``candidates``): the stdlib-``ast`` check that decides which codemods may match a file.

Its conditions must be necessary: the engine's results with stage 1 must equal its results
without it, on every fixture and example (the positive cases of every codemod are there).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import libcst
import pytest

from conftest import FIXTURES, ROOT, sweep_id, sweep_sample
from torchfix_device.options import RunOptions
from torchfix_device import engine
from torchfix_device.prefilter.candidates import candidate_codemods, parse_facts
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source, transform_unfiltered

CORPUS = sorted([*FIXTURES.rglob("*.py"), *(ROOT / "examples").rglob("*.py")])
# Results with stage 1 against results without, in both tiers: on an eighth of the corpus in CI
# (four transforms a file, the suite's costliest sweep; every file under `TFD_SWEEP=all`,
# benchmarks/sweeps.py, on the fixtures and on the dev corpus). That stage 1 keeps every codemod
# that acts on a file is checked on every file below (test_condition_holds_..._on_fixtures).
SAMPLE = sweep_sample(CORPUS, every=8)

# The engine's unfiltered results on the sample serve two tests (_unfiltered): on one worker, once.
pytestmark = pytest.mark.xdist_group("candidates-corpus")


def _outcome(fn, text: str, unsafe: bool):
    try:
        out = fn(text, all_codemods(), filename="x.py", options=RunOptions(unsafe_fixes=unsafe))
    except Exception as exc:  # the same failure is part of the same result
        return ("raised", type(exc).__name__)
    return (out.text, out.findings, out.notes)


@lru_cache(maxsize=None)
def _unfiltered(path: Path, unsafe: bool):
    """Stage 1 skipped: every codemod on ``path`` (computed once, compared by two tests)."""
    return _outcome(transform_unfiltered, path.read_text(encoding="utf-8"), unsafe)


@pytest.mark.sweep
@pytest.mark.parametrize("path", SAMPLE, ids=sweep_id)
def test_results_with_stage1_equal_results_without(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for unsafe in (False, True):
        assert _outcome(transform_source, text, unsafe) == _unfiltered(path, unsafe)


def test_sample_is_not_empty_and_has_findings_of_every_codemod() -> None:
    codes = set()
    for path in SAMPLE:
        outcome = _unfiltered(path, True)
        assert outcome[0] != "raised", (path, outcome)
        codes.update(f.code for f in outcome[1])
    assert codes == {c.code for c in all_codemods()}


def test_every_codemod_has_a_condition() -> None:
    """Each codemod states its own stage-1 condition (``may_match`` or ``sites``) in its module;
    the base class's defaults would run it on every file."""
    from torchfix_device.codemods.base import Codemod

    def own(codemod: type[Codemod], method: str) -> bool:
        return getattr(codemod, method).__func__ is not getattr(Codemod, method).__func__

    codemods = all_codemods()
    assert codemods
    assert [c.code for c in codemods if not (own(c, "may_match") or own(c, "sites"))] == []


@pytest.fixture
def parse_counter(monkeypatch):
    calls: list[int] = []
    real = libcst.parse_module

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine.cst, "parse_module", counting)
    return calls


def test_file_whose_triggers_are_only_words_is_not_parsed_by_libcst(parse_counter) -> None:
    # `torch`, `cuda`, `Tensor`, `forward`, `load` all occur, but in no place a codemod matches
    text = (
        "import torch\n"
        "def load(path):\n"
        '    """Load a Tensor; move it with cuda if you like, then forward it."""\n'
        "    return open(path).read()\n"
    )
    assert engine.active_codemods(text, all_codemods())  # the substring prefilter keeps it
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
        ("import torch\nclass A(torch.nn.Module):\n    def forward(self, x):\n        x += 1\n", ["TFD012"]),
        # a module class alone is not a site: TFD004/TFD007 need `self.x = [...]` / a tensor
        ("import torch.nn as nn\nclass A(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.n = 3\n        self.fc = nn.Linear(2, 2)\n", []),
        ("import torch.nn as nn\nclass A(nn.Module):\n    def __init__(self):\n        self.b = []\n", ["TFD004"]),
        ("import torch\nclass A(torch.nn.Module):\n    def __init__(self):\n        self.m = torch.ones(2)\n", ["TFD007"]),
        # TFD003: a factory in a module's __init__ is left alone, in another method it is a site
        ("import torch\nclass A(torch.nn.Module):\n    def __init__(self):\n        w = torch.ones(2)\n", []),
        ("import torch\nclass A(torch.nn.Module):\n    def reset(self):\n        w = torch.ones(2)\n", ["TFD003"]),
        ("import torch\nclass A(torch.nn.Module):\n    def reset(self, x):\n        w = torch.ones(2).to(x)\n", []),
        ("import torch\ndef f(x):\n    return torch.load(x, map_location='cpu')\n", []),
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


# TFD009 skips the statements whose lines spell neither `Variable`, an alias of it nor `volatile`:
# an alias used far from its import, a module-level volatile input feeding the loop after it, a
# removed `x = Variable(x)` whose comment goes to the next (skipped) statement, an `__all__` entry.
TFD009_SKIPS = [
    "import torch\nfrom torch.autograd import Variable as V\n__all__ = ['Net']\n\ndef helper(x):\n    return x + 1\n\n"
    "class Net(torch.nn.Module):\n    def other(self):\n        return 1\n\n    def forward(self, x):\n        return V(x.data)\n",
    "import torch\nfrom torch.autograd import Variable\nx = Variable(torch.ones(2), volatile=True)\nfor i in range(2):\n"
    "    y = net(x)\n    print(y)\n",
    "import torch\nfrom torch.autograd import Variable\nx = torch.ones(2)\n# moved along\nx = Variable(x)\ndef f():\n    return 1\n",
    "import torch\nfrom torch.autograd import Variable\n__all__ = ['Variable']\ny = Variable(torch.ones(1))\ndef f():\n    return 1\n",
]

# -- necessity, codemod by codemod -------------------------------------------------------------------
# Snippets where the shortcuts stage 1 takes could go wrong: names bound without an import, aliases,
# starred bases, calls in decorators and defaults, nested functions, comments that make a function
# "device-aware", locals that hold containers or tensors.
TRICKY = [
    "torch = __import__('torch')\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3)\n",
    "import importlib\ntorch = importlib.import_module('torch')\nm = torch.load('m.pt')\n",
    "def setup():\n    global torch\n    torch = object()\nsetup()\nm = torch.load('m.pt')\n",
    "import torch.nn as tnn\nimport torch as T\nclass M(tnn.Module):\n    def reset(self):\n        self.e = T.randn(3)\n",
    "from torch.nn import Module as Base, Linear as L\nclass M(Base):\n    def forward(self, x):\n        return L(2, 2)(x)\n",
    "import torch\nfrom torch import nn\nclass M(*nn.Sequential):\n    def forward(self, x):\n        return x + torch.zeros(2)\n",
    "import torch\nfrom torch import nn\nclass M(nn.Module):\n    @torch.jit.ignore\n    def f(self, x=torch.zeros(2)):\n        def inner():\n            return torch.ones(2)\n        return inner()\n",
    "import torch\nclass Plain:\n    # keeps its buffers on cuda\n    def __init__(self):\n        self.b = torch.zeros(2)\n",
    "import torch\nclass Plain:\n    def __init__(self, device):\n        self.b = torch.zeros(2)\n",
    "import torch\nfrom torch import nn\nclass A(nn.Module):\n    pass\nclass B(A):\n    def __init__(self):\n        super().__init__()\n        blocks = []\n        for i in range(3):\n            blocks.append(nn.Linear(2, 2))\n        self.blocks = blocks\n",
    "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.heads: dict = {}\n        self.heads['a'] = nn.Linear(2, 2)\n        self.rep = [nn.Linear(2, 2)] * 3\n",
    "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        pe = torch.zeros(n)\n        self.pe = -pe.unsqueeze(0)[0] * 2\n",
    "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.zeros(3)(x) + torch.FloatTensor(2) + torch.cuda.FloatTensor(2)\n",
    "import torch\nfrom torch.autograd import variable\ny = variable.Variable(torch.ones(1))\nz = x.data[0,]\n",
    "import torch as T\nclass torch:\n    zeros = staticmethod(lambda n: n)\nclass M(T.nn.Module):\n    def forward(self, x):\n        return torch.zeros(x)\n",
    "from torch import load as L\nm = L('m.pt')\nmodel = L('model.pt')\nmodel.eval()\n",
    "import torch\nckpt = torch.load('c.pt')\nnet = ckpt['model']\nnet2 = net.cuda()\nout = net2(x)\n",
    "import torch\ny = torch.load('m.pt', map_location='cpu')['net'].to('cpu')(x)\n",
    "from torch.nn import MSELoss as L\nimport torch.nn.functional as F\nl = L(size_average=False)\n"
    "y = F.nll_loss(a, b, reduction='elementwise_' 'mean')\n",
    "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        s = x.sum()\n        s += 1\n        return s\n",
    "batch = zip([1], [2])\ndef first():\n    return batch[0]\nhead = (zip)([1], [2])[0]\ndef f(rows, n=len(map(abs, [1]))):\n"
    "    cols = filter(None, rows)\n    return [c for c in cols], len(cols)\n",
    *TFD009_SKIPS,
]


def _codemod_acts(codemod, text: str) -> bool:
    try:
        out = transform_unfiltered(text, [codemod], filename="x.py", options=RunOptions(unsafe_fixes=True))
    except Exception:
        return True  # a failure must surface the same way with stage 1
    return bool(out.findings) or out.text != text


@pytest.mark.parametrize("text", TRICKY)
def test_condition_holds_wherever_its_codemod_acts_on_tricky_code(text: str) -> None:
    facts = parse_facts(text)
    assert facts is not None
    acting = [c.code for c in all_codemods() if _codemod_acts(c, text)]
    assert acting, "each snippet is there because some codemod acts on it"
    kept = [c.code for c in candidate_codemods(facts, all_codemods())]
    assert set(acting) <= set(kept)
    for unsafe in (False, True):
        assert _outcome(transform_source, text, unsafe) == _outcome(transform_unfiltered, text, unsafe)


@pytest.mark.parametrize("text", TFD009_SKIPS)
def test_variable_wrapper_alone_skips_only_what_it_cannot_touch(text: str) -> None:
    """TFD009 alone (its statements skipped from the first pass on): the same as without stage 1."""
    codemod = [c for c in all_codemods() if c.code == "TFD009"]
    for unsafe in (False, True):
        options = RunOptions(unsafe_fixes=unsafe)
        skipped = transform_source(text, codemod, filename="x.py", options=options)
        assert skipped.text != text
        assert skipped == transform_unfiltered(text, codemod, filename="x.py", options=options)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_condition_holds_wherever_its_codemod_acts_on_fixtures(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    facts = parse_facts(text)
    if facts is None:
        return  # not Python CPython reads: stage 1 sends it on whole
    kept = {c.code for c in candidate_codemods(facts, all_codemods())}
    left_out = [c for c in all_codemods() if c.code not in kept]
    if _none_acts(left_out, text):
        return
    missed = [c.code for c in left_out if _codemod_acts(c, text)]
    assert missed == []


def _none_acts(codemods: list, text: str) -> bool:
    """The codemods stage 1 left out, run together first (one pass over the file, not one per
    codemod): when together they rewrite nothing (no tree a later codemod would get differs from
    the file: ``rewrites`` stays empty) and report nothing, each of them was given the file as it
    is and did nothing with it, which is exactly its run alone. Anything else (a finding, a
    rewrite, an error) sends each to a run of its own, which names the one that acts."""
    if not codemods:
        return True
    rewrites: list[str] = []
    try:
        out = transform_unfiltered(text, codemods, filename="x.py", options=RunOptions(unsafe_fixes=True),
                                   rewrites=rewrites)
    except Exception:
        return False
    return not out.findings and out.text == text and not rewrites


# -- TFD019: only the sites whose value may reach a use that shows a number was meant -----------
# Each snippet: TFD019 reports a site only through the flow named (a method's return through
# `self.best(...)`, a nested function's return into a counter, an aliased `json.dumps`, a dict
# key, `in`, `.data[i]`); stage 1 must keep it, and skip no statement it acts in.
ZERO_DIM_FLOWS = [
    'import torch\nclass A:\n    def best(self, scores):\n        return torch.max(scores, 1)[1][0]\n    def run(self, scores, names):\n        b = self.best(scores)\n        return names[b]\n',
    'import torch\ndef train(loader, model):\n    def batch_correct(x, y):\n        pred = torch.zeros(3)\n        return pred.eq(y).sum()\n    correct = 0\n    for x, y in loader:\n        correct += batch_correct(x, y)\n    print(correct)\n',
    'import torch\nfrom json import dumps as to_json\npred = torch.zeros(3)\nacc = pred.eq(pred).sum()\ns = to_json({"acc": acc})\n',
    'import torch\npred = torch.zeros(3)\ntop = pred.sum()\nseen = {top: 1}\n',
    'import torch\npred = torch.zeros(3)\nseen = {}\nif pred.sum() in seen:\n    pass\n',
    'import torch\npred = torch.zeros(3)\ncounts = {}\ncounts[(pred.sum(), 1)] = 2\n',
    'import torch\nx = torch.zeros(3)\nv = x.data[0]\nprint(v)\n',
]


@pytest.mark.parametrize("text", ZERO_DIM_FLOWS)
def test_zero_dim_sites_follow_the_value_to_a_use_meaning_a_number(text: str) -> None:
    codemod = [c for c in all_codemods() if c.code == "TFD019"]
    options = RunOptions(unsafe_fixes=True)
    unfiltered = transform_unfiltered(text, codemod, filename="x.py", options=options)
    assert [f.code for f in unfiltered.findings] == ["TFD019"]
    facts = parse_facts(text)
    assert facts is not None and [c.code for c in candidate_codemods(facts, codemod)] == ["TFD019"]
    assert transform_source(text, codemod, filename="x.py", options=options) == unfiltered


def test_zero_dim_condition_leaves_out_elements_used_only_as_tensors_or_passed_on() -> None:
    """A file of subscripts and reductions none of whose values reaches a key, JSON, a gym
    action, a counter or a return (most of torch's own sources): TFD019 never sees it."""
    text = (
        "import torch\n\ndef f(x, table):\n    y = x[0]\n    z = y.sum(1)\n    helper(z[1], x.sum())\n"
        "    w = x[0, 1]\n    table[w, 2] = 3\n    print(x.max())\n    s = x.sum()\n    grid[s, 1] = 0\n"
    )
    facts = parse_facts(text)
    codemod = [c for c in all_codemods() if c.code == "TFD019"]
    assert facts is not None and candidate_codemods(facts, codemod) == []
    assert not transform_unfiltered(text, codemod, filename="x.py", options=RunOptions(unsafe_fixes=True)).findings


def test_zero_dim_condition_keeps_what_a_module_function_returns() -> None:
    """Another file of the run may call it and use the value as a key: kept, with no call here."""
    codemod = [c for c in all_codemods() if c.code == "TFD019"]
    for text in ("import torch\n\ndef best(scores):\n    return torch.max(scores, 1)[1][0]\n",
                 "import torch\n\ndef count(x):\n    n = x.sum()\n    return (n, 1)\n"):
        facts = parse_facts(text)
        assert facts is not None and [c.code for c in candidate_codemods(facts, codemod)] == ["TFD019"], text
    nested = "import torch\n\ndef outer(x):\n    def inner(y):\n        return y.sum()\n    return 1\n"
    facts = parse_facts(nested)
    assert facts is not None and candidate_codemods(facts, codemod) == []
