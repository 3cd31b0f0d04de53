"""Issue 32, the migrated program runs: TFD018 (a tensor the migration puts on the device reaches
host code) and TFD019 (a PyTorch 0.3 Python number is now a 0-dim tensor), executed before and
after their rewrites.

TFD018 runs its programs with ``DEVICE`` set to the device: on ``meta``, the stand-in device
``verify`` uses, under its :class:`~torchfix_device.verify.checker.DeviceChecker` (which gives a
copy out of ``meta`` zeros of the right shape, as a GPU gives the numbers), the original raises
the error CUDA raises at ``.numpy()`` and the rewrite runs; on the CPU both give the same arrays
and print the same text (``.cpu()`` of a CPU tensor is the tensor itself).

TFD019's originals run twice: on PyTorch 2.x as they are, and as PyTorch 0.3 ran them
(:func:`torch03`: a full reduction of a tensor and an element of a 1-dim tensor give Python
numbers), which is what the code was written for. The rewrite runs on 2.x and must show what
0.3 showed: the printed text, the JSON written, the dict that counted.
"""

from __future__ import annotations

import io
import json
import random
import sys
import textwrap
import types
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402
from torchfix_device.options import RunOptions  # noqa: E402
from torchfix_device.verify.checker import DeviceChecker, is_device_error  # noqa: E402

TFD018 = [c for c in all_codemods() if c.code == "TFD018"]
TFD019 = [c for c in all_codemods() if c.code == "TFD019"]


def _rewrite(source: str, codemods, unsafe: bool = False):  # noqa: ANN001
    return transform_source(source, codemods, filename="program.py", options=RunOptions(unsafe_fixes=unsafe))


@contextmanager
def fake_pyplot():
    """``matplotlib.pyplot`` as far as these programs need it: each plotting call converts its
    array arguments with ``np.asarray``, as matplotlib does (and records them)."""
    drawn: list = []
    pyplot = types.ModuleType("matplotlib.pyplot")

    def plotting(*args, **kwargs):
        drawn.append([np.asarray(a) for a in args if not isinstance(a, str)])

    for name in ("plot", "imshow", "scatter", "hist"):
        setattr(pyplot, name, plotting)
    package = types.ModuleType("matplotlib")
    package.pyplot = pyplot  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("matplotlib", "matplotlib.pyplot")}
    sys.modules.update({"matplotlib": package, "matplotlib.pyplot": pyplot})
    try:
        yield drawn
    finally:
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module


def _run(source: str, device: str | None = None, legacy: bool = False) -> dict:
    """What a user observes running ``source``: its result, printed text, plotted arrays, or the
    exception (type and message)."""
    namespace: dict = {"__name__": "program", "DEVICE": device}
    out = io.StringIO()
    try:
        with fake_pyplot() as drawn, redirect_stdout(out):
            code = compile(source, "program.py", "exec")
            if device == "meta":
                with DeviceChecker():
                    exec(code, namespace)
            elif legacy:
                with torch03():
                    exec(code, namespace)
            else:
                exec(code, namespace)
    except Exception as exc:  # the exception is what a user observes
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"result": namespace.get("result"), "printed": out.getvalue(), "drawn": drawn}


# -- TFD018 -----------------------------------------------------------------------------------
EVALUATION = textwrap.dedent(
    """
    import numpy as np
    import torch
    import torch.nn as nn
    import matplotlib.pyplot as plt

    torch.manual_seed(0)
    device = torch.device(DEVICE)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(device)
    inputs = torch.randn(6, 4)
    output = model(inputs.to(device))
    scores = output.data.numpy()
    probabilities = np.asarray(output.detach().softmax(1))
    table = np.array(output.detach() * 2)
    plt.plot(output.detach()[:, 0], "r-")
    labels = torch.from_numpy(np.arange(6) % 3)
    hits = (np.argmax(scores, axis=1) == labels.numpy()).sum()
    print("scores", np.round(scores, 4).tolist(), "hits", hits)
    result = (scores, probabilities, table)
    """
)


def test_host_transfer_fails_on_the_device_before_and_runs_after() -> None:
    out = _rewrite(EVALUATION, TFD018)
    assert out.text.count(".cpu()") == 4 and "labels.numpy()" in out.text, out.text
    assert all(f.fixed for f in out.findings) and len(out.findings) == 4

    before = _run(EVALUATION, "meta")
    assert before.get("raised") == "TypeError" and "can't convert meta device type tensor to numpy" in before["message"]
    assert is_device_error(before["message"])  # what `verify` counts as the device's failure
    after = _run(out.text, "meta")
    assert "raised" not in after, after
    assert [a.shape for a in after["result"]] == [(6, 3)] * 3 and len(after["drawn"]) == 1

    cpu_before, cpu_after = _run(EVALUATION, "cpu"), _run(out.text, "cpu")
    assert "raised" not in cpu_before and cpu_before["printed"] == cpu_after["printed"] != ""
    assert all(np.array_equal(a, b) for a, b in zip(cpu_before["result"], cpu_after["result"], strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(cpu_before["drawn"][0], cpu_after["drawn"][0], strict=True))


def test_cpu_shares_memory_as_before_on_the_cpu() -> None:
    """``.cpu()`` of a CPU tensor is the tensor itself: the array still shares its memory, so a
    write through it changes the tensor as it did (on the device only the copy changes, which is
    why such a fix is unsafe)."""
    source = textwrap.dedent(
        """
        import torch
        device = torch.device(DEVICE)
        weights = torch.ones(3).to(device)
        values = weights.numpy()
        values[0] = 5
        result = weights.tolist()
        """
    )
    safe, unsafe = _rewrite(source, TFD018), _rewrite(source, TFD018, unsafe=True)
    assert safe.text == source and [f.held_back for f in safe.findings] == [True]
    assert "weights.cpu().numpy()" in unsafe.text
    assert _run(source, "cpu")["result"] == _run(unsafe.text, "cpu")["result"] == [5.0, 1.0, 1.0]


def test_a_file_that_moves_nothing_is_left_alone() -> None:
    source = EVALUATION.replace("device = torch.device(DEVICE)\n", "").replace(".to(device)", "")
    assert "device" not in source
    assert _rewrite(source, TFD018).findings == [] and _run(source, "cpu")["printed"]


# -- TFD019 -----------------------------------------------------------------------------------
@contextmanager
def torch03():
    """Tensors read as PyTorch 0.3 read them (tensors that do not require grad; a ``Variable``
    kept giving tensors): an element of a 1-dim tensor and a full reduction are Python numbers."""
    getitem = torch.Tensor.__getitem__
    reductions = {name: getattr(torch.Tensor, name) for name in ("sum", "max")}

    def legacy_getitem(self, index):
        if type(index) is int and self.dim() == 1 and not self.requires_grad:
            return getitem(self, index).item()
        return getitem(self, index)

    def legacy(name):
        method = reductions[name]

        def reduce(self, *args, **kwargs):
            out = method(self, *args, **kwargs)
            return out.item() if not args and not kwargs and not self.requires_grad else out

        return reduce

    torch.Tensor.__getitem__ = legacy_getitem
    for name in reductions:
        setattr(torch.Tensor, name, legacy(name))
    try:
        yield
    finally:
        torch.Tensor.__getitem__ = getitem
        for name, method in reductions.items():
            setattr(torch.Tensor, name, method)


VOTES = textwrap.dedent(
    """
    import json
    import torch
    import torch.nn as nn

    torch.manual_seed(3)
    classes = {0: "cat", 1: "dog", 2: "bird"}
    votes = {0: 0, 1: 0, 2: 0}
    model = nn.Linear(4, 3)
    for step in range(4):
        scores = model(torch.randn(5, 4))
        best = torch.max(scores.data, 1)[1][0]
        votes[best] += 1
        print("step", step, "predicts", classes[best])
    record = json.dumps({"votes": votes, "total": scores.data.sum()})
    print(record)
    result = votes
    """
)

COUNTER = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    batches = [(torch.randn(12, 8), torch.randint(0, 3, (12,))) for _ in range(4)]
    correct = 0
    for x, y in batches:
        pred = model(x).data.max(1)[1]
        correct += pred.eq(y).sum()
    print("correct", correct, "accuracy %.3f" % (100. * correct / 48), "{}/48".format(correct))
    result = correct
    """
)


RETURNED = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    torch.manual_seed(2)


    def performance(crit, pred, gold):
        loss = crit(pred, gold)
        hits = pred.max(1)[1].data.eq(gold.data)
        n_correct = hits.masked_select(gold.ne(0).data).sum()
        return loss, n_correct


    def epoch(model, batches, crit):
        n_words = 0
        n_correct_total = 0
        for x, y in batches:
            loss, n_correct = performance(crit, model(x), y)
            n_correct_total += n_correct
            n_words += y.data.ne(0).sum()
        return loss.item(), n_correct_total / n_words


    model = nn.Linear(6, 4)
    batches = [(torch.randn(10, 6), torch.randint(0, 4, (10,))) for _ in range(3)]
    accuracies = []
    history = []
    for step in range(3):
        loss, accuracy = epoch(model, batches, nn.CrossEntropyLoss())
        accuracies += [accuracy]
        history.append(100 * accuracy)
        if accuracy >= max(accuracies):
            print("best so far", max(history), "loss {:.4f}".format(loss))
    result = history
    """
)


@pytest.mark.parametrize("program", ["VOTES", "COUNTER", "RETURNED"])
def test_zero_dim_numbers_show_what_03_showed(program: str) -> None:
    source = {"VOTES": VOTES, "COUNTER": COUNTER, "RETURNED": RETURNED}[program]
    out = _rewrite(source, TFD019)
    fixed = [f for f in out.findings if f.fixed]
    assert fixed and len(fixed) == len(out.findings) and ".item()" in out.text, out.text
    legacy, today, after = _run(source, legacy=True), _run(source), _run(out.text)
    assert "raised" not in legacy and "raised" not in after, (legacy, after)
    assert after["printed"] == legacy["printed"] != "" and after["result"] == legacy["result"]
    assert type(after["result"]) is type(legacy["result"])
    if program == "VOTES":  # 2.x: tensors hash by identity, so the first lookup misses
        assert today == {"raised": "KeyError", "message": today["message"]} and today["message"].startswith("tensor(")
        assert {int(k): v for k, v in json.loads(after["printed"].splitlines()[-1])["votes"].items()} == after["result"]
    elif program == "COUNTER":  # 2.x runs, but the counter is a tensor: printed as one
        assert "raised" not in today and "correct tensor(" in today["printed"] and "correct tensor(" not in after["printed"]
        assert isinstance(today["result"], torch.Tensor) and type(after["result"]) is int
    else:  # the counts reach the counters through returned tuples, the ratios a list that is compared
        assert len(fixed) == 2 and "raised" not in today and "so far tensor(" in today["printed"]
        assert all(isinstance(r, torch.Tensor) for r in today["result"]) and all(type(r) is float for r in after["result"])


def test_json_of_a_reduction_raises_before_and_is_written_after() -> None:
    source = "import json\nimport torch\nx = torch.arange(6.0)\nprint(json.dumps({'total': x.sum(), 'max': x.max()}))\n"
    out = _rewrite(source, TFD019)
    assert out.text.count(".item()") == 2, out.text
    assert _run(source)["raised"] == "TypeError"
    assert _run(out.text)["printed"] == _run(source, legacy=True)["printed"] == '{"total": 15.0, "max": 5.0}\n'


def test_an_element_of_unknown_dimensions_is_an_unsafe_fix() -> None:
    """``q.max(1)[1].data[0]`` added to a counter: a number where ``q`` is 2-dim (as 0.3 code
    had it), but on a 3-dim ``q`` a row, which the counter adds as a tensor and ``.item()``
    refuses: held back without --unsafe-fixes."""
    source = textwrap.dedent(
        """
        import torch

        def act(q):
            return q.max(1)[1].data[0]

        torch.manual_seed(0)
        total = 0
        total += act(torch.randn(1, 2))
        result = total
        """
    )
    safe, unsafe = _rewrite(source, TFD019), _rewrite(source, TFD019, unsafe=True)
    assert safe.text == source and [f.held_back for f in safe.findings] == [True]
    assert "q.max(1)[1][0].item()" in unsafe.text
    assert _run(unsafe.text)["result"] == _run(source, legacy=True)["result"] in (0, 1)
    three_dims = source.replace("torch.randn(1, 2)", "torch.randn(1, 2, 3)")
    assert "raised" not in _run(three_dims)  # the original adds a row of three: it runs
    assert _run(unsafe.text.replace("torch.randn(1, 2)", "torch.randn(1, 2, 3)"))["raised"] == "RuntimeError"


@contextmanager
def fake_gym():
    """``gym`` as far as these programs need it: ``gym.make("CartPole-v0")`` gives an
    environment whose ``step`` asserts, as CartPole's does, that its action is in its
    ``Discrete(2)`` action space (an ``int`` or an integer NumPy scalar)."""
    gym = types.ModuleType("gym")

    class Discrete:
        n = 2

        def contains(self, x):
            if isinstance(x, (np.generic, np.ndarray)) and x.dtype.kind in "iu" and x.shape == ():
                x = int(x)
            return isinstance(x, int) and 0 <= x < self.n

    class CartPole:
        action_space = Discrete()
        observation_space = types.SimpleNamespace(shape=(4,))

        def __init__(self):
            self.t, self.unwrapped, self.taken = 0, self, []

        def reset(self):
            return [0.01 * self.t, 0.0, -0.02, 0.0]

        def step(self, action):
            assert self.action_space.contains(action), "%r (%s) invalid" % (action, type(action))
            self.t += 1
            self.taken.append(action)
            return self.reset(), 1.0, self.t % 4 == 0, {}

    made: list = []
    gym.make = lambda env_id: made.append(CartPole()) or made[-1]  # type: ignore[attr-defined]
    saved = sys.modules.get("gym")
    sys.modules["gym"] = gym
    try:
        yield made
    finally:
        if saved is None:
            sys.modules.pop("gym", None)
        else:
            sys.modules["gym"] = saved


def test_an_element_every_tensor_fails_at_is_a_safe_fix() -> None:
    """``q_value.max(1)[1].data[0]`` of a DQN's ``act`` (dimensions not shown), returned to
    ``action = model.act(...)`` whose next statement is ``env.step(action)`` of CartPole, and
    ``torch.multinomial(p, 1)[0]`` looked up in a plain dict: the original fails there for a
    tensor of any shape (gym's check, ``KeyError``), so ``.item()`` is safe. The rewrite runs and
    takes the actions and words PyTorch 0.3 took; the fixture is the same program."""
    fixture = Path(__file__).parent / "fixtures" / "zero_dim_tensor_as_number" / "refused_by_every_tensor.in.py"
    source = fixture.read_text(encoding="utf-8") + textwrap.dedent(
        """
        torch.manual_seed(0)
        words = [sample(nn.Linear(3, 5), ["the", "cat", "sat", "on", "mat"], torch.randn(1, 3)) for _ in range(6)]
        result = (env.taken, words)
        """
    )
    out = _rewrite(source, TFD019)
    assert [f.fixed for f in out.findings] == [True, True], [f.message for f in out.findings]
    assert out.text.count(".item()") == 2 and all("any shape" in f.message for f in out.findings)
    with fake_gym():  # the model is made before the program seeds torch: seed both here
        random.seed(1), torch.manual_seed(1)
        today = _run(source)
        random.seed(1), torch.manual_seed(1)
        legacy = _run(source, legacy=True)
        random.seed(1), torch.manual_seed(1)
        after = _run(out.text)
    assert today["raised"] == "AssertionError" and "invalid" in today["message"], today
    assert "raised" not in legacy and "raised" not in after, (legacy, after)
    taken, words = after["result"]
    assert (taken, words) == legacy["result"] and len(taken) == 100 and len(words) == 6
    assert all(type(a) is int for a in taken) and all(w in ("the", "cat", "sat", "on", "mat") for w in words)
    without_gym_failure = source.replace("for frame in range(100):", "for frame in range(0):")
    with fake_gym():
        assert _run(without_gym_failure)["raised"] == "KeyError"  # the dict lookup fails too, for any tensor


def test_the_output_of_a_layer_kept_on_self_and_of_forward_has_the_dimensions_they_show() -> None:
    """``zero_dim_tensor_as_number/own_layers_and_forward``: ``self.forward(state)`` returns what
    ``self.head`` (an ``nn.Sequential`` of ``Linear`` layers the class keeps) makes of a 2-dim
    view, so ``q_value.max(1)[1]`` is 1-dim and its ``.data[0]`` was a number (written as JSON);
    the same through ``self.head(...)`` called directly and through ``self(...)``. The original raises on 2.x; the rewrite
    writes what PyTorch 0.3 wrote."""
    fixture = Path(__file__).parent / "fixtures" / "zero_dim_tensor_as_number" / "own_layers_and_forward.in.py"
    source = fixture.read_text(encoding="utf-8") + textwrap.dedent(
        """
        torch.manual_seed(0)
        result = [QNetwork(4, 3).act([0.5, -1.0, 2.0, 0.1]) for _ in range(3)]
        """
    )
    out = _rewrite(source, TFD019)
    assert [f.fixed for f in out.findings] == [True, True, True], [f.message for f in out.findings]
    assert all("an element of a 1-dim tensor" in f.message for f in out.findings)
    today, legacy, after = _run(source), _run(source, legacy=True), _run(out.text)
    assert today["raised"] == "TypeError" and "JSON serializable" in today["message"], today
    assert "raised" not in legacy and after["result"] == legacy["result"], (legacy, after)
    assert all(set(json.loads(r)) == {"action", "best", "again"} and json.loads(r)["action"] in (0, 1, 2) for r in after["result"])
    unshown = fixture.with_name("own_layers_and_forward_not_shown.unsafe.in.py").read_text(encoding="utf-8")
    held = _rewrite(unshown, TFD019)  # a subclass's `forward`, two kinds of `self.head`, a `__call__`, a class method
    assert held.text == unshown and [f.fixed for f in held.findings] == [False] * 4, [f.message for f in held.findings]


def test_an_element_filled_in_then_looked_up_in_a_class_s_dict_is_a_safe_fix() -> None:
    """A language model's sampling loop: ``word_id = torch.multinomial(prob, 1)[0]`` (dimensions
    of ``prob`` not shown), ``inputs.fill_(word_id)`` (a 0-dim tensor fills as its number does, any
    other tensor is refused), then ``corpus.dictionary.idx2word[word_id]``, an ``OrderedDict`` the
    ``Dictionary`` class of the file gives that attribute: the lookup fails for any tensor, so
    ``.item()`` is safe. The original raises ``KeyError``; the rewrite samples the words 0.3 did."""
    fixture = Path(__file__).parent / "fixtures" / "zero_dim_tensor_as_number" / "refused_after_a_fill.in.py"
    source = fixture.read_text(encoding="utf-8") + textwrap.dedent(
        """
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(1, 4), nn.LogSoftmax(dim=1))
        result = sample(model, ["the", "cat", "sat", "down"], 8)
        """
    )
    out = _rewrite(source, TFD019)
    assert [f.fixed for f in out.findings] == [True] and "any shape" in out.findings[0].message, out.findings
    today, legacy, after = _run(source), _run(source, legacy=True), _run(out.text)
    assert today["raised"] == "KeyError", today
    assert "raised" not in legacy and after["result"] == legacy["result"], (legacy, after)
    assert len(after["result"]) == 8 and set(after["result"]) <= {"the", "cat", "sat", "down"}
    kept = source.replace("collections.OrderedDict()", "collections.defaultdict(str)")
    assert [f.fixed for f in _rewrite(kept, TFD019).findings] == [False]  # a defaultdict adds the key


def test_a_tensor_counter_and_a_backpropagated_sum_stay_tensors() -> None:
    source = textwrap.dedent(
        """
        import torch
        w = torch.ones(3, requires_grad=True)
        total = torch.zeros(1)
        for _ in range(2):
            total += (w * 2).detach().sum()
        loss = (w * w).sum()
        loss.backward()
        result = (total, w.grad)
        """
    )
    assert _rewrite(source, TFD019, unsafe=True).findings == []


def test_an_element_at_an_index_enumerate_gives_prints_what_03_printed() -> None:
    """``for i, word in enumerate(words)``: ``i`` is an int (facts.counts), so ``scores.data[i]`` of
    a 1-dim ``scores`` was a Python number in 0.3 and is a 0-dim tensor since: ``scores[i].item()``."""
    source = textwrap.dedent(
        """
        import torch

        torch.manual_seed(0)
        words = ["the", "cat", "sat", "on", "a", "mat"]
        scores = torch.randn(len(words))
        for i, word in enumerate(words):
            print(word, scores.data[i] > 0, "%.3f" % scores.data[i])
        """
    )
    out = _rewrite(source, TFD019)
    assert out.text.count("scores[i].item()") == 2 and all(f.fixed for f in out.findings), out.text
    legacy, today, after = _run(source, legacy=True), _run(source), _run(out.text)
    assert "tensor(True)" in today["printed"] or "tensor(False)" in today["printed"]
    assert after["printed"] == legacy["printed"] != "" and "tensor(" not in after["printed"]


def test_a_tensor_reshaped_in_place_has_no_dimensions_from_its_binding() -> None:
    """``scores.unsqueeze_(0)`` makes the 1-dim ``scores`` 2-dim: ``scores[0]`` is a row, not a 0.3
    number. Its binding alone said 1-dim, and ``seen[scores[0].item()]`` raised (4 elements)."""
    source = textwrap.dedent(
        """
        import torch

        torch.manual_seed(0)
        scores = torch.randn(4)
        scores.unsqueeze_(0)
        seen = {}
        seen[scores[0]] = "first row"
        print(len(seen), tuple(scores.shape))
        """
    )
    out = _rewrite(source, TFD019)
    assert out.text == source and not out.findings
    assert _run(source)["printed"] == "1 (1, 4)\n"
    wrong = _run(source.replace("seen[scores[0]]", "seen[scores[0].item()]"))  # what the binding alone said
    assert wrong["raised"] == "RuntimeError"
