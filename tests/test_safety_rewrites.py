"""Issue 21 items 6 and 7: rewrites (and refusals) of TFD005, TFD015 and TFD006, executed.

Each test runs a small legacy program before and after the codemod on CPU with torch and
compares what a user observes: the value it computes, or the type of the exception it raises.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchfix_device.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402

CODEMODS = {c.code: c for c in all_codemods()}


def _rewrite(source: str, *codes: str, unsafe: bool = False):
    return transform_source(source, [CODEMODS[c] for c in codes], unsafe_fixes=unsafe, filename="x.py")


def _observe(source: str, **env):
    """What running ``source`` shows a user: ``("value", result)`` or ``("raised", ExcType)``."""
    namespace = {"__name__": "program", **env}
    try:
        exec(compile(source, "program.py", "exec"), namespace)
    except Exception as exc:  # the exception type is what a user observes
        return ("raised", type(exc).__name__)
    return ("value", namespace.get("result"))


def _same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    x, y = a[1], b[1]
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return x.device == y.device and x.shape == y.shape and bool(torch.equal(x, y))
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(("value", p), ("value", q)) for p, q in zip(x, y))
    return x == y


# -- item 6: torch.load calls that already choose a location or forward arguments -------------
FORWARDING = textwrap.dedent(
    """
    import torch


    def load(*a, **k):
        return torch.load(*a, **k)


    def load_args(*args):
        return torch.load(*args)


    def load_at(path, location):
        return torch.load(path, location)


    result = [
        load(PATH, map_location="cpu"),
        load_args(PATH, "cpu"),
        load_at(PATH, lambda storage, loc: storage),
        torch.load(PATH, "cpu"),
        torch.load(PATH, lambda storage, loc: storage),
        torch.load(*[PATH, "cpu"]),
    ]
    """
)


@pytest.mark.parametrize("code", ["TFD005", "TFD015"])
def test_load_with_forwarded_or_positional_location_is_left_alone(code: str, tmp_path: Path) -> None:
    path = tmp_path / "t.pt"
    torch.save(torch.arange(3.0), path)
    out = _rewrite(FORWARDING, code, unsafe=True)
    assert out.text == FORWARDING
    before = _observe(FORWARDING, PATH=str(path))
    assert before[0] == "value" and len(before[1]) == 6
    assert _same(before, _observe(out.text, PATH=str(path)))


def test_adding_map_location_to_a_forwarding_wrapper_would_raise(tmp_path: Path) -> None:
    """Why the trap matters: the keyword added blindly collides with the forwarded one."""
    path = tmp_path / "t.pt"
    torch.save(torch.arange(3.0), path)
    naive = FORWARDING.replace("torch.load(*a, **k)", 'torch.load(*a, **k, map_location="cpu")')
    assert _observe(naive, PATH=str(path)) == ("raised", "TypeError")


def test_load_without_location_still_gets_one(tmp_path: Path) -> None:
    """The safe fix itself, executed: the same values, on a device this machine has."""
    path = tmp_path / "t.pt"
    torch.save(torch.arange(3.0), path)
    source = "import torch\nresult = torch.load(PATH)\n"
    out = _rewrite(source, "TFD005")
    assert "map_location=" in out.text
    assert _same(_observe(source, PATH=str(path)), _observe(out.text, PATH=str(path)))
