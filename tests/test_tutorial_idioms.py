"""0.3 tutorial idioms that stop a notebook on 2.x, executed before and after ``apply``: an item
of a 1-dim tensor passed to a function of the script (``for ii in x: if ii.data[0] > 0``), an
``arange`` of integers made to require grad, a ``squeeze()[0]`` of a (1, 1) tensor, and a whole
model saved and loaded back at once. Imported by another file, the function's parameter is not
shown 1-dim (another file may pass anything): its ``.data[0]`` is left for review."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import run_cli, run_script

pytest.importorskip("torch")

TOUR = '''import torch as t
import torch.nn as nn
from torch.autograd import Variable as V


def f(x):
    return x ** 2


x = V(t.randn(3, 4), requires_grad=True)
y = f(x)


def f(x):
    result = 1
    for ii in x:
        if ii.data[0] > 0:
            result = ii * result
    return result


x = V(t.arange(-2, 4), requires_grad=True)
y = f(x)
y.backward()
print("grad", x.grad.tolist())
w = V(t.rand(1, 1), requires_grad=True)
print("w", round(w.data.squeeze()[0], 6) == round(float(w.data), 6))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)


net = Net()
t.save(net, "net_all.pth")
net2 = t.load("net_all.pth")
print("loaded", type(net2).__name__)
'''


def _run(folder: Path) -> subprocess.CompletedProcess:
    return run_script("tour.py", cwd=folder)


def test_the_tour_fails_before_and_runs_after_with_0_3s_numbers(tmp_path: Path) -> None:
    root = tmp_path / "tour"
    root.mkdir()
    (root / "tour.py").write_text(TOUR, encoding="utf-8")
    before = _run(root)
    assert before.returncode != 0 and "floating point" in before.stderr, before.stderr
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    text = (root / "tour.py").read_text(encoding="utf-8")
    assert "if ii.item() > 0:" in text and "w.data.squeeze().item()" in text
    assert 't.arange(-2, 4, dtype=t.float, requires_grad=True)' in text and 'weights_only=False' in text
    after = _run(root)
    assert after.returncode == 0, after.stderr
    # 0.3: x = [-2, -1, 0, 1, 2, 3] as floats, y = x[3] * x[4] * x[5] (the positive items): dy/dx = [0, 0, 0, 6, 3, 2]
    assert after.stdout.splitlines() == ["grad [0.0, 0.0, 0.0, 6.0, 3.0, 2.0]", "w True", "loaded Net"]
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert (root / "tour.py").read_text(encoding="utf-8") == text  # a second run changes nothing


def test_imported_by_another_file_the_parameter_is_not_shown_1_dim(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "tour.py").write_text(TOUR, encoding="utf-8")
    (root / "other.py").write_text("from tour import f\n", encoding="utf-8")
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    line = next(l for l in out.splitlines() if "tour.py:17:" in l)
    assert "TFD006" in line and "[*]" not in line, out
