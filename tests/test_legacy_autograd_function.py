"""TFD017's safe rewrites, executed on this torch (2.13): each ``.in.py`` fixture of
``tests/fixtures/legacy_autograd_function/`` raises the legacy-Function ``RuntimeError``; its
``.out.py`` runs and gives the forward values and the gradients of a hand-written reference
(the same computation with plain autograd ops), and the values and gradients the original gives
under PyTorch 0.3-1.2 semantics (``verify.legacy``'s shim: one object both instance and
context). Then the same across the files of a run, through the command line: a class in one
file, called in two others, is migrated with all its calls, or, when one use cannot become
``apply``, reported everywhere and left as it is.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli, run_script

torch = pytest.importorskip("torch")

from torchfix_device.verify import legacy  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")  # torch's, on F()

FIXTURES = Path(__file__).parent / "fixtures" / "legacy_autograd_function"
LEGACY_ERROR = "Legacy autograd function with non-static forward method is deprecated"


def _exec(path: Path) -> dict:
    namespace: dict = {"__name__": f"fixture_{path.name.replace('.', '_')}"}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace


def _under_legacy_semantics(path: Path) -> dict:
    """The original as PyTorch 0.3-1.2 ran it."""
    used = legacy.install(torch.device("cpu"))
    try:
        namespace = _exec(path)
    finally:
        legacy.uninstall()
    assert used[legacy.LEGACY_FUNCTION] >= 1  # the shim did run the legacy calls
    return namespace


def _same(a, b) -> None:
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert torch.allclose(a.detach(), b.detach(), atol=1e-6), (a, b)


# -- hand-written references: the same computations with plain autograd ops ---------------------
def _leaf(t):
    return t.detach().clone().requires_grad_(True)


def _relu(ns: dict) -> dict:
    x = _leaf(ns["x"])
    y = x.clamp(min=0)
    y.sum().backward()
    return {"y": y, "grad": x.grad}


def _scaled_topk(ns: dict) -> dict:
    x, weight = _leaf(ns["x"]), _leaf(ns["weight"])
    values, indices = x.topk(2)
    scaled = values * weight
    (scaled * torch.tensor([1.0, 3.0])).sum().backward()
    return {"values": scaled, "grad_x": x.grad, "grad_weight": weight.grad, "indices": indices}


def _gradient_reversal(ns: dict) -> dict:
    features = _leaf(ns["features"])
    loss = torch.nn.functional.log_softmax(ns["model"].fc(features), dim=1)[:, 0].sum()
    loss.backward()
    return {"loss": loss, "grad": -features.grad}  # the layer reverses the gradient


def _add_one(ns: dict) -> dict:
    x = _leaf(ns["x"])
    y = x * 2 + 1
    (y * y).sum().backward()
    return {"y": y, "grad": x.grad}


def _cube(ns: dict) -> dict:
    x = _leaf(ns["x"])
    y = x * x * x
    y.sum().backward()
    return {"y": y, "grad": x.grad}


def _stateful(ns: dict) -> dict:
    x, weight = _leaf(ns["x"]), _leaf(torch.ones(4))
    out = ((x * 2.0 + 1.0) * weight).view(-1, 2).sum(1)
    out.sum().backward()
    return {"out": out, "grad_x": x.grad, "grad_weight": weight.grad}


def _reversed_half(ns: dict) -> dict:
    x = _leaf(ns["x"])
    y = x.view_as(x)
    return {"y": y, "grad": torch.full_like(x, -0.5)}  # the gradient of a sum, reversed and halved


def _signs(ns: dict) -> dict:
    x = _leaf(ns["x"])
    return {"y": x.sign().sign(), "grad": torch.ones_like(x), "signs": x.sign()}  # straight through


def _scale_shift(ns: dict) -> dict:
    x = _leaf(ns["x"])
    plain, shifted = x * 2.0, x * 3.0 + 0.5
    (plain.sum() + shifted.sum()).backward()
    return {"plain": plain, "shifted": shifted, "grad": x.grad}


def _space_to_depth(ns: dict) -> dict:
    x = _leaf(ns["x"])
    b, c, h, w = x.size()
    y = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 3, 5, 1, 2, 4).reshape(b, c * 4, h // 2, w // 2)
    (y * torch.arange(32.0).view(1, 8, 2, 2)).sum().backward()  # autograd's own gradient
    return {"y": y, "grad": x.grad}


def _kept_shift(ns: dict) -> dict:
    x = _leaf(ns["x"])
    y = x * 3.0 + 0.5
    (y * torch.arange(6.0).view(2, 3)).sum().backward()
    return {"y": y, "grad": x.grad, "shifted": torch.full((2,), 5.0)}


REFERENCES = {
    "state_kept_on_instance": _kept_shift,
    "state_read_into_a_local": _space_to_depth,
    "state_before_defaults": _scale_shift,
    "stateful": _stateful,
    "state_from_init": _reversed_half,
    "instance_kept": _signs,
    "relu": _relu,
    "state_between_methods": _scaled_topk,
    "gradient_reversal": _gradient_reversal,
    "inplace_mark_dirty": _add_one,
    "ctx_name_taken": _cube,
}


def test_every_rewrite_has_a_reference() -> None:
    stems = {p.name[: -len(".in.py")] for p in FIXTURES.glob("*.in.py")}
    assert stems == set(REFERENCES)


@pytest.mark.parametrize("stem", sorted(REFERENCES))
def test_the_rewrite_computes_what_the_legacy_function_did(stem: str) -> None:
    original, rewrite = FIXTURES / f"{stem}.in.py", FIXTURES / f"{stem}.out.py"
    with pytest.raises(RuntimeError, match=LEGACY_ERROR):
        _exec(original)  # what a user meets on torch >= 1.3
    after = _exec(rewrite)
    before = _under_legacy_semantics(original)
    expected = REFERENCES[stem](after)
    compared = 0
    for name, value in expected.items():
        _same(after[name], value)
        _same(before[name], value)
        compared += 1
    assert compared >= 2  # forward values and gradients


# -- across the files of a run --------------------------------------------------------------------
FUNCTIONS = '''
    import torch


    class Square(torch.autograd.Function):
        def forward(self, x):
            self.save_for_backward(x)
            return x * x

        def backward(self, grad_output):
            x, = self.saved_tensors
            return 2 * x * grad_output
'''
TRAIN = '''
    import torch

    from ops.functions import Square
    import ops.functions as fns

    x = torch.arange(1.0, 4.0, requires_grad=True)
    y = Square()(x) + fns.Square()(x)
    y.sum().backward()
    print(y.tolist(), x.grad.tolist())
'''


def _project(tmp_path: Path, extra: str = "") -> Path:
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "__init__.py").write_text("", encoding="utf-8")
    (root / "ops" / "functions.py").write_text(textwrap.dedent(FUNCTIONS).lstrip(), encoding="utf-8")
    (root / "train.py").write_text(textwrap.dedent(TRAIN).lstrip() + extra, encoding="utf-8")
    return root


def _run(root: Path) -> subprocess.CompletedProcess:
    return run_script("train.py", cwd=root)


def test_a_class_and_its_calls_in_other_files_are_migrated_together(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = _run(root)
    assert before.returncode != 0 and LEGACY_ERROR in before.stderr
    done = run_cli("apply", "--select", "TFD017", "--no-cache", ".", cwd=root)
    assert done.returncode == 0, done.stderr.decode()
    assert "@staticmethod\n    def forward(ctx, x):" in (root / "ops" / "functions.py").read_text()
    train = (root / "train.py").read_text()
    assert "Square.apply(x) + fns.Square.apply(x)" in train
    after = _run(root)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "[2.0, 8.0, 18.0] [4.0, 8.0, 12.0]"  # 2 x², and its gradient 4 x
    assert run_cli("apply", "--diff", "--no-cache", ".", cwd=root).stdout == b""  # nothing left


def test_a_use_in_another_file_that_apply_cannot_replace_keeps_every_file_as_it_is(tmp_path: Path) -> None:
    root = _project(tmp_path, extra="square = Square()\n")
    files = {p: p.read_bytes() for p in root.rglob("*.py")}
    done = run_cli("check", "--select", "TFD017", "--no-cache", ".", cwd=root)
    out = done.stdout.decode()
    assert done.returncode == 1
    assert "ops/functions.py:4:1: TFD017 `Square` is a legacy autograd Function" in out
    assert "used at train.py:10, where an instance of `Square` is kept, and used otherwise than called" in out
    assert out.count("[manual review]") == 3  # the class and both calls, each told
    assert run_cli("apply", "--select", "TFD017", "--no-cache", ".", cwd=root).returncode == 0
    assert {p: p.read_bytes() for p in root.rglob("*.py")} == files


# -- state from __init__, across files -------------------------------------------------------------
STATEFUL = '''
    import torch


    class Scale(torch.autograd.Function):
        def __init__(self, factor, shift=0.0):
            self.factor = float(factor)
            self.shift = shift

        def forward(self, x):
            self.save_for_backward(x)
            return x * x * self.factor + self.shift

        def backward(self, grad_output):
            x, = self.saved_tensors
            return 2 * x * grad_output * self.factor
'''
MODEL = '''
    import torch
    import torch.nn as nn

    from ops.functions import Scale


    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.scale = Scale(2.0, shift=1.0)

        def forward(self, x):
            return self.scale(x) + Scale(3)(x)


    x = torch.arange(1.0, 4.0, requires_grad=True)
    y = Net()(x)
    y.sum().backward()
    print(y.tolist(), x.grad.tolist())
'''


def test_state_from_init_moves_into_forward_in_every_file(tmp_path: Path) -> None:
    """``Scale(2.0, shift=1.0)`` kept on a module of another file becomes a partial of ``apply``
    with its state, ``Scale(3)(x)`` becomes ``Scale.apply(3, 0.0, x)`` (the default filled in);
    the script runs and gives 5 x² + 1 and its gradient 10 x."""
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "__init__.py").write_text("", encoding="utf-8")
    (root / "ops" / "functions.py").write_text(textwrap.dedent(STATEFUL).lstrip(), encoding="utf-8")
    (root / "train.py").write_text(textwrap.dedent(MODEL).lstrip(), encoding="utf-8")
    before = _run(root)
    assert before.returncode != 0 and LEGACY_ERROR in before.stderr
    assert run_cli("apply", "--select", "TFD017", "--no-cache", ".", cwd=root).returncode == 0
    functions = (root / "ops" / "functions.py").read_text()
    assert "    def forward(ctx, factor, shift, x):\n        ctx.factor = float(factor)\n        ctx.shift = shift\n" in functions
    assert "return None, None, 2 * x * grad_output * ctx.factor" in functions and "__init__" not in functions
    train = (root / "train.py").read_text()
    assert "self.scale = functools.partial(Scale.apply, 2.0, 1.0)" in train and "Scale.apply(3, 0.0, x)" in train
    after = _run(root)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "[6.0, 21.0, 46.0] [10.0, 20.0, 30.0]"
    assert run_cli("apply", "--diff", "--no-cache", ".", cwd=root).stdout == b""  # nothing left


def test_one_run_over_two_projects_with_a_class_of_the_same_name_writes_what_two_runs_write(tmp_path: Path) -> None:
    """Two projects each define their own ``RoIPool`` (copied code, as detection repos do): a
    class concerns only the files that can reach it by import, so one run over both folders
    migrates each, as a run per project does."""
    for name in ("a", "b"):
        project = tmp_path / "both" / name
        (project / "ops").mkdir(parents=True)
        (project / "ops" / "__init__.py").write_text("", encoding="utf-8")
        (project / "ops" / "functions.py").write_text(textwrap.dedent(STATEFUL).lstrip().replace("Scale", "RoIPool"), encoding="utf-8")
        (project / "train.py").write_text(textwrap.dedent(MODEL).lstrip().replace("Scale", "RoIPool"), encoding="utf-8")
    import shutil

    shutil.copytree(tmp_path / "both", tmp_path / "apart")
    assert run_cli("apply", "--no-cache", ".", cwd=tmp_path / "both").returncode == 0
    for name in ("a", "b"):
        assert run_cli("apply", "--no-cache", ".", cwd=tmp_path / "apart" / name).returncode == 0
    both = {p.relative_to(tmp_path / "both"): p.read_bytes() for p in (tmp_path / "both").rglob("*.py")}
    apart = {p.relative_to(tmp_path / "apart"): p.read_bytes() for p in (tmp_path / "apart").rglob("*.py")}
    assert both == apart
    assert b"RoIPool.apply(3, 0.0, x)" in both[Path("a/train.py")]
    after = run_script("train.py", cwd=tmp_path / "both" / "b")
    assert after.returncode == 0 and after.stdout.strip() == "[6.0, 21.0, 46.0] [10.0, 20.0, 30.0]", after.stderr


# -- instances that keep their own state, across files ---------------------------------------------
KEPT_ROI = '''import torch
import torch.nn as nn
from torch.autograd import Function


class RoI(Function):
    def __init__(self, scale):
        self.scale = torch.tensor(float(scale))  # built here: it cannot move into `forward`

    def forward(self, x):
        self.size = x.size()
        return x * self.scale

    def backward(self, grad_output):
        return grad_output.view(self.size) * self.scale


class Pool(nn.Module):
    def __init__(self, scale):
        super(Pool, self).__init__()
        self.RoI = RoI(scale)  # the attribute spelt as the class

    def forward(self, x):
        return self.RoI(x)
'''

KEPT_NOTEBOOK = '''{"cells": [
 {"cell_type": "markdown", "metadata": {}, "source": ["The RoI layer of the model, pooled."]},
 {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [{"name": "stdout", "output_type": "stream", "text": ["RoI\\\\n"]}],
  "source": ["print('pooled')"]}
 ],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
  "language_info": {"name": "python"}},
 "nbformat": 4, "nbformat_minor": 2}
'''


def test_instances_that_keep_their_state_stay_and_a_notebook_spelling_the_name_elsewhere_blocks_nothing(tmp_path: Path) -> None:
    (tmp_path / "roi.py").write_text(KEPT_ROI, encoding="utf-8")
    (tmp_path / "main.py").write_text(
        "import torch\n\nfrom roi import Pool, RoI\n\nx = torch.ones(3, requires_grad=True)\ny = Pool(2.0)(x) + RoI(1.0)(x)\n"
        "y.sum().backward()\nprint(y.tolist(), x.grad.tolist())\n", encoding="utf-8")
    (tmp_path / "demo.ipynb").write_text(KEPT_NOTEBOOK, encoding="utf-8")
    before = run_script("main.py", cwd=tmp_path)
    assert before.returncode != 0 and LEGACY_ERROR in before.stderr
    main = (tmp_path / "main.py").read_bytes()
    assert run_cli("apply", "--select", "TFD017", "--no-cache", ".", cwd=tmp_path).returncode == 0
    roi = (tmp_path / "roi.py").read_text(encoding="utf-8")
    assert "    def __call__(self, *args):\n        return RoI.apply(self, *args)\n" in roi
    assert "def forward(ctx, instance, x):\n        ctx.__dict__.update(vars(instance))" in roi
    assert "return None, grad_output.view(ctx.size) * ctx.scale" in roi and "self.RoI = RoI(scale)" in roi
    assert (tmp_path / "main.py").read_bytes() == main  # the calls stay as they were
    after = run_script("main.py", cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "[3.0, 3.0, 3.0] [3.0, 3.0, 3.0]"
    assert run_cli("apply", "--diff", "--no-cache", ".", cwd=tmp_path).stdout == b""  # a second run changes nothing


def test_a_notebook_whose_code_spells_the_class_still_blocks_it(tmp_path: Path) -> None:
    (tmp_path / "roi.py").write_text(KEPT_ROI, encoding="utf-8")
    (tmp_path / "demo.ipynb").write_text(KEPT_NOTEBOOK.replace("print('pooled')", "from roi import RoI\\n\", \"print(RoI(1.0).scale)"), encoding="utf-8")
    out = run_cli("check", "--select", "TFD017", "--no-cache", ".", cwd=tmp_path).stdout.decode()
    assert "where a notebook spells it" in out and "[manual review]" in out
