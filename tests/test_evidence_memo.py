"""TFD009's evidence proofs are remembered (``codemods/_proof_memo.py``): an attribute built from
other attributes of the same class, each read several times, was proved again at every read.
faster-rcnn's ``gridgen.py`` (414 lines: ``self.x``/``self.y``/``self.z`` from ``self.theta``
and ``self.phi``, read over and over) hit the 120 s per-file limit and was left unmigrated. The
work now grows with the number of attributes, not with the number of paths through them; the
answers are the same, including where one value in the chain may require grad."""

from __future__ import annotations

import pytest

from torchfix_device.facts import grad as _grad_evidence
from torchfix_device.codemods.variable_wrapper import VariableWrapper
from torchfix_device.engine import transform_source

torch = pytest.importorskip("torch")


def _chain(depth: int, first: str = "torch.from_numpy(np.zeros([height, width], dtype=np.float32))") -> str:
    """``self.a<k>`` from ``self.a<k-1>`` (read twice) and ``self.a<k-2>``: 3 reads per level."""
    lines = [
        "import numpy as np", "import torch", "from torch.autograd import Variable", "from torch.nn import Module", "", "",
        "class Sphere(Module):", "    def __init__(self, height, width):", "        super(Sphere, self).__init__()",
        f"        self.a0 = {first}", "        self.a1 = torch.sin(self.a0) * torch.cos(self.a0)",
    ]
    lines += [f"        self.a{k} = torch.sin(self.a{k - 1}) * torch.cos(self.a{k - 1}) + self.a{k - 2}" for k in range(2, depth + 1)]
    lines += ["", "    def forward(self, x):", f"        grid = Variable(self.a{depth})", "        return grid + x", ""]
    return "\n".join(lines)


@pytest.fixture
def count_questions(monkeypatch):
    asked = [0]
    missing = _grad_evidence.GradEvidence.missing

    def counting(self, expr):
        asked[0] += 1
        return missing(self, expr)

    monkeypatch.setattr(_grad_evidence.GradEvidence, "missing", counting)
    return asked


def test_a_chain_of_attributes_is_proved_once_per_attribute(count_questions) -> None:
    asked = []
    for depth in (6, 12):
        count_questions[0] = 0
        result = transform_source(_chain(depth), [VariableWrapper])
        [finding] = result.findings
        assert finding.fixed, finding.message  # every value in the chain is grad-free: a safe fix
        assert "Variable(" not in result.text.split("def forward")[1]
        asked.append(count_questions[0])
    # linear: doubling the chain doubles the work (without memory: 3^depth, 171,362 questions
    # and three minutes at depth 12)
    assert asked[1] <= 2.5 * asked[0] and asked[1] < 20 * 12, asked


def test_one_value_that_may_require_grad_still_decides(count_questions) -> None:
    """The bottom of the chain is a Parameter: every attribute built from it may require grad,
    and the unwrap stays unsafe, as before the memory: the safe fix keeps `Variable`'s detach."""
    source = _chain(12, first="torch.nn.Parameter(torch.zeros(height, width))")
    result = transform_source(source, [VariableWrapper])
    [finding] = result.findings
    assert finding.fixed and "which is what `Variable` did" in finding.message and "requires grad" in finding.message
    assert "Variable(" not in result.text and ".detach()" in result.text
    assert count_questions[0] < 20 * 12


def test_the_remembered_proofs_give_the_program_its_old_results() -> None:
    """Before and after the safe unwrap, the module computes the same values, without grad."""
    source = _chain(6)
    after = transform_source(source, [VariableWrapper]).text
    results = []
    for text in (source, after):
        namespace: dict = {}
        exec(compile(text, "<chain>", "exec"), namespace)
        out = namespace["Sphere"](2, 3)(torch.ones(2, 3))
        results.append(out)
    assert torch.equal(results[0], results[1]) and not results[1].requires_grad
