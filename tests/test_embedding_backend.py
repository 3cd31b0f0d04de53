"""TFD027 (embedding-backend-apply), executed before and after: AWD-LSTM's ``embedded_dropout``
calls the THNN backend's ``Embedding.apply``, gone since PyTorch 1.0. After the rewrite it runs
and computes the 0.3 lookup: the rows of the (masked) weight, the gradient reaching every row
looked up (the old backend's ``-1`` meant no padding index: ``F.embedding``'s ``-1`` would have
been the last row), and a real padding index keeps its row without gradient."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402

TFD027 = [c for c in all_codemods() if c.code == "TFD027"]
FIXTURES = Path(__file__).parent / "fixtures" / "embedding_backend"


def _functions(source: str) -> dict:
    namespace: dict = {"__name__": "program"}
    exec(compile(source, "program.py", "exec"), namespace)
    return namespace


def test_embedded_dropout_raises_before_and_computes_the_lookup_after() -> None:
    source = (FIXTURES / "embedded_dropout.in.py").read_text(encoding="utf-8")
    out = transform_source(source, TFD027, filename="program.py")
    assert out.text == (FIXTURES / "embedded_dropout.out.py").read_text(encoding="utf-8")
    assert [f.fixed for f in out.findings] == [True, True, True]
    before, after = _functions(source), _functions(out.text)
    embed = torch.nn.Embedding(5, 3)
    words = torch.tensor([[0, 4], [4, 2]])
    with pytest.raises(AttributeError, match="_backend"):
        before["embedded_dropout"](embed, words)
    # without dropout: exactly the rows looked up; the last row (index 4) gets its gradient
    looked_up = after["embedded_dropout"](embed, words, dropout=0)
    assert torch.equal(looked_up, embed.weight[words])
    looked_up.sum().backward()
    assert embed.weight.grad[4].tolist() == [2.0, 2.0, 2.0] and embed.weight.grad[1].tolist() == [0.0, 0.0, 0.0]
    torch.manual_seed(0)
    dropped = after["embedded_dropout"](embed, words, dropout=0.5)
    assert dropped.shape == (2, 2, 3)
    # each row is the weight's row scaled by 0 or 2 (the same mask for every use of a word)
    ratio = dropped.detach() / embed.weight.detach()[words]
    assert set(torch.round(ratio).unique().tolist()) <= {0.0, 2.0}


def test_a_real_padding_index_keeps_its_row_without_gradient() -> None:
    after = _functions((FIXTURES / "embedded_dropout.out.py").read_text(encoding="utf-8"))
    embed = torch.nn.Embedding(4, 2)
    words = torch.tensor([0, 1, 0])
    after["padded"](embed, words).sum().backward()
    assert embed.weight.grad[0].tolist() == [0.0, 0.0] and embed.weight.grad[1].tolist() == [1.0, 1.0]
    embed.weight.grad = None
    after["first_rows"](embed, words).sum().backward()
    assert embed.weight.grad[0].tolist() == [2.0, 2.0]


def test_other_backends_are_left() -> None:
    source = (FIXTURES / "other_backends.noop.py").read_text(encoding="utf-8")
    out = transform_source(source, TFD027, filename="program.py")
    assert out.text == source and [f.fixed for f in out.findings] == [False]
