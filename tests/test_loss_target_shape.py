"""TFD024 (loss-target-shape), executed before and after: an elementwise loss of an input and a
target shown to have different numbers of dimensions. PyTorch 0.3 read both element by element
in order; since 0.4.1 the binary cross entropy losses raise ``ValueError`` and the others
broadcast. The originals also run as 0.3 ran them (``verify.legacy``'s shim), which is what the
rewrite must print."""

from __future__ import annotations

import io
import textwrap
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402
from torchfix_device.options import RunOptions  # noqa: E402
from torchfix_device.verify import legacy  # noqa: E402

TFD024 = [c for c in all_codemods() if c.code == "TFD024"]
FIXTURES = Path(__file__).parent / "fixtures" / "loss_target_shape"


def _rewrite(source: str, unsafe: bool = False):  # noqa: ANN202
    return transform_source(source, TFD024, filename="program.py", options=RunOptions(unsafe_fixes=unsafe))


def _run(source: str, as_03: bool = False) -> dict:
    namespace: dict = {"__name__": "program"}
    out = io.StringIO()
    used = None
    try:
        with redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if as_03:
                used = legacy.install(torch.device("cpu"))
            try:
                exec(compile(source, "program.py", "exec"), namespace)
            finally:
                if as_03:
                    legacy.uninstall()
    except Exception as exc:  # what a user observes
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"printed": out.getvalue(), "namespace": namespace, "shimmed": dict(used or {})}


def test_a_gan_on_labels_of_another_shape_raises_before_and_gives_the_03_losses_after() -> None:
    source = (FIXTURES / "gan_labels.in.py").read_text(encoding="utf-8")
    out = _rewrite(source)
    assert [f.fixed for f in out.findings] == [True, True, True], [f.message for f in out.findings]
    assert out.text == (FIXTURES / "gan_labels.out.py").read_text(encoding="utf-8")
    today, as_03, after = _run(source), _run(source, as_03=True), _run(out.text)
    assert today["raised"] == "ValueError" and "different to the input size" in today["message"], today
    assert as_03["shimmed"] == {legacy.LOSS_TARGET_SHAPE: 3}, as_03
    assert after["printed"] == as_03["printed"] and len(after["printed"].split()) == 3
    assert _run(out.text, as_03=True)["shimmed"] == {}  # the rewrite needs no shim


def test_a_broadcasting_loss_is_an_unsafe_fix_that_gives_the_elementwise_loss() -> None:
    source = (FIXTURES / "broadcasting.unsafe.in.py").read_text(encoding="utf-8")
    safe, unsafe = _rewrite(source), _rewrite(source, unsafe=True)
    assert safe.text == source and [f.held_back for f in safe.findings] == [True]
    assert "(y * 2 + 1).view_as(prediction)" in unsafe.text
    today, after = _run(source), _run(unsafe.text)
    prediction, y = after["namespace"]["prediction"], after["namespace"]["y"]
    elementwise = ((prediction.view(-1) - (y * 2 + 1)) ** 2).mean().item()
    broadcast = ((prediction - (y * 2 + 1)) ** 2).mean().item()  # a (10, 10) difference
    assert after["printed"].strip() == "%.4f" % elementwise
    assert today["printed"].strip() == "%.4f" % broadcast != after["printed"].strip()


def test_shapes_not_shown_to_differ_are_left_alone() -> None:
    source = (FIXTURES / "shapes_not_shown_to_differ.noop.py").read_text(encoding="utf-8")
    out = _rewrite(source, unsafe=True)
    assert out.text == source and out.findings == []


def test_an_input_that_is_a_call_is_reported_not_rewritten() -> None:
    source = textwrap.dedent(
        """
        import torch
        import torch.nn as nn
        D = nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
        criterion = nn.BCELoss()
        loss = criterion(D(torch.randn(4, 3)), torch.ones(4))
        """
    )
    out = _rewrite(source, unsafe=True)
    assert out.text == source and [(f.fixed, f.held_back) for f in out.findings] == [(False, False)]
    assert "bound to a name first" in out.findings[0].message
