"""TFD025 (view-of-elementwise-result), executed before and after: the top-k accuracy of legacy
training scripts views the result of ``eq`` on a transposed tensor. PyTorch 0.3 laid that result
out row by row; 2.x keeps the transposed layout and ``.view`` raises. The rewrite gives the
numbers of the computation on a row-by-row copy (what 0.3 computed), and where ``.view`` works
``reshape`` returns the very same view."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402

TFD025 = [c for c in all_codemods() if c.code == "TFD025"]
FIXTURES = Path(__file__).parent / "fixtures" / "view_of_elementwise_result"


def _functions(source: str) -> dict:
    namespace: dict = {"__name__": "program"}
    exec(compile(source, "program.py", "exec"), namespace)
    return namespace


def test_top_k_accuracy_raises_before_and_gives_the_row_by_row_numbers_after() -> None:
    source = (FIXTURES / "top_k_accuracy.in.py").read_text(encoding="utf-8")
    out = transform_source(source, TFD025, filename="program.py")
    assert [f.fixed for f in out.findings] == [True, True], [f.message for f in out.findings]
    assert out.text == (FIXTURES / "top_k_accuracy.out.py").read_text(encoding="utf-8")
    torch.manual_seed(0)
    output, target = torch.randn(16, 10), torch.randint(0, 10, (16,))
    scores, labels = torch.rand(5, 4), torch.randint(0, 2, (4, 5)).bool()
    before, after = _functions(source), _functions(out.text)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        before["accuracy"](output, target, topk=(1, 5))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        before["hits"](scores, labels)
    # what 0.3 computed: the same code on results laid out row by row
    row_by_row = _functions(source.replace(".expand_as(pred))", ".expand_as(pred)).contiguous()").replace(
        "same = flipped.ge(0.5).eq(labels)", "same = flipped.ge(0.5).eq(labels).contiguous()"))
    got, wanted = after["accuracy"](output, target, topk=(1, 5)), row_by_row["accuracy"](output, target, topk=(1, 5))
    assert [float(g) for g in got] == [float(w) for w in wanted] and 0 < float(got[1]) <= 100
    assert int(after["hits"](scores, labels)) == int(row_by_row["hits"](scores, labels))


def test_where_view_works_reshape_is_the_same_view() -> None:
    x = torch.arange(12.0).reshape(3, 4).eq(5)
    viewed, reshaped = x.view(-1), x.reshape(-1)
    assert reshaped.data_ptr() == viewed.data_ptr() == x.data_ptr() and reshaped._base is x
    reshaped[0] = True  # the same storage: a write shows through
    assert bool(x[0, 0])


PROJECT_LAYER_NORM = '''
import torch
import torch.nn as nn


class LayerNormalization(nn.Module):
    def __init__(self, d_hid, eps=1e-3):
        super(LayerNormalization, self).__init__()
        self.eps = eps
        self.a_2 = nn.Parameter(torch.ones(d_hid))
        self.b_2 = nn.Parameter(torch.zeros(d_hid))

    def forward(self, z):
        mu = torch.mean(z, keepdim=True, dim=-1)
        sigma = torch.std(z, keepdim=True, dim=-1)
        ln_out = (z - mu.expand_as(z)) / (sigma.expand_as(z) + self.eps)
        return ln_out * self.a_2.expand_as(ln_out) + self.b_2.expand_as(ln_out)
'''


def test_a_sum_given_to_a_project_layer_raises_at_a_later_view_before_and_runs_after(monkeypatch) -> None:
    """attention-is-all-you-need: the feed-forward sublayer's output reaches a `.view` two modules
    later (its `Bottle` projection). Before: that view raises; after: the same numbers as the
    computation on row-by-row results (what 0.3 computed), in training mode and in evaluation."""
    import sys
    import types

    modules = types.ModuleType("modules")
    exec(compile(PROJECT_LAYER_NORM, "modules.py", "exec"), modules.__dict__)
    monkeypatch.setitem(sys.modules, "modules", modules)
    source = (FIXTURES / "leaves_the_function.in.py").read_text(encoding="utf-8")
    out = transform_source(source, TFD025, filename="program.py")
    assert [f.fixed for f in out.findings] == [True, True, True], [f.message for f in out.findings]
    assert out.text == (FIXTURES / "leaves_the_function.out.py").read_text(encoding="utf-8")
    before, after = _functions(source), _functions(out.text)
    row_by_row = _functions(source.replace("output + residual", "(output + residual).contiguous()"))
    x = torch.randn(2, 5, 8)

    def flattened(namespace: dict, train: bool) -> torch.Tensor:
        torch.manual_seed(0)
        layer = namespace["PositionwiseFeedForward"](8, 16).train(train)
        torch.manual_seed(1)
        y = layer(x)
        return y.view(y.size(0) * y.size(1), -1)  # what the Bottle projection does with it

    for train in (True, False):
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            flattened(before, train)
        assert torch.equal(flattened(after, train), flattened(row_by_row, train))
    got = after["scaled"](x)
    assert got.is_contiguous() and torch.equal(got, -x.permute(0, 2, 1)) and not before["scaled"](x).is_contiguous()
