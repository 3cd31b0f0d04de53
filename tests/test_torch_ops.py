"""The table of torch's operators (``src/torchfix_device/data/torch_ops.txt``, made by
``scripts/generate_torch_ops.py`` from torch's own schemas) and the facts that ask it: a torch
function or a tensor's C method that gives one tensor, and where that tensor is."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from test_value_facts import HEADER, ask

from torchfix_device import torch_api
from torchfix_device.facts import devices, kinds

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "src" / "torchfix_device" / "data" / "torch_ops.txt"


def test_the_committed_table_is_what_the_installed_torch_gives() -> None:
    header = TABLE.read_text(encoding="utf-8").splitlines()[0]
    if header.split()[2].rstrip(":") != torch.__version__.split("+")[0]:
        pytest.skip(f"the table is of another torch ({header})")
    # in a fresh interpreter, as the script runs: TorchScript registers more schemas (`aten::cuda`) once
    # parts of torch this process may have imported are loaded
    checked = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_torch_ops.py"), "--check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_every_listed_function_is_torch_s_own_binding() -> None:
    wrapped = sorted(n for n in torch_api.ONE_TENSOR_FUNCTIONS if getattr(torch, n, None) is not getattr(torch._C._VariableFunctions, n, 0))
    assert len(torch_api.ONE_TENSOR_FUNCTIONS) > 400 and not wrapped


def test_what_the_table_holds_and_leaves_out() -> None:
    assert {"ger", "outer", "clamp", "addmm", "index_select"} <= torch_api.ONE_TENSOR_FUNCTIONS
    assert {"addmm", "clamp", "triu_", "masked_fill_", "index_select"} <= torch_api.ONE_TENSOR_METHODS
    # pairs, lists, numbers and Python wrappers are not one tensor
    assert not {"max", "sort", "topk", "split", "chunk", "unbind", "norm", "unique", "where"} & torch_api.ONE_TENSOR_FUNCTIONS  # `torch.where(c)`: a tuple
    assert not {"item", "size", "dim", "tolist", "numel", "max", "split", "unique", "equal"} & torch_api.ONE_TENSOR_METHODS
    assert {"zeros", "new_zeros", "to", "pin_memory"} <= torch_api.DEVICE_OPERATORS
    assert {"addmm", "ger"}.isdisjoint(torch_api.DEVICE_OPERATORS)


def test_the_engine_reads_the_table_without_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "from torchfix_device import torch_api\n"
            "assert 'ger' in torch_api.ONE_TENSOR_FUNCTIONS\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT / "src")


def test_an_operator_of_tensors_on_the_cpu_is_on_the_cpu() -> None:
    """``torch.ger`` of rows moved with ``.cpu()`` (DrQA's span scores) stays there; a tensor not
    shown on the CPU among the arguments, a keyword ``out=``, or a device-taking operator does not."""
    source = HEADER + textwrap.dedent("""
    def decode(model, x, other):
        s, e = model(x)
        s = s.data.cpu()
        e = e.data.cpu()
        for i in range(s.size(0)):
            scores = torch.ger(s[i], e[i])
            scores.triu_().tril_(3)
            probe(scores); probe(scores.addmm(s, e.t())); probe(torch.outer(s[i], e[i]))
            probe(torch.ger(s[i], other)); probe(scores.addmm(s, other)); probe(torch.ger(s[i], e[i], out=other))
            probe(s.new_zeros(3)); probe(s.new_ones(2, device=other.device)); probe(torch.clamp(s, min=0.0)); probe(torch.index_select(s, dim=0, index=e.long()))
    """)
    assert ask(source, devices.on_cpu) == [True, True, True, False, False, False, True, False, True, True]


def test_an_operator_of_a_tensor_gives_a_tensor() -> None:
    source = HEADER + textwrap.dedent("""
    import torch.nn.functional as F
    def f(a, b):
        x = torch.randn(3)
        probe(torch.ger(x, x)); probe(x.addmm(a, b)); probe(a.addmm(x, x)); probe(torch.sort(x))
        probe(F.max_pool2d(a, 2)); probe(x.item())
    """)
    assert ask(source, kinds.is_tensor) == [True, True, False, False, False, False]
