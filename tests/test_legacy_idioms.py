"""Checks of the legacy-idiom codemods (TFD009-TFD014) beyond their fixtures."""

from __future__ import annotations

import itertools
import warnings

import pytest

from torchfix_device.codemods.legacy_loss_reduction_args import LegacyLossReductionArgs, legacy_reduction
from torchfix_device.codemods.variable_wrapper import VariableWrapper
from torchfix_device.runner import transform_source

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("size_average, reduce", list(itertools.product([None, True, False], repeat=2)))
def test_reduction_mapping_matches_torch(size_average, reduce) -> None:
    from torch.nn._reduction import legacy_get_string

    ours = legacy_reduction(size_average, reduce)
    if size_average is None and reduce is None:
        assert ours is None  # torch then keeps the given reduction= (it calls legacy_get_string only otherwise)
    else:
        assert ours == legacy_get_string(size_average, reduce, emit_warning=False)


@pytest.mark.parametrize("size_average, reduce", list(itertools.product([None, True, False], repeat=2)))
@pytest.mark.parametrize("given", [None, "sum"])
def test_rewritten_loss_matches_torch(size_average, reduce, given) -> None:
    """The rewritten constructor gives a loss module with the same reduction as the original."""
    args = [f"size_average={size_average}", f"reduce={reduce}"]  # explicit None included
    if given:
        args.append(f'reduction="{given}"')
    source = f"import torch.nn as nn\ncriterion = nn.MSELoss({', '.join(args)})\n"
    rewritten = transform_source(source, [LegacyLossReductionArgs]).text
    assert "size_average" not in rewritten and "reduce=" not in rewritten
    results = []
    for text in (source, rewritten):
        scope: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(text, scope)
        results.append(scope["criterion"].reduction)
    assert results[0] == results[1]


def test_variable_unsafe_unwrap_held_back_by_default() -> None:
    source = "import torch\nfrom torch.autograd import Variable\n\ny = Variable(x).cuda()\nz = Variable(torch.zeros(2))\n"
    output = transform_source(source, [VariableWrapper])
    assert output.text == "import torch\nfrom torch.autograd import Variable\n\ny = Variable(x).cuda()\nz = torch.zeros(2)\n"
    kinds = sorted(f.kind for f in output.findings)
    assert kinds == ["fix", "unsafe-fix"]


def test_variable_rewrites_behave_like_variable() -> None:
    from torch.autograd import Variable

    base = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = Variable(torch.zeros(3), requires_grad=True)
        vol = Variable(base * 2.0, volatile=True)
    new = torch.zeros(3, requires_grad=True)
    assert old.is_leaf and new.is_leaf and old.requires_grad == new.requires_grad
    assert not vol.requires_grad and torch.equal(vol, base * 2.0)
