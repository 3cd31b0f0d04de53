"""TFD001 on a module's own device test (InferSent's ``self.is_cuda()``, ``'cuda' in
str(type(<a weight>))``), executed on the stand-in device: the fixture's encoder, moved to
``meta`` with its input, fails before the rewrite with the error CUDA raises (the test is false on
torch 2.x, so ``idx_sort`` stays on the CPU) and runs after it; on the CPU both give the same."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402
from torchfix_device.verify.checker import DeviceChecker, is_device_error  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_call" / "module_device_test"
TFD001 = [c for c in all_codemods() if c.code == "TFD001"]


def _classes(source: str) -> dict:
    """The fixture's module up to its own runner lines: its classes, defined in a namespace."""
    namespace: dict = {"__name__": "fixture"}
    exec(compile(source.split("\nlengths = ")[0], "fixture.py", "exec"), namespace)
    return namespace


def _encode(namespace: dict, device: str):  # noqa: ANN202
    torch.manual_seed(0)
    encoder = namespace["Encoder"]().to(device)
    sent = torch.randn(4, 3, 4).to(device)
    lengths = np.array([2, 4, 3])
    if device == "meta":
        with DeviceChecker():
            return encoder(sent, lengths)
    return encoder(sent, lengths)


def test_the_module_device_test_fails_on_the_device_before_and_runs_after() -> None:
    source = FIXTURE.with_suffix(".in.py").read_text(encoding="utf-8")
    out = transform_source(source, TFD001, filename="fixture.py")
    assert out.text == FIXTURE.with_suffix(".out.py").read_text(encoding="utf-8")
    before, after = _classes(source), _classes(out.text)
    with pytest.raises(Exception) as raised:
        _encode(before, "meta")
    assert is_device_error(str(raised.value)), raised.value
    assert _encode(after, "meta").shape == (4, 3, 8)
    assert torch.equal(_encode(before, "cpu"), _encode(after, "cpu"))
