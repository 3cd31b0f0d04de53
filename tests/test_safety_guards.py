"""Safe rewrites around guards and device sources never change what the program does.

Each test rewrites a small program and, where the rewrite is safe, EXECUTES the code before
and after on the CPU and compares what a user observes: the device every model/tensor would be
on (``.cuda()`` and moves to a CUDA device are patched to a recorded move), whether a user flag
such as ``--no-cuda`` is honoured, ``state_dict()`` keys (issue 21, items 1, 2 and 8).
"""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.nn as nn

from torchfix_device.codemods.cuda_call import CudaCall
from torchfix_device.codemods.factory_without_device import FactoryWithoutDevice
from torchfix_device.engine import transform_source

_TENSOR_TO, _MODULE_TO = torch.Tensor.to, nn.Module.to


def _rewrite(source: str, codemod=CudaCall) -> str:
    return transform_source(textwrap.dedent(source), [codemod]).text


class _Moves:
    """Where each object would be: ``cuda`` after a (patched) move to CUDA, else ``cpu``."""

    def __init__(self) -> None:
        self.where: dict[int, str] = {}

    def device_of(self, obj: object) -> str:
        return self.where.get(id(obj), "cpu")

    def patch(self, mp: pytest.MonkeyPatch, cuda_available: bool) -> None:
        """Patch until the end of the test (the latest recorder wins)."""
        where = self.where
        tensor_to, module_to = _TENSOR_TO, _MODULE_TO

        def target(args, kwargs):
            value = kwargs.get("device", args[0] if args else None)
            if isinstance(value, (str, torch.device)):
                return torch.device(value).type
            if isinstance(value, int) and not isinstance(value, bool):
                return "cuda"
            return None

        def fake_cuda(self, *args, **kwargs):
            where[id(self)] = "cuda"
            return self

        def fake_tensor_to(self, *args, **kwargs):
            dev = target(args, kwargs)
            if dev is None:
                return tensor_to(self, *args, **kwargs)
            where[id(self)] = dev
            return self

        def fake_module_to(self, *args, **kwargs):
            dev = target(args, kwargs)
            if dev is None:
                return module_to(self, *args, **kwargs)
            where[id(self)] = dev
            return self

        mp.setattr(torch.cuda, "is_available", lambda: cuda_available)
        mp.setattr(torch.Tensor, "cuda", fake_cuda)
        mp.setattr(nn.Module, "cuda", fake_cuda)
        mp.setattr(torch.Tensor, "to", fake_tensor_to)
        mp.setattr(nn.Module, "to", fake_module_to)


def _run(source: str, monkeypatch, *, cuda_available: bool, **inputs) -> tuple[dict, _Moves]:
    moves = _Moves()
    namespace = {"__name__": "__script__", **inputs}
    moves.patch(monkeypatch, cuda_available)
    exec(compile(source, "<script>", "exec"), namespace)
    return namespace, moves


def _observe(source, monkeypatch, names, *, cuda_available=True, **inputs):
    namespace, moves = _run(source, monkeypatch, cuda_available=cuda_available, **inputs)
    return {n: moves.device_of(namespace[n]) for n in names}


# -- item 1: the user's flag is never dropped ---------------------------------------------------
FLAG_SCRIPT = """\
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args(ARGV)
args.cuda = not args.no_cuda and torch.cuda.is_available()

model = nn.Linear(4, 2)
x = torch.ones(3, 4)
if args.cuda:
    model.cuda()
x = x.cuda() if args.cuda else x
"""


@pytest.mark.parametrize("argv", [[], ["--no-cuda"]])
def test_argparse_flag_guard_keeps_no_cuda_meaning_cpu(monkeypatch, argv) -> None:
    after = _rewrite(FLAG_SCRIPT)
    assert after != FLAG_SCRIPT
    observed_before = _observe(FLAG_SCRIPT, monkeypatch, ["model", "x"], ARGV=argv)
    observed_after = _observe(after, monkeypatch, ["model", "x"], ARGV=argv)
    assert observed_after == observed_before
    expected = "cpu" if argv else "cuda"
    assert observed_before == {"model": expected, "x": expected}


USE_GPU_FUNCTION = """\
import torch

def prepare(model, x, use_gpu):
    if use_gpu:
        model.cuda()
    if use_gpu:
        x = x.cuda()
    return model, x
"""


@pytest.mark.parametrize("flag", [False, True])
def test_plain_flag_argument_guard_is_honoured(monkeypatch, flag) -> None:
    after = _rewrite(USE_GPU_FUNCTION)
    assert ".cuda()" not in after
    results = []
    for source in (USE_GPU_FUNCTION, after):
        namespace, moves = _run(source, monkeypatch, cuda_available=True)
        model, x = namespace["prepare"](nn.Linear(2, 2), torch.ones(2), flag)
        results.append((moves.device_of(model), moves.device_of(x)))
    assert results[0] == results[1] == (("cuda", "cuda") if flag else ("cpu", "cpu"))


IS_CUDA_GUARD = """\
import torch

def anchors(boxes):
    v = torch.ones(4)
    if boxes.is_cuda:
        v = v.cuda()
    return v
"""


class _FakeBoxes:
    def __init__(self, on_cuda: bool) -> None:
        self.is_cuda = on_cuda
        self.device = torch.device("cuda" if on_cuda else "cpu")


def test_is_cuda_guard_takes_the_guarding_tensors_device(monkeypatch) -> None:
    after = _rewrite(IS_CUDA_GUARD)
    assert "v = v.to(boxes.device)" in after
    assert "if boxes.is_cuda" not in after
    for on_cuda in (False, True):
        seen = []
        for source in (IS_CUDA_GUARD, after):
            namespace, moves = _run(source, monkeypatch, cuda_available=True)
            seen.append(moves.device_of(namespace["anchors"](_FakeBoxes(on_cuda))))
        assert seen[0] == seen[1] == ("cuda" if on_cuda else "cpu")


# -- item 2: a guard that does more than move keeps its `if` ------------------------------------
@pytest.mark.parametrize("guard", ["args.multi_gpu", "torch.cuda.is_available()"])
def test_guarded_data_parallel_keeps_its_guard(monkeypatch, guard) -> None:
    source = textwrap.dedent(f"""\
        import torch
        import torch.nn as nn

        model = nn.Linear(2, 2)
        if {guard}:
            model = nn.DataParallel(model).cuda()
        keys = sorted(model.state_dict())
        """)
    after = _rewrite(source)
    assert f"if {guard}:" in after
    for flag in (False, True):
        if flag and "is_available" in guard:
            continue  # DataParallel needs real GPUs when CUDA is reported available
        args = type("Args", (), {"multi_gpu": flag})()
        before_ns, _ = _run(source, monkeypatch, cuda_available=False, args=args)
        after_ns, _ = _run(after, monkeypatch, cuda_available=False, args=args)
        assert before_ns["keys"] == after_ns["keys"]


def test_guard_assigning_another_value_keeps_its_guard() -> None:
    source = "import torch\n\ndef f(x, y):\n    if torch.cuda.is_available():\n        x = y.cuda()\n    return x\n"
    assert "if torch.cuda.is_available():" in _rewrite(source)


# -- item 8: the device never comes from a size, a flag or an integer ---------------------------
SIZE_FORWARD = """\
import torch
import torch.nn as nn

class Hidden(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, batch_size):
        return self.fc(torch.zeros(batch_size, 3))
"""


def test_size_argument_of_forward_is_not_a_device_source(monkeypatch) -> None:
    after = _rewrite(SIZE_FORWARD, FactoryWithoutDevice)
    assert "batch_size.device" not in after
    outputs = []
    for source in (SIZE_FORWARD, after):
        namespace, _ = _run(source, monkeypatch, cuda_available=False)
        torch.manual_seed(0)
        module = namespace["Hidden"]()
        outputs.append(module(2))
    assert torch.equal(outputs[0], outputs[1])


@pytest.mark.parametrize("signature", ["n_items", "num_layers", "dim", "training", "x, steps=3", "count: int"])
def test_size_like_first_arguments_are_not_device_sources(signature) -> None:
    first = signature.split(",")[0].split(":")[0].split("=")[0].strip()
    source = SIZE_FORWARD.replace("forward(self, batch_size)", f"forward(self, {signature})")
    after = _rewrite(source, FactoryWithoutDevice)
    assert f"{first}.device" not in after or first == "x"


def test_used_as_a_size_in_the_body_is_not_a_device_source() -> None:
    source = SIZE_FORWARD.replace("batch_size", "b")
    assert "b.device" not in _rewrite(source, FactoryWithoutDevice)


INT_DEVICE_PARAMETER = """\
import torch

def evaluate(model, x, device=0):
    model = model.cuda()
    return model(x.cuda())
"""


def test_integer_device_parameter_is_not_reused(monkeypatch) -> None:
    after = _rewrite(INT_DEVICE_PARAMETER)
    assert ".to(device)" not in after and ".to(0)" not in after
    seen = []
    for source in (INT_DEVICE_PARAMETER, after):
        namespace, moves = _run(source, monkeypatch, cuda_available=True)
        model = nn.Linear(2, 2)
        x = torch.ones(2)
        namespace["evaluate"](model, x)
        seen.append((moves.device_of(model), moves.device_of(x)))
    assert seen[0] == seen[1] == ("cuda", "cuda")


def test_is_cuda_guard_whose_tensor_is_rebound_keeps_its_guard(monkeypatch) -> None:
    source = "import torch\n\ndef f(boxes, v):\n    if boxes.is_cuda:\n        boxes = boxes.cpu()\n        v = v.cuda()\n    return v\n"
    after = _rewrite(source)
    assert "boxes.device" not in after and "if boxes.is_cuda:" in after
    for on_cuda in (False, True):
        seen = []
        for text in (source, after):
            namespace, moves = _run(text, monkeypatch, cuda_available=True)
            boxes = _FakeBoxes(on_cuda)
            boxes.cpu = lambda: _FakeBoxes(False)
            seen.append(moves.device_of(namespace["f"](boxes, torch.ones(2))))
        assert seen[0] == seen[1]
