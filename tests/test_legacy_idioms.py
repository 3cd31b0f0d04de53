"""Checks of the legacy-idiom codemods (TFD009-TFD014) beyond their fixtures."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import pytest

from conftest import run_script

from torchfix_device.options import RunOptions
from torchfix_device.codemods.legacy_loss_reduction_args import LegacyLossReductionArgs, legacy_reduction
from torchfix_device.codemods.variable_wrapper import VariableWrapper
from torchfix_device.engine import transform_source
from torchfix_device.codemods.catalog import all_codemods

torch = pytest.importorskip("torch")


def _executed(text: str, **given) -> dict:
    """The namespace of ``text`` run as a module (deprecation warnings silenced; ``given``: names set first)."""
    scope: dict = dict(given)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(text, scope)
    return scope


@pytest.mark.parametrize("size_average, reduce", list(itertools.product([None, True, False], repeat=2)))
def test_reduction_mapping_matches_torch(size_average, reduce) -> None:
    from torch.nn._reduction import legacy_get_string

    ours = legacy_reduction(size_average, reduce)
    if size_average is None and reduce is None:
        assert ours is None  # torch then keeps the given reduction= (it calls legacy_get_string only otherwise)
    else:
        assert ours == legacy_get_string(size_average, reduce, emit_warning=False)


@pytest.mark.parametrize("size_average, reduce", list(itertools.product([None, True, False], repeat=2)))
@pytest.mark.parametrize("given", [None, "sum"])
def test_rewritten_loss_matches_torch(size_average, reduce, given) -> None:
    """The rewritten constructor gives a loss module with the same reduction as the original."""
    args = [f"size_average={size_average}", f"reduce={reduce}"]  # explicit None included
    if given:
        args.append(f'reduction="{given}"')
    source = f"import torch.nn as nn\ncriterion = nn.MSELoss({', '.join(args)})\n"
    rewritten = transform_source(source, [LegacyLossReductionArgs]).text
    assert "size_average" not in rewritten and "reduce=" not in rewritten
    before, after = (_executed(text)["criterion"].reduction for text in (source, rewritten))
    assert before == after


@pytest.mark.parametrize("call", [
    "nn.MSELoss(size_average=value)",
    "nn.NLLLoss(weight=None, size_average=value, reduce=True)",
    "nn.MSELoss(size_average=value, reduce=None)",
    "nn.MSELoss(size_average=value, reduction='mean')",
    "nn.MSELoss(reduce=value)",
    "nn.MSELoss(size_average=False, reduce=value)",
    "nn.MSELoss(size_average=True, reduce=value)",
    "nn.MSELoss(size_average=None, reduce=value)",
    "nn.MSELoss(value)",  # by position: the places they have had since 0.3
    "nn.CrossEntropyLoss(None, value)",
    "nn.L1Loss(value, reduction='mean')",
])
def test_a_legacy_argument_given_by_a_name_gets_the_reduction_torch_computes(call: str) -> None:
    """The rewrite of a name (``size_average=value``) is an expression; executed for each value
    a legacy script may hold, against what torch makes of the original."""
    source = f"import torch.nn as nn\ncriterion = {call}\n"
    rewritten = transform_source(source, [LegacyLossReductionArgs]).text
    assert "size_average" not in rewritten and "reduce=" not in rewritten, rewritten
    for value in (None, True, False, 0, 1):
        before, after = (_executed(text, value=value)["criterion"].reduction for text in (source, rewritten))
        assert before == after, (value, rewritten)


@pytest.mark.parametrize("call", [
    "nn.MSELoss(size_average=a, reduce=b)", "nn.MSELoss(size_average=f())", "nn.MSELoss(size_average=a, reduction='sum')",
])
def test_what_a_name_cannot_say_stays_for_review(call: str) -> None:
    source = f"import torch.nn as nn\ncriterion = {call}\n"
    out = transform_source(source, [LegacyLossReductionArgs])
    assert out.text == source and [f.fixed for f in out.findings] == [False]


@pytest.mark.parametrize("size_average", [None, True, False])
def test_a_literal_passed_by_position_gets_the_reduction_torch_computes(size_average) -> None:
    """``nn.CrossEntropyLoss(weight, False)``, ``F.nll_loss(x, y, None, False)``,
    ``nn.MSELoss(False)``: the rewritten call gives the loss values the original gives."""
    source = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\ntorch.manual_seed(0)\n"
        "x, y = torch.randn(4, 3), torch.tensor([0, 2, 1, 2])\n"
        f"result = [nn.CrossEntropyLoss(None, {size_average})(x, y), F.nll_loss(x, y, None, {size_average}),\n"
        f"          nn.MSELoss({size_average})(x, x.flip(0))]\n"
    )
    rewritten = transform_source(source, [LegacyLossReductionArgs]).text
    assert rewritten.count(f"{size_average}") == source.count(f"{size_average}") - 3, rewritten  # the three go
    assert rewritten.count("reduction=") == (0 if size_average is None else 3), rewritten
    before, after = (_executed(text)["result"] for text in (source, rewritten))
    assert all(torch.equal(a, b) for a, b in zip(before, after)), rewritten


def test_more_than_size_average_passed_by_position_stays_for_review() -> None:
    """The parameters after ``size_average`` differ between losses (``ignore_index`` comes before
    ``reduce`` in ``nn.CrossEntropyLoss``): only ``size_average``'s place is read."""
    source = "import torch.nn as nn\ncriterion = nn.CrossEntropyLoss(None, False, 0)\n"
    out = transform_source(source, [LegacyLossReductionArgs])
    assert out.text == source and [f.fixed for f in out.findings] == [False]


FIXTURE_ROOT = Path(__file__).parent / "fixtures"

def _run_pair(folder: str, case: str, **given) -> tuple[dict, dict]:
    """The namespaces of ``<case>.in.py`` and ``<case>.out.py`` of ``fixtures/<folder>`` run as
    modules (``given``: names set first, e.g. a silent ``print``)."""
    spaces = []
    for name in (f"{case}.in.py", f"{case}.out.py"):
        scope: dict = dict(given)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile((FIXTURE_ROOT / folder / name).read_text(encoding="utf-8"), name, "exec"), scope)
        spaces.append(scope)
    return spaces[0], spaces[1]


def test_variable_unsafe_unwrap_held_back_by_default() -> None:
    """`x` (not shown to be grad-free) keeps `Variable`'s detach by default; the plain unwrap is
    the unsafe fix."""
    source = "import torch\nfrom torch.autograd import Variable\n\ny = Variable(x).cuda()\nz = Variable(torch.zeros(2))\n"
    output = transform_source(source, [VariableWrapper])
    assert output.text == "import torch\n\ny = x.detach().cuda()\nz = torch.zeros(2)\n"
    assert sorted(f.kind for f in output.findings) == ["fix", "fix"]
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True))
    assert unsafe.text == "import torch\n\ny = x.cuda()\nz = torch.zeros(2)\n"
    assert "; unsafe: `Variable` also detached it" in unsafe.findings[0].message


def test_variable_rewrites_behave_like_variable() -> None:
    from torch.autograd import Variable

    base = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = Variable(torch.zeros(3), requires_grad=True)
        vol = Variable(base * 2.0, volatile=True)
    new = torch.zeros(3, requires_grad=True)
    assert old.is_leaf and new.is_leaf and old.requires_grad == new.requires_grad
    assert not vol.requires_grad and torch.equal(vol, base * 2.0)


def test_a_legacy_constructor_given_sizes_needs_no_detach() -> None:
    """The fixture ``variable_wrapper/legacy_sizes``, executed: ``Variable(torch.FloatTensor(a,
    b, c).zero_())`` and its rewrite without ``.detach()`` give the same zeros, neither needing
    grad (the sizes may be any values, even 0-dim tensors); a one-argument constructor keeps the
    grad of a tensor it is given, so that rewrite keeps ``.detach()``."""
    spaces = _run_pair("variable_wrapper", "legacy_sizes")
    for scope in spaces:
        h, c = scope["initial_state"](2, torch.tensor(3), 4)
        assert h.shape == (2, 3, 4) and not h.requires_grad and not h.any()
        assert c.shape == (2, 4) and not c.requires_grad
        weight = torch.ones(2, requires_grad=True)
        assert torch.FloatTensor(weight).requires_grad  # what the kept `.detach()` is for
        copy = scope["copy_of"](weight)
        assert not copy.requires_grad and torch.equal(copy, weight.detach())


WHOLE_MODEL_LOADER = """\
import torch

torch.manual_seed(0)
model = torch.load("model.pt", map_location="cpu")
model.eval()
print(model(torch.ones(1, 4)).tolist())
"""


def test_whole_model_load_fails_before_and_runs_after_the_unsafe_fix(tmp_path) -> None:
    """A model saved whole (legacy `torch.save(model, p)`) no longer loads with torch's
    `weights_only=True` default; the unsafe fix restores the load and the model's numbers."""
    import subprocess
    import sys

    from torchfix_device.codemods.torch_load_of_whole_model import TorchLoadOfWholeModel

    (tmp_path / "netdef.py").write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n",
        encoding="utf-8",
    )
    save = "import torch, netdef\ntorch.manual_seed(1)\nnet = netdef.Net()\ntorch.save(net, 'model.pt')\nprint(net(torch.ones(1, 4)).tolist())\n"
    saved = subprocess.run([sys.executable, "-c", save], cwd=tmp_path, capture_output=True, text=True, check=True)

    held_back = transform_source(WHOLE_MODEL_LOADER, [TorchLoadOfWholeModel])
    assert held_back.text == WHOLE_MODEL_LOADER
    assert [f.kind for f in held_back.findings] == ["unsafe-fix"]
    rewritten = transform_source(WHOLE_MODEL_LOADER, [TorchLoadOfWholeModel], options=RunOptions(unsafe_fixes=True)).text
    assert 'torch.load("model.pt", map_location="cpu", weights_only=False)' in rewritten

    def run(text: str) -> subprocess.CompletedProcess:
        (tmp_path / "load.py").write_text(text, encoding="utf-8")
        return run_script("load.py", cwd=tmp_path)

    before, after = run(WHOLE_MODEL_LOADER), run(rewritten)
    assert before.returncode != 0 and "Weights only load failed" in before.stderr
    assert after.returncode == 0, after.stderr
    assert after.stdout == saved.stdout  # the same weights, the same numbers


PICKLED_OPTIONS_LOADER = """
import torch
data = torch.load(PATH)
result = (data["settings"].max_token_seq_len, data["train"].tolist())
"""


def test_pickled_options_fail_to_load_before_and_load_after_the_unsafe_fix(tmp_path) -> None:
    """attention-is-all-you-need's data file holds its argparse options: torch's `weights_only=True`
    refuses it; the unsafe fix (an attribute no tensor, number or container has is read) loads it."""
    import argparse
    import pickle

    from torchfix_device.codemods.torch_load_of_whole_model import TorchLoadOfWholeModel

    path = tmp_path / "data.pt"
    torch.save({"settings": argparse.Namespace(max_token_seq_len=52), "train": torch.arange(3)}, path)
    held_back = transform_source(PICKLED_OPTIONS_LOADER, [TorchLoadOfWholeModel])
    assert held_back.text == PICKLED_OPTIONS_LOADER and [f.kind for f in held_back.findings] == ["unsafe-fix"]
    rewritten = transform_source(PICKLED_OPTIONS_LOADER, [TorchLoadOfWholeModel], options=RunOptions(unsafe_fixes=True)).text
    assert "torch.load(PATH, weights_only=False)" in rewritten
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        exec(PICKLED_OPTIONS_LOADER, {"PATH": str(path)})
    scope: dict = {"PATH": str(path)}
    exec(rewritten, scope)
    assert scope["result"] == (52, [0, 1, 2])


def test_plain_properties_hold_every_attribute_of_a_tensor_that_is_no_method() -> None:
    """TFD015 reads any other attribute of a loaded value as an object's: the list must hold every
    public non-method attribute of the installed torch's tensors."""
    from torchfix_device.codemods.torch_load_of_whole_model import PLAIN_PROPERTIES

    attributes = {n for n in dir(torch.Tensor) if not n.startswith("_") and not callable(getattr(torch.Tensor, n, None))}
    assert attributes - PLAIN_PROPERTIES == set()


def test_a_data_set_loads_onto_the_cpu_and_its_items_still_reach_numpy(tmp_path: Path) -> None:
    """A ``torch.load`` in a ``Dataset`` gets ``map_location="cpu"``: its items go through
    ``.numpy()`` and DataLoader workers. Executed: the rewrite gives the items the original
    gives; the device location written before (a stand-in device here) breaks ``__getitem__``."""
    import torch

    folder = Path(__file__).parent / "fixtures" / "torch_load_without_map_location"
    path = tmp_path / "digits.pt"
    torch.save((torch.arange(6.0).view(3, 2), torch.tensor([1, 0, 1])), path)

    def item(source: str) -> object:
        namespace: dict = {"__name__": "dataset_fixture"}
        exec(compile(source, "dataset", "exec"), namespace)
        digits = namespace["Digits"](str(path))
        return [(image.tolist(), label) for image, label in (digits[i] for i in range(len(digits)))]

    before = (folder / "dataset.in.py").read_text(encoding="utf-8")
    after = (folder / "dataset.out.py").read_text(encoding="utf-8")
    assert 'map_location="cpu"' in after
    assert item(after) == item(before) == [([0.0, 1.0], 1), ([2.0, 3.0], 0), ([4.0, 5.0], 1)]
    elsewhere = after.replace('map_location="cpu"', 'map_location=torch.device("meta")')
    with pytest.raises((TypeError, RuntimeError, NotImplementedError)):
        item(elsewhere)


def test_type_of_an_instance_keeps_the_device_it_had_in_0_3() -> None:
    """``priors.type(type(x.data))`` gave ``priors`` ``x``'s tensor type in 0.3, device
    included (``torch.cuda.FloatTensor``); since 0.4 ``type(x.data)`` is ``torch.Tensor``, so it
    moves ``priors`` to the CPU. Executed: ``type_as`` keeps ``x``'s device (a stand-in device
    here) where the old line lands on the CPU; on the CPU both give the same tensor."""
    namespaces = _run_pair("cuda_tensor_type", "type_of_instance")
    before, after = (n["priors_like"] for n in namespaces)
    priors, x = torch.arange(4.0), torch.ones(2)
    assert torch.equal(before(priors, x), after(priors, x)) and after(priors, x).dtype == torch.float32
    on_device = torch.ones(2, device="meta")
    assert before(priors, on_device).device.type == "cpu"  # the device bug the rewrite removes
    assert after(priors, on_device).device.type == "meta"


def test_a_module_alias_goes_with_its_reads_and_the_program_builds_the_same_tensors() -> None:
    """``tt = torch.cuda if cuda else torch`` and ``self.tt`` (set in ``__init__``, read by the
    class's methods): executed before and after on the CPU (``cuda=False``), the same shapes,
    dtypes and values; with ``cuda=True`` the rewrite asks for the CUDA device where the
    original asked for a CUDA tensor type."""
    namespaces = _run_pair("cuda_tensor_type", "module_alias")
    results = []
    for namespace in namespaces:
        scores, ids = namespace["scores_of"](3)
        beam = namespace["Beam"](4)
        moved = beam.advance(5)
        results.append([(t.shape, t.dtype, t.device.type, t.tolist()) for t in (scores, ids, beam.scores, beam.next_ys[0], moved)])
    assert results[0] == results[1]
    after = namespaces[1]
    assert after["Beam"](2, cuda=False).device == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError, TypeError)):
            namespaces[0]["scores_of"](1, cuda=True)  # the CUDA tensor type: unavailable here
        with pytest.raises((RuntimeError, AssertionError)):
            after["scores_of"](1, cuda=True)  # the CUDA device: unavailable here too


def test_attribute_type_aliases_go_with_their_reads_and_the_program_builds_the_same_tensors() -> None:
    """``self.dtype_long = torch.cuda.LongTensor if args.cuda else torch.LongTensor`` (three on
    one condition share one device attribute), read by the class's methods as constructors and
    ``.type(...)`` arguments: executed before and after on the CPU, the same shapes, dtypes,
    devices and values; with ``cuda=True`` the rewrite asks for the CUDA device where the original
    asked for a CUDA tensor type."""
    namespaces = _run_pair("cuda_tensor_type", "attribute_type_aliases", print=lambda *a: None)
    results = []
    for namespace in namespaces:
        memory, env = namespace["memory"], namespace["env"]
        made = [*memory.sample(4), memory.weights, env.reset(3)]
        results.append([(t.shape, t.dtype, t.device.type, t.tolist()) for t in made])
    assert results[0] == results[1]
    assert [r[1] for r in results[1]] == [torch.int64, torch.uint8, torch.float32, torch.float32, torch.float32]
    after = namespaces[1]
    assert after["memory"].tensor_device == torch.device("cpu") and after["env"].device == "not a torch device"
    on_cuda = type("Args", (), {"cuda": True})()
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError, TypeError)):
            namespaces[0]["Memory"](on_cuda, 2)  # the CUDA tensor type: unavailable here
        with pytest.raises((RuntimeError, AssertionError)):
            after["Memory"](on_cuda, 2)  # the CUDA device: unavailable here too


def test_a_cuda_type_bound_to_a_name_becomes_the_device_cuda_has_where_there_is_one() -> None:
    """``dtype = torch.cuda.FloatTensor`` (and ``self.dtype = ...`` in ``__init__``), read as
    ``.type(dtype)`` and as constructors: the original runs only with CUDA; the rewrite runs
    everywhere, on CUDA where there is one, building tensors of the same dtypes and values."""
    namespaces = _run_pair("cuda_tensor_type", "unconditional_type_alias")

    def made(namespace: dict) -> list:
        torch.manual_seed(0)
        x, labels, half = namespace["batch"](3)
        out = namespace["Net"]().to(x.device)(x)
        return [(t.dtype, t.device.type, t.tolist()) for t in (x, labels, half, out)]

    after = made(namespaces[1])
    expected_device = "cuda" if torch.cuda.is_available() else "cpu"
    assert [(d, where) for d, where, _ in after] == [(torch.float32, expected_device), (torch.int64, expected_device),
                                                     (torch.float32, expected_device), (torch.float32, expected_device)]
    assert after[0][2] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]] and after[2][2] == [[0.5]] * 3
    if torch.cuda.is_available():
        assert made(namespaces[0]) == after
    else:
        with pytest.raises((RuntimeError, TypeError, AssertionError)):
            made(namespaces[0])  # the CUDA tensor type: unavailable here


SIZES_OR_DATA = '''
import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x, batch, scale):
        probs, ids = zip(*batch)
        if scale > 1:
            shape = [1.0, float(scale)]
        else:
            shape = [float(scale), 1.0]
        noise = np.arange(6, dtype=np.float32).reshape(2, 3)
        made = (
            torch.FloatTensor(probs), torch.LongTensor(list(ids)), torch.FloatTensor(shape),
            torch.FloatTensor(noise), torch.FloatTensor(int(scale * 2)), torch.FloatTensor(len(batch)),
        )
        noise[0, 0] = 100.0  # a tensor that shares the array's memory sees it
        return made
'''


def test_a_legacy_constructor_becomes_the_factory_its_argument_calls_for_and_builds_the_same_tensors() -> None:
    """What the facts say each lone argument is (a zipped part, ``list(...)`` and a name bound to
    a list on both branches: data; an array: shared memory; ``int(...)``, ``len(...)``: sizes)
    decides the factory: executed before and after, the same shapes and dtypes, the same values
    where the legacy constructor gave values (a size's memory is uninitialised in both), and the
    array's memory shared in both."""
    from torchfix_device.codemods.factory_without_device import FactoryWithoutDevice

    after = transform_source(SIZES_OR_DATA, [FactoryWithoutDevice], options=RunOptions())
    assert after.text.count("torch.tensor(") == 3 and after.text.count("torch.as_tensor(") == 1
    assert after.text.count("torch.empty(") == 2 and "FloatTensor" not in after.text
    results = []
    for text in (SIZES_OR_DATA, after.text):
        namespace: dict = {}
        exec(compile(text, "<net>", "exec"), namespace)
        made = namespace["Net"]()(torch.zeros(2), [(0.5, 1), (0.25, 0)], 2)
        results.append([(t.shape, t.dtype, t.device.type) for t in made] + [t.tolist() for t in made[:4]])
    assert results[0] == results[1]
    assert results[1][-1][0][0] == 100.0  # shared with the array, as the legacy constructor shared it


def test_a_loop_over_a_dict_of_losses_kept_on_the_object_reads_their_numbers() -> None:
    """``loss_data_index/dict_attribute_loop``, executed: the original's ``var.data[0]`` of each
    0-dim loss raises on PyTorch 2.x; the rewrite writes every loss's number, those the losses
    themselves hold."""
    before, after = _run_pair("loss_data_index", "dict_attribute_loop")
    torch.manual_seed(0)
    x, labels, boxes = torch.randn(5, 4), torch.tensor([0, 1, 2, 1, 0]), torch.randn(5, 2)
    old, new = before["Network"](), after["Network"]()
    new.load_state_dict(old.state_dict())
    for network in (old, new):
        network.add_losses(x, labels, boxes)
    with pytest.raises(IndexError, match="0-dim"):
        old.summary()
    written = dict(new.summary())
    assert set(written) == {"cross_entropy", "box_loss", "total"}
    assert all(isinstance(v, float) for v in written.values())
    assert written["total"] == pytest.approx(written["cross_entropy"] + written["box_loss"])
    assert new.values_written() == [old.losses[k].item() for k in ("cross_entropy", "box_loss", "total")]


def test_a_loss_module_the_program_checkpoints_sums_its_numbers() -> None:
    """``loss_data_index/checkpoint_loss``, executed: the original's ``total_loss[0]`` of the
    0-dim sum raises on PyTorch 2.x; the rewrite sums the losses' numbers, those the original's
    ``.data`` held."""
    before, after = _run_pair("loss_data_index", "checkpoint_loss")
    torch.manual_seed(0)
    batches = [(torch.randn(n, 4), torch.randint(0, 3, (n,))) for n in (5, 3, 4)]
    after["model"].load_state_dict(before["model"].state_dict())
    with pytest.raises(IndexError, match="0-dim"):
        before["evaluate"](batches)
    expected = sum(len(x) * before["criterion"](before["model"](x), y).item() for x, y in batches) / len(batches)
    written = after["evaluate"](batches)
    assert isinstance(written, float)
    assert written == pytest.approx(expected)



def test_a_literal_written_to_a_legacy_loss_attribute_gives_what_0_3_computed() -> None:
    """``legacy_loss_reduction_args/attribute_written``, executed: on 2.x the original's
    ``size_average = False`` changes nothing (the losses average); the unsafe fix's
    ``reduction = "sum"`` gives the sums the code was written for (0.3 read the attribute)."""
    before, after = _run_pair("legacy_loss_reduction_args", "attribute_written.unsafe")
    torch.manual_seed(0)
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    assert before["criterion"](a, b).item() == pytest.approx(((a - b) ** 2).mean().item())
    assert after["criterion"](a, b).item() == pytest.approx(((a - b) ** 2).sum().item())
    scores, labels, weight = torch.randn(5, 3), torch.tensor([0, 1, 2, 1, 0]), torch.rand(3)
    summed = torch.nn.functional.cross_entropy(scores, labels, weight=weight, reduction="sum")
    assert after["Classifier"](weight).loss(scores, labels).item() == pytest.approx(summed.item())
    assert before["Classifier"](weight).loss(scores, labels).item() != pytest.approx(summed.item())


def test_a_checkpoint_of_whole_objects_is_one_whichever_save_wrote_it() -> None:
    """TFD015 asks the same fact as the losses (``facts.checkpoints``): a load unpacked into the
    names one of the file's saves stores is a checkpoint of whole objects, even where another save
    stores other names (which only the question of what each name holds must rule out)."""
    source = (FIXTURE_ROOT / "loss_data_index" / "checkpoint_other_names.unsafe.in.py").read_text(encoding="utf-8")
    codemods = [c for c in all_codemods() if c.code == "TFD015"]
    out = transform_source(source, codemods, filename="x.py", options=RunOptions(unsafe_fixes=True))
    assert 'model, criterion = torch.load(f, map_location="cpu", weights_only=False)' in out.text
    assert any("saves whole" in f.message for f in out.findings)
