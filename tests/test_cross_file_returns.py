"""What a function of another file of the run returns (issue 31: "returns of functions ... in other
files of the run (by import)"): bearpaw's ``prec1, prec5 = accuracy(...)`` with ``accuracy`` in
``utils/eval.py``, re-exported by ``utils/__init__.py``'s ``from .eval import *``. Each element is
a 0-dim tensor that cannot require grad, so ``prec1[0]`` (a number in 0.3, an IndexError since
0.4) becomes ``prec1.item()``. Executed before and after; the cached answer follows the defining
file's code; a function whose result may require grad, or whose list escapes, shows nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import run_cli, run_script
from torchfix_device.facts.project_functions import imported_functions, module_functions

EVAL = '''__all__ = ['accuracy']


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res
'''

TRAIN = '''import torch
from utils import accuracy

torch.manual_seed(0)
top1, top5 = [], []
for step in range(3):
    outputs, targets = torch.randn(8, 10), torch.randint(0, 10, (8,))
    prec1, prec5 = accuracy(outputs.data, targets.data, topk=(1, 5))
    top1.append(prec1[0])
    top5.append(prec5[0])
print("%.4f %.4f" % (sum(top1) / len(top1), sum(top5) / len(top5)))
'''


def _project(root: Path, eval_code: str = EVAL) -> Path:
    (root / "utils").mkdir(parents=True)
    (root / "utils" / "__init__.py").write_text("from .eval import *\n", encoding="utf-8")
    (root / "utils" / "eval.py").write_text(eval_code, encoding="utf-8")
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    return root


def _run(root: Path) -> subprocess.CompletedProcess:
    return run_script("train.py", cwd=root)


def _lines(root: Path, *args: str) -> list[str]:
    out = run_cli("check", ".", *args, cwd=root).stdout.decode()
    return [line for line in out.splitlines() if line.startswith("train.py:")]


def test_an_element_of_a_list_returned_by_another_file_is_0_dim_and_the_script_runs(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    root = _project(tmp_path / "p")
    before = _run(root)
    assert before.returncode != 0 and "invalid index of a 0-dim tensor" in before.stderr, before.stderr
    found = _lines(root, "--no-cache")
    assert len(found) == 2 and all("[*]" in line and "TFD006" in line for line in found), found
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "top1.append(prec1.item())" in text and "top5.append(prec5.item())" in text
    after = _run(root)
    assert after.returncode == 0, after.stderr
    # what 0.3 printed: the same program where each element is the Python number of a 1-element vector
    as_0_3 = TRAIN.replace("prec1[0]", "float(prec1.reshape(1)[0])").replace("prec5[0]", "float(prec5.reshape(1)[0])")
    (root / "train.py").write_text(as_0_3, encoding="utf-8")
    assert after.stdout == _run(root).stdout != ""


def test_the_cached_answer_follows_the_code_of_the_defining_file(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "pyproject.toml").write_text("[tool.torchfix-device]\n", encoding="utf-8")  # the cache lives here
    assert all("[*]" in line for line in _lines(root))
    kept = EVAL.replace(".sum(0)", ".sum(0, keepdim=True)")  # now 1-dim: `prec1[0]` is its element
    (root / "utils" / "eval.py").write_text(kept, encoding="utf-8")  # train.py is unchanged
    assert not any("TFD006" in line for line in _lines(root))


@pytest.mark.parametrize("change", [
    ("res.append(correct_k.mul_(100.0 / batch_size))", "res.append(output.sum() * 0)"),  # may require grad
    ("    return res\n", "    log(res)\n    return res\n"),  # the list escapes: what it holds is not shown
])
def test_a_return_that_may_require_grad_or_escapes_shows_nothing(tmp_path: Path, change: tuple[str, str]) -> None:
    root = _project(tmp_path / "p", EVAL.replace(*change) + "\n\ndef log(x):\n    return None\n")
    assert not any("[*]" in line for line in _lines(root, "--no-cache"))


def test_the_run_maps_uses_to_the_defining_file_through_a_star_export(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "utils" / "misc.py").write_text("def _private():\n    return 1\n\ndef helper():\n    return 2\n", encoding="utf-8")
    (root / "utils" / "__init__.py").write_text("from .eval import *\nfrom .misc import *\n", encoding="utf-8")
    init, eval_, misc, train = (root / "utils" / "__init__.py", root / "utils" / "eval.py", root / "utils" / "misc.py", root / "train.py")
    programs = {p: p.read_bytes() for p in (init, eval_, misc, train)}
    resolved = {
        train: [("utils", 0, init)],
        init: [("eval", 1, eval_), ("misc", 1, misc)],
        eval_: [], misc: [],
    }
    found = imported_functions(programs, resolved)
    table, digest = found[train]
    assert table == {"utils.accuracy": (str(eval_), "accuracy"), "utils.helper": (str(misc), "helper")}
    assert len(digest) == 16 and init in found  # `.eval.accuracy` for the package itself


def test_module_functions_leave_out_names_bound_twice_and_decorated_ones() -> None:
    code = b"import f\n\ndef f():\n    return 1\n\n@dec\ndef g():\n    return 2\n\ndef h():\n    return 3\n\n__all__ = ['h', 'f']\n"
    functions, stars, exported, named = module_functions(code)
    assert functions == {"h": 1} and stars == [] and exported == frozenset({"h", "f"}) and named == {}


def test_the_run_maps_uses_through_a_package_that_imports_a_name_to_hand_it_on(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "utils" / "misc.py").write_text("class Trainer:\n    pass\n\ndef helper():\n    return 2\n", encoding="utf-8")
    (root / "utils" / "__init__.py").write_text(
        "from .eval import accuracy as acc\nfrom .misc import Trainer\nfrom .misc import helper\nhelper = 3\n"
        "from .eval import missing\n__all__ = [acc, Trainer]\n",
        encoding="utf-8",
    )
    init, eval_, misc, train = (root / "utils" / "__init__.py", root / "utils" / "eval.py", root / "utils" / "misc.py", root / "train.py")
    programs = {p: p.read_bytes() for p in (init, eval_, misc, train)}
    resolved = {train: [("utils", 0, init)], init: [("eval", 1, eval_), ("misc", 1, misc)], eval_: [], misc: []}
    table, _ = imported_functions(programs, resolved)[train]
    # `helper` is bound twice in the package (imported, then assigned): not handed on
    assert table == {"utils.acc": (str(eval_), "accuracy"), "utils.Trainer": (str(misc), "Trainer")}
    assert module_functions(programs[init])[3]["acc"] == ("eval", 1, "accuracy")


def test_a_cycle_of_packages_handing_names_on_ends(tmp_path: Path) -> None:
    a, b, train = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "train.py"
    a.write_text("from b import f\n", encoding="utf-8")
    b.write_text("from a import f\n", encoding="utf-8")
    train.write_text("from a import f\nf()\n", encoding="utf-8")
    programs = {p: p.read_bytes() for p in (a, b, train)}
    resolved = {a: [("b", 0, b)], b: [("a", 0, a)], train: [("a", 0, a)]}
    assert imported_functions(programs, resolved) == {}


LOSSES = '''import torch.nn as nn
import torch.nn.functional as F


class SmoothedNLL(nn.Module):
    def __init__(self, smoothing=0.1):
        super(SmoothedNLL, self).__init__()
        self.smoothing = float(smoothing)

    def forward(self, logits, target):
        logp = F.log_softmax(logits, dim=1)
        return (1 - self.smoothing) * F.nll_loss(logp, target) - self.smoothing * logp.mean()


def total_loss(logits, target):
    return F.cross_entropy(logits, target) + 0.5 * logits.pow(2).mean()
'''

LOSS_TRAIN = '''import torch
import torch.nn as nn
from losses import SmoothedNLL, total_loss

torch.manual_seed(0)
model = nn.Linear(4, 3)
criterion = SmoothedNLL(0.2)
seen = []
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    loss = criterion(model(x), y)
    reg = total_loss(model(x), y)
    seen.append(loss.data[0] + reg.data[0])
print("%.5f" % sum(seen))
'''


def test_a_loss_module_or_loss_function_of_another_file_gives_a_0_dim_value(tmp_path: Path) -> None:
    """``criterion = SmoothedNLL(0.2)`` (a module of ``losses.py`` whose ``forward`` returns a
    torch loss) and ``total_loss(...)`` (a function of it returning one): their results are 0-dim,
    so ``.data[0]`` becomes ``.item()``, and the script runs, printing what 0.3 printed."""
    pytest.importorskip("torch")
    root = tmp_path / "p"
    root.mkdir()
    (root / "losses.py").write_text(LOSSES, encoding="utf-8")
    (root / "train.py").write_text(LOSS_TRAIN, encoding="utf-8")
    before = _run(root)
    assert before.returncode != 0 and "invalid index of a 0-dim tensor" in before.stderr, before.stderr
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "seen.append(loss.item() + reg.item())" in text, text
    after = _run(root)
    assert after.returncode == 0, after.stderr
    as_0_3 = LOSS_TRAIN.replace("loss.data[0]", "float(loss.reshape(1)[0])").replace("reg.data[0]", "float(reg.reshape(1)[0])")
    (root / "train.py").write_text(as_0_3, encoding="utf-8")
    assert after.stdout == _run(root).stdout != ""
    # a loss that keeps its elements in the other file: nothing is shown
    (root / "train.py").write_text(LOSS_TRAIN, encoding="utf-8")
    (root / "losses.py").write_text(LOSSES.replace("F.nll_loss(logp, target)", "F.nll_loss(logp, target, reduction='none')")
                                    .replace("F.cross_entropy(logits, target)", "F.cross_entropy(logits, target, reduce=False)"), encoding="utf-8")
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert (root / "train.py").read_text(encoding="utf-8") == LOSS_TRAIN


EVALUATE = '''def perplexity(model, batches, loss_criterion):
    losses = []
    for x, y in batches:
        loss = loss_criterion(model(x), y)
        losses.append(loss.data[0])
    return sum(losses) / len(losses)
'''

LIB = '''from evaluate import perplexity


def run(model, batches, crit):
    return perplexity(model, batches, crit)
'''

DIALOG = '''import torch
import torch.nn as nn
from lib import run

torch.manual_seed(0)
model = nn.Linear(4, 3)
criterion = nn.CrossEntropyLoss()
batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]
print("%.5f" % run(model, batches, criterion))
'''


def _evaluate_line(root: Path, *args: str) -> str:
    out = run_cli("check", ".", "--select", "TFD006", *args, cwd=root).stdout.decode()
    return next(line for line in out.splitlines() if line.startswith("evaluate.py:5:"))


def test_a_loss_passed_from_other_files_is_shown_by_every_caller_of_the_run(tmp_path: Path) -> None:
    """``perplexity(model, batches, loss_criterion)`` in ``evaluate.py`` is called only by
    ``lib.run``, whose ``crit`` every caller of the run (``dialog.py``) passes an
    ``nn.CrossEntropyLoss``: the loss is 0-dim, a safe fix, and the script runs. A caller that
    passes anything else, or imports the function under another name, leaves it for review; the
    cached answer follows a caller two files away."""
    pytest.importorskip("torch")
    root = tmp_path / "p"
    root.mkdir()
    for name, code in (("evaluate.py", EVALUATE), ("lib.py", LIB), ("dialog.py", DIALOG)):
        (root / name).write_text(code, encoding="utf-8")
    before = run_script("dialog.py", cwd=root)
    assert before.returncode != 0 and "invalid index of a 0-dim tensor" in before.stderr, before.stderr
    assert "[*] `.data[0]` on a scalar" in _evaluate_line(root)  # cached from here on
    (root / "dialog.py").write_text(DIALOG.replace("run(model, batches, criterion)", "run(model, batches, model)"), encoding="utf-8")
    assert "cannot tell" in _evaluate_line(root)  # the cache knows the caller's caller changed
    (root / "dialog.py").write_text(DIALOG, encoding="utf-8")
    (root / "alias.py").write_text("from evaluate import perplexity as ppl\n", encoding="utf-8")
    assert "cannot tell" in _evaluate_line(root, "--no-cache")
    (root / "alias.py").unlink()
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert "losses.append(loss.item())" in (root / "evaluate.py").read_text(encoding="utf-8")
    after = run_script("dialog.py", cwd=root)
    assert after.returncode == 0, after.stderr
    (root / "evaluate.py").write_text(EVALUATE.replace("loss.data[0]", "float(loss.reshape(1)[0])"), encoding="utf-8")
    assert after.stdout == run_script("dialog.py", cwd=root).stdout != ""


BATCHES = '''from torch.autograd import Variable


def get_batch(source, i, seq_len=3):
    data = Variable(source[i:i + seq_len])
    target = Variable(source[i + 1:i + 1 + seq_len].view(-1))
    return data, target
'''

BATCH_SCRIPT = '''import torch
from batches import get_batch

source = torch.arange(0, 24).view(12, 2)
for i in range(0, 9, 3):
    data, targets = get_batch(source, i)
    print([t.data[0] for t in targets], data.size(0))
'''


def _batches(root: Path, batches: str = BATCHES) -> Path:
    root.mkdir()
    (root / "batches.py").write_text(batches, encoding="utf-8")
    (root / "train.py").write_text(BATCH_SCRIPT, encoding="utf-8")
    return root


def test_an_element_unpacked_by_its_position_has_the_dimensions_returned_there(tmp_path: Path) -> None:
    """awd-lstm-lm: ``data, targets = get_batch(...)`` where ``get_batch`` (another file) returns
    ``data, target`` and only ``target`` is shown (``.view(-1)``: 1-dim); an item of it is 0-dim,
    so ``t.data[0]`` (a number in 0.3, an IndexError since 0.4) becomes ``t.item()``."""
    pytest.importorskip("torch")
    root = _batches(tmp_path / "p")
    before = _run(root)
    assert before.returncode != 0 and "invalid index of a 0-dim tensor" in before.stderr, before.stderr
    out = run_cli("apply", ".", "--no-cache", cwd=root)
    assert out.returncode == 0, out.stderr
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "print([t.item() for t in targets], data.size(0))" in text
    after = _run(root)
    assert after.returncode == 0, after.stderr
    as_0_3 = BATCH_SCRIPT.replace("t.data[0]", "int(t.reshape(1)[0])")  # 0.3: an item was a 1-element vector
    (root / "train.py").write_text(as_0_3, encoding="utf-8")
    assert after.stdout == _run(root).stdout != ""


@pytest.mark.parametrize("change", [
    (".view(-1))", ".view(-1, 1))"),  # 2-dim: an item is a row, `t.data[0]` its element, then as now
    ("    return data, target\n", "    if i:\n        return data, target\n    return target, data\n"),  # positions disagree
])
def test_a_position_not_shown_1_dim_in_every_return_shows_nothing(tmp_path: Path, change: tuple[str, str]) -> None:
    root = _batches(tmp_path / "p", BATCHES.replace(*change))
    lines = [line for line in run_cli("check", ".", "--no-cache", cwd=root).stdout.decode().splitlines() if line.startswith("train.py:7:")]
    assert lines and not any("[*]" in line for line in lines), lines  # reported at most, never a safe `t.item()`


RVAE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class RVAE(nn.Module):
    def __init__(self):
        super(RVAE, self).__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, z=None):
        mu = self.fc(x)
        if z is None:
            kld = (-0.5 * torch.sum(1 - mu.pow(2), 1)).mean().squeeze()
        else:
            kld = None
        return mu, kld

    def trainer(self, optimizer):
        def train(x, target):
            logits, kld = self(x)
            cross_entropy = F.cross_entropy(logits, target)
            loss = cross_entropy + 0.1 * kld
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return cross_entropy, kld, 0.1

        return train
'''

RVAE_TRAIN = '''import torch
from model import RVAE

torch.manual_seed(0)
rvae = RVAE()
if torch.cuda.is_available():
    rvae = rvae.cuda()
train_step = rvae.trainer(torch.optim.SGD(rvae.parameters(), lr=0.1))
for step in range(3):
    x, target = torch.randn(8, 4), torch.randint(0, 3, (8,))
    cross_entropy, kld, coef = train_step(x, target)
    print("%.5f %.5f" % (cross_entropy.data.cpu().numpy()[0], kld.data.cpu().numpy()[0]))
'''


def test_what_a_function_a_method_returns_gives_when_called(tmp_path: Path) -> None:
    """kefirski/pytorch_RVAE: ``train_step = rvae.trainer(optimizer)``, where ``trainer`` (a method
    of a class of another file) returns a function it defines, which returns the cross entropy
    and the ``kld`` its class's ``forward`` gives (read through ``self`` of the method around it;
    ``None`` when given ``z``, where ``kld.data`` would raise as ``kld.item()`` does). Both are
    0-dim, so ``.data.cpu().numpy()[0]`` (an IndexError on 2.x) becomes ``.item()``; the script
    then prints the numbers PyTorch 0.3 printed."""
    pytest.importorskip("torch")
    root = tmp_path / "p"
    root.mkdir()
    (root / "model.py").write_text(RVAE, encoding="utf-8")
    (root / "train.py").write_text(RVAE_TRAIN, encoding="utf-8")
    before = _run(root)
    assert before.returncode != 0 and "0-dimensional" in before.stderr, before.stderr
    out = run_cli("apply", ".", "--no-cache", cwd=root)
    assert out.returncode == 0, out.stderr
    text = (root / "train.py").read_text(encoding="utf-8")
    assert 'print("%.5f %.5f" % (cross_entropy.item(), kld.item()))' in text
    after = _run(root)
    assert after.returncode == 0, after.stderr
    as_0_3 = RVAE_TRAIN.replace(".data.cpu().numpy()[0]", ".detach().cpu().numpy().reshape(1)[0]")
    (root / "train.py").write_text(as_0_3, encoding="utf-8")
    assert after.stdout == _run(root).stdout != ""


def test_a_method_whose_function_is_not_shown_to_give_a_loss_shows_nothing(tmp_path: Path) -> None:
    """The same with ``trainer`` returning one of two functions, or its function returning the
    per-element losses: nothing shows the cross entropy is 0-dim, so it is not rewritten."""
    for number, model in enumerate((
        RVAE.replace("        return train\n", "        def other(x, target):\n            return x, x, x\n\n"
                     "        return train if optimizer else other\n"),
        RVAE.replace("F.cross_entropy(logits, target)", "F.cross_entropy(logits, target, reduction='none')"),
    )):
        root = tmp_path / f"p{number}"
        root.mkdir()
        (root / "model.py").write_text(model, encoding="utf-8")
        (root / "train.py").write_text(RVAE_TRAIN, encoding="utf-8")
        out = run_cli("apply", ".", "--no-cache", cwd=root)
        assert out.returncode == 0, out.stderr
        assert "cross_entropy.data.cpu().numpy()[0]" in (root / "train.py").read_text(encoding="utf-8")
