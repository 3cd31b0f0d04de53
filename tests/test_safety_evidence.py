"""Issue 21 items 6 and 7: `torch.load` calls that choose or forward their location, and `.data[0]` decided on evidence of a scalar, executed before and after.

Each test runs a small legacy program before and after the codemod on CPU with torch and
compares what a user observes: the value it computes, or the type of the exception it raises.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402

CODEMODS = {c.code: c for c in all_codemods()}


def _rewrite(source: str, *codes: str, unsafe: bool = False):
    return transform_source(source, [CODEMODS[c] for c in codes], filename="x.py", options=RunOptions(unsafe_fixes=unsafe))


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


# -- item 7: `.data[0]` -> `.item()` only on evidence of a scalar -----------------------------
SETUP = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    out = torch.randn(4, 3)
    labels = torch.tensor([0, 2, 1, 2])
    pred = torch.randn(4)
    target = torch.randn(4)
    """
)

SCALAR_PROGRAMS = {
    "data_kept_in_a_name": (
        "criterion = nn.CrossEntropyLoss()\nfval = criterion(out, labels).data\nresult = fval[0]\n",
        "result = F.cross_entropy(out, labels).item()\n",
    ),
    "local_criterion": (
        "criterion = nn.CrossEntropyLoss()\nresult = criterion(out, labels).data[0]\n",
        "result = F.cross_entropy(out, labels).item()\n",
    ),
    "init_criterion": (
        textwrap.dedent(
            """
            class Trainer:
                def __init__(self):
                    self.criterion = nn.MSELoss()

                def step(self, pred, target):
                    return self.criterion(pred, target).data[0]


            result = Trainer().step(pred, target)
            """
        ),
        "result = F.mse_loss(pred, target).item()\n",
    ),
    "functional": ("result = F.nll_loss(F.log_softmax(out, 1), labels).data[0]\n",
                   "result = F.nll_loss(F.log_softmax(out, 1), labels).item()\n"),
    "reductions": ("result = (out * 2).sum().data[0] + out.mean().data[0]\n",
                   "result = (out * 2).sum().item() + out.mean().item()\n"),
    "backward": (
        textwrap.dedent(
            """
            w = torch.randn(3, requires_grad=True)


            def compute(w):
                return (out @ w).pow(2).sum()


            def step(w):
                loss = compute(w)
                loss.backward()
                return loss.data[0]


            result = step(w)
            """
        ),
        "w = torch.randn(3, requires_grad=True)\nresult = (out @ w).pow(2).sum().item()\n",
    ),
}


@pytest.mark.parametrize("case", sorted(SCALAR_PROGRAMS))
def test_data_index_on_a_scalar_becomes_item_and_gives_the_meant_value(case: str) -> None:
    body, meant = SCALAR_PROGRAMS[case]
    source = SETUP + body
    out = _rewrite(source, "TFD006")
    assert ".data[0]" not in out.text and ".item()" in out.text
    assert _observe(source) == ("raised", "IndexError")  # torch >= 0.4: 0-dim tensors
    kind, value = _observe(out.text)
    meant_kind, meant_value = _observe(SETUP + meant)  # the value, computed the torch 2 way
    assert kind == meant_kind == "value" and isinstance(value, float)
    assert value == pytest.approx(meant_value)


def test_a_store_into_the_data_of_a_scalar_kept_in_a_name_is_not_a_read() -> None:
    """``fval[0] = 1`` / ``+=`` / ``del``: targets, which ``fval.item()`` cannot be; only the read
    becomes ``.item()``, and the rewrite compiles."""
    source = SETUP + (
        "criterion = nn.MSELoss()\nfval = criterion(pred, target).data\n"
        "fval[0] = 1.0\nfval[0] += 1\ndel fval[0]\nresult = fval[0]\n"
    )
    out = _rewrite(source, "TFD006")
    compile(out.text, "program.py", "exec")
    assert out.text.count("fval[0]") == 3 and "result = fval.item()" in out.text
    assert [f.line for f in out.findings] == [source.count("\n")]


def test_backward_on_a_one_element_tensor_gives_the_same_number() -> None:
    """`.backward()` also accepts a 1-element vector, where `.data[0]` still works: the rewrite
    gives the same number (as a Python float, which is what the legacy code read)."""
    source = SETUP + textwrap.dedent(
        """
        w = torch.randn(3, requires_grad=True)
        loss = (out @ w).pow(2).sum().reshape(1)


        def step(loss):
            loss.backward()
            return loss.data[0]


        result = step(loss)
        """
    )
    out = _rewrite(source, "TFD006")
    assert "loss.item()" in out.text
    before, after = _observe(source), _observe(out.text)
    assert before[0] == after[0] == "value"
    assert float(before[1]) == after[1]


NOT_SHOWN = {
    "criterion_of_another_class": textwrap.dedent(
        """
        class Trainer:
            def __init__(self):
                self.criterion = nn.MSELoss()


        class Evaluator:
            def __init__(self, criterion):
                self.criterion = criterion

            def score(self, pred, target):
                return self.criterion(pred, target).data[0]


        result = Evaluator(nn.MSELoss(reduction="none")).score(pred, target)
        """
    ),
    "criterion_rebound": textwrap.dedent(
        """
        class Switching:
            def __init__(self):
                self.criterion = nn.MSELoss()

            def per_sample(self):
                self.criterion = nn.MSELoss(reduction="none")

            def score(self, pred, target):
                return self.criterion(pred, target).data[0]


        s = Switching()
        s.per_sample()
        result = s.score(pred, target)
        """
    ),
    "criterion_parameter": textwrap.dedent(
        """
        def build():
            criterion = nn.CrossEntropyLoss()
            return criterion


        def evaluate(criterion, out, labels):
            return criterion(out, labels).data[0]


        result = evaluate(nn.CrossEntropyLoss(reduction="none"), out, labels)
        """
    ),
    "positional_reduce": "result = nn.MSELoss(None, False)(pred, target).data[0]\n",
    "functional_positional_reduce": "result = F.mse_loss(pred, target, None, False).data[0]\n",
    "vector_named_loss": "def f(loss):\n    return loss.data[0]\n\n\nresult = f(pred)\n",
    "first_row": "rows = torch.randn(3, 4)\nresult = rows.data[0]\n",
}


def test_an_element_of_a_one_dim_tensor_is_left_to_tfd019() -> None:
    """``out.sum(1).data[0]`` of a 2-dim ``out`` is an element of a 1-dim tensor: no scalar, so
    TFD006 neither rewrites nor reports it; it was a Python number in PyTorch 0.3, read with the
    ``.data[i]`` idiom, and TFD019 turns it into that number (``out.sum(1)[0].item()``)."""
    source = SETUP + "result = out.sum(1).data[0]\n"
    alone = _rewrite(source, "TFD006")
    assert alone.text == source and alone.findings == []
    both = _rewrite(source, "TFD006", "TFD019")
    assert "result = out.sum(1)[0].item()" in both.text and [f.code for f in both.findings] == ["TFD019"]
    before, after = _observe(source), _observe(both.text)
    assert before[0] == after[0] == "value" and type(after[1]) is float and after[1] == before[1].item()


@pytest.mark.parametrize("case", sorted(NOT_SHOWN))
def test_data_index_without_evidence_is_reported_and_left_alone(case: str) -> None:
    source = SETUP + NOT_SHOWN[case]
    out = _rewrite(source, "TFD006")
    assert out.text == source
    findings = [f for f in out.findings if f.code == "TFD006"]
    assert findings and all("cannot tell" in f.message for f in findings)
    before = _observe(source)
    assert before[0] == "value"  # real indexing, working today
    naive = source.replace(".data[0]", ".item()")
    assert _observe(naive)[0] == "raised"  # what a rewrite by name would have done



HOST_READS = textwrap.dedent(
    """
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    params = {k: v.numpy() for k, v in torch.load(PATH).items()}
    result = sorted((k, a.tolist()) for k, a in params.items())
    """
)


def test_a_load_read_out_to_numpy_keeps_its_location(tmp_path: Path) -> None:
    """TFD005: the tensors are only read out as NumPy, which takes CPU tensors only: the load stays
    as it is (it works with a CPU-saved file, as in 0.3), since a device of the code there
    (`meta` stands in for an accelerator) makes the reads raise, as a CUDA device would."""
    path = tmp_path / "weights.pth"
    torch.save({"w": torch.arange(6.0).view(2, 3), "b": torch.ones(2)}, path)
    out = _rewrite(HOST_READS, "TFD005")
    assert out.text == HOST_READS and not out.findings, out.text
    assert _observe(HOST_READS, PATH=str(path))[0] == "value"
    with_device = HOST_READS.replace("torch.load(PATH)", 'torch.load(PATH, map_location=torch.device("meta"))')
    assert _observe(with_device, PATH=str(path))[0] == "raised"
