"""TFD026 (integer-arange-as-float), executed before and after: 0.3's ``torch.arange`` of integers
made a float tensor, and tutorials then made it require grad, filled a layer's weight with it,
multiplied it with a float matrix or fed it to a layer. On 2.x each use raises on the int64
tensor; after the rewrite the program runs and computes what 0.3 computed (the same float values)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402

TFD026 = [c for c in all_codemods() if c.code == "TFD026"]
FIXTURES = Path(__file__).parent / "fixtures" / "integer_arange"

STATEMENTS = [
    ("x = t.arange(-2, 4, requires_grad=True)\ny = (x * x).sum()\ny.backward()\nresult = x.grad",
     "Only Tensors of floating point"),
    ("from torch.autograd import Variable as V\nx = V(t.arange(0, 3), requires_grad=True)\n(x ** 2).sum().backward()\nresult = x.grad",
     "floating point"),
    ("e = nn.Embedding(4, 5)\ne.weight.data = t.arange(0, 20).view(4, 5)\nresult = e(t.tensor([1, 3]))",
     "must be floating point"),
    ("w = t.ones(1, 1, requires_grad=True)\nx = t.arange(0, 5).view(-1, 1)\nresult = x.mm(w.data) + 1",
     "same dtype"),
    ("layer = nn.Linear(4, 2)\nlayer.weight.data.fill_(0.5)\nlayer.bias.data.zero_()\nresult = layer(t.arange(0, 8).view(2, 4))",
     "same dtype"),
]


@pytest.mark.parametrize("body, error", STATEMENTS)
def test_each_use_raises_before_and_gives_0_3s_float_values_after(body: str, error: str) -> None:
    source = "import torch as t\nimport torch.nn as nn\n" + body + "\n"
    out = transform_source(source, TFD026, filename="program.py")
    assert len(out.findings) == 1 and out.findings[0].fixed, [f.message for f in out.findings]
    assert "dtype=t.float" in out.text
    with pytest.raises(RuntimeError, match=error):
        exec(compile(source, "program.py", "exec"), {})
    namespace: dict = {}
    torch.manual_seed(0)
    exec(compile(out.text, "program.py", "exec"), namespace)
    # what 0.3 computed: the same program on a float arange (0.3's default type)
    expected: dict = {}
    torch.manual_seed(0)
    exec(compile(_float_ranges(source), "program.py", "exec"), expected)
    assert namespace["result"].dtype == torch.float32
    assert torch.equal(namespace["result"], expected["result"])


def _float_ranges(source: str) -> str:
    """The program with each ``t.arange(a, b)`` spelt ``t.arange(float(a), b)``: a float tensor."""
    return re.sub(r"t\.arange\((-?\d+)", r"t.arange(float(\1)", source)


def test_the_fixture_runs_after_and_its_values_are_the_float_ranges() -> None:
    source = (FIXTURES / "float_uses.in.py").read_text(encoding="utf-8")
    out = transform_source(source, TFD026, filename="program.py")
    assert out.text == (FIXTURES / "float_uses.out.py").read_text(encoding="utf-8")
    before: dict = {"__name__": "program"}
    exec(compile(source, "program.py", "exec"), before)
    for tour in ("autograd_tour", "layers_tour"):
        with pytest.raises(RuntimeError):
            before[tour]()
    after: dict = {"__name__": "program"}
    exec(compile(out.text, "program.py", "exec"), after)
    x, y, p = after["autograd_tour"]()
    assert torch.equal(x.detach(), torch.arange(-2.0, 4.0)) and x.requires_grad and p.dtype == torch.float32
    embedding, y, out_, grid = after["layers_tour"]()
    assert torch.equal(embedding.weight.data.view(-1), torch.arange(0.0, 20.0))
    assert y.shape == (20, 1) and out_.shape == (2, 2) and grid.dtype == torch.float32


def test_integer_uses_are_left() -> None:
    source = (FIXTURES / "integers_meant.noop.py").read_text(encoding="utf-8")
    out = transform_source(source, TFD026, filename="program.py")
    assert out.findings == [] and out.text == source
