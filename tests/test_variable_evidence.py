"""TFD009 on evidence (issue 20, idiom 5): ``Variable(x)`` → ``x`` is a safe fix only where ``x``
provably cannot require grad, and ``volatile=True`` in an evaluation loop puts the loop under
``torch.no_grad()``. Each fixture's ``.in.py`` and ``.out.py`` run on CPU and what a user
observes is compared; the sites left unsafe are shown to be real traps (the unsafe rewrite
changes what the program does there) and to name the evidence that is missing."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import types
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from conftest import run_cli
from torchfix_device.options import RunOptions
from torchfix_device.syntax import traversal
from torchfix_device.facts.name_flow import reaching_bindings
from torchfix_device.codemods.variable_wrapper import VariableWrapper
from torchfix_device.engine import transform_source

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).parent / "fixtures" / "variable_wrapper"


# -- running a fixture -------------------------------------------------------------------------
def _fake_torchvision() -> dict[str, types.ModuleType]:
    """A torchvision stand-in (CI has none): an MNIST-like data set of seeded uint8 images and
    the transforms the fixtures use, each as torchvision defines it."""
    vision, datasets, transforms = (types.ModuleType(n) for n in ("torchvision", "torchvision.datasets", "torchvision.transforms"))

    class MNIST(torch.utils.data.Dataset):
        def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
            generator = torch.Generator().manual_seed(0 if train else 1)
            self.data = torch.randint(0, 256, (8, 28, 28), generator=generator, dtype=torch.uint8)
            self.targets = torch.randint(0, 10, (8,), generator=generator)
            self.train_data = self.test_data = self.data  # the names of torchvision 0.2
            self.transform = transform

        def __len__(self):
            return len(self.data)

        def __getitem__(self, index):
            image = self.data[index]
            return (self.transform(image) if self.transform else image), int(self.targets[index])

    class Compose:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, x):
            for step in self.steps:
                x = step(x)
            return x

    class Normalize:
        def __init__(self, mean, std):
            self.mean, self.std = mean, std

        def __call__(self, x):
            return (x - self.mean[0]) / self.std[0]

    class Resize:
        def __init__(self, size):
            self.size = size

        def __call__(self, image):
            scaled = torch.nn.functional.interpolate(image[None, None].float(), size=(self.size, self.size))
            return scaled[0, 0].to(image.dtype)

    datasets.MNIST = MNIST
    transforms.Compose, transforms.Normalize, transforms.Resize = Compose, Normalize, Resize
    transforms.ToTensor = lambda: (lambda image: image.float().div(255).unsqueeze(0))
    transforms.Lambda = lambda f: f
    vision.datasets, vision.transforms = datasets, transforms
    return {"torchvision": vision, "torchvision.datasets": datasets, "torchvision.transforms": transforms}


def _run(source: str, name: str, args: tuple[str, ...] = ()) -> tuple[dict, str]:
    """Execute ``source`` (a fixture, before or after) as a fresh module, given the
    command-line arguments ``args``; its namespace and what it printed."""
    namespace: dict = {"__name__": f"fixture_{name}"}
    out = io.StringIO()
    saved = {k: sys.modules.get(k) for k in _fake_torchvision()}
    sys.modules.update(_fake_torchvision())
    argv, sys.argv = sys.argv, [name, *args]
    try:
        torch.manual_seed(0)
        with contextlib.redirect_stdout(out):
            exec(compile(source, name, "exec"), namespace)
    finally:
        sys.argv = argv
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module
    return namespace, out.getvalue()


def _tensors(namespace: dict) -> dict[str, tuple]:
    return {
        name: (str(v.dtype), tuple(v.shape), v.requires_grad, v.detach().double().flatten().tolist())
        for name, v in namespace.items() if isinstance(v, torch.Tensor)
    }


def _before_after(stem: str, unsafe: bool = False) -> tuple[tuple[dict, str], tuple[dict, str]]:
    before = (FIXTURES / f"{stem}.in.py").read_text(encoding="utf-8")
    after = transform_source(before, [VariableWrapper], options=RunOptions(unsafe_fixes=unsafe)).text
    if not unsafe:
        assert after == (FIXTURES / f"{stem}.out.py").read_text(encoding="utf-8")
    return _run(before, f"{stem}_before"), _run(after, f"{stem}_after")


@lru_cache(maxsize=None)
def _messages(stem: str, unsafe: bool = False) -> Mapping[int, str]:
    """Line → the messages of the findings on it (joined): one run per fixture and tier, read by
    each of its parametrised cases."""
    source = (FIXTURES / f"{stem}.in.py").read_text(encoding="utf-8")
    found: dict[int, str] = {}
    for finding in transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=unsafe)).findings:
        found[finding.line] = f"{found[finding.line]}\n{finding.message}" if finding.line in found else finding.message
    return MappingProxyType(found)


# -- the safe rewrites keep what a user observes ------------------------------------------------
@pytest.mark.parametrize("stem", ["data_loader", "torchvision_loader", "local_evidence", "requires_grad", "refilled_attribute", "as_tensor", "data_of_any_object", "command_line", "earlier_binding", "registered_elsewhere", "random_fills", "detach_kept"])
def test_safe_unwraps_keep_what_the_program_does(stem: str) -> None:
    (before, printed_before), (after, printed_after) = _before_after(stem)
    assert printed_before and printed_before == printed_after
    tensors = _tensors(before)
    assert tensors and tensors == _tensors(after)


def test_data_loader_batches_stay_batches_without_grad() -> None:
    (before, _), (after, _) = _before_after("data_loader")
    assert not after["first"].requires_grad and torch.equal(before["first"], after["first"])
    assert after["train_epoch"].__code__.co_names.count("Variable") == 0


def test_requires_grad_rewrites_make_the_same_leaves() -> None:
    (before, _), (after, _) = _before_after("requires_grad")
    for name in ("w", "x", "m", "big", "v", "u"):
        old, new = before[name], after[name]
        assert (old.dtype, old.requires_grad, old.is_leaf) == (new.dtype, new.requires_grad, new.is_leaf)
        assert torch.equal(old.detach(), new.detach())
    assert after["m"].dtype == torch.float32  # integers written as floats: torch.Tensor's dtype
    assert not after["w0"].requires_grad and after["w0"].grad is None  # `w0` itself untouched
    assert torch.equal(after["w"].grad, before["w"].grad)


def test_integer_lists_follow_the_default_dtype() -> None:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        (before, _), (after, _) = _before_after("requires_grad")
        assert before["m"].dtype == after["m"].dtype == before["x"].dtype == after["x"].dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)


# -- volatile=True: the loop under torch.no_grad() ------------------------------------------------
def test_volatile_loop_builds_no_graph_as_in_pytorch_0_3() -> None:
    (before, printed_before), (after, printed_after) = _before_after("volatile_loop")
    assert printed_before == printed_after
    correct_before, outputs_before = before["evaluate"]()
    correct_after, outputs_after = after["evaluate"]()
    assert correct_before == correct_after and len(outputs_after) == 3
    for old, new in zip(outputs_before, outputs_after):
        assert torch.equal(old.detach(), new)
        # On torch 2.x `volatile` is ignored, so the original builds a graph; 0.3 built none,
        # which is what the loop under torch.no_grad() gives.
        assert old.requires_grad and old.grad_fn is not None
        assert not new.requires_grad and new.grad_fn is None
    assert before["nested"]() == after["nested"]()
    # A loop fed by a volatile input made before it (a generation loop feeding back its state).
    old, new = before["generate"](4), after["generate"](4)
    assert torch.equal(old.detach(), new) and old.requires_grad and not new.requires_grad
    assert torch.is_grad_enabled()


def test_volatile_loops_left_alone_say_why() -> None:
    messages = _messages("volatile_loop")
    assert "the loop it feeds is left as it is: it also trains (`.zero_grad()`)" in messages[23]
    assert "the loop it feeds is left as it is: it holds a `yield`" in messages[33]
    assert "the loop it feeds now runs under `with torch.no_grad():`" in messages[14]
    assert messages[13].startswith("`volatile=True` inputs")  # the wrapped `for`
    assert "the loop it feeds now runs under" in messages[46] and messages[47].startswith("`volatile=True` inputs")
    assert "the loop it feeds is left as it is: it also trains (`.zero_grad()`)" in messages[54]
    assert "the loop it feeds is left as it is: the code after it trains (`.backward()`)" in messages[64]


def test_a_loop_that_trains_through_a_helper_stays_out_of_no_grad() -> None:
    """Issue 31: the loop's volatile input is unwrapped, but the loop calls ``step()``, which
    trains: under ``torch.no_grad()`` that training fails ("does not require grad"). Executed:
    the rewrite trains as the original does, and the wrapping the tool used to write fails."""
    (_, printed_before), (_, printed_after) = _before_after("volatile_loop_helper")
    assert printed_after == printed_before and printed_before.count(",") == 2
    assert "it also trains (`.zero_grad()` in `step`)" in _messages("volatile_loop_helper")[20]
    source = (FIXTURES / "volatile_loop_helper.out.py").read_text(encoding="utf-8")
    loop = "    for x in batches:\n        x = x  # the loop trains through step(): no torch.no_grad() around it\n        losses.append(round(step(optimizer, x).item(), 4))\n"
    assert loop in source
    wrapped = source.replace(loop, "    with torch.no_grad():\n" + "".join("    " + line + "\n" for line in loop.splitlines()))
    with pytest.raises(RuntimeError, match="does not require grad"):
        _run(wrapped, "volatile_loop_helper_wrapped")


# -- what stays unsafe, and why ------------------------------------------------------------------
@pytest.mark.parametrize(
    "stem, line, missing",
    [
        ("data_loader", 36, "`batch` is an item of `custom`: a `DataLoader` with a `collate_fn=` of its own"),
        ("data_loader", 41, "`x` is an item of `data`: `data` is a parameter of `evaluate`"),
        ("torchvision_loader", 26, "`transforms.Lambda` runs any code"),
        ("local_evidence", 62, "`x` is a parameter of `unknown`"),
        ("local_evidence", 69, "`x` is a parameter of `one_path`"),
        ("local_evidence", 73, "`marked` is changed in place (`marked.requires_grad = ...`)"),
        ("local_evidence", 77, "`copy` is changed in place (`copy.requires_grad_()`)"),
        ("local_evidence", 83, "`grown` is changed in place (`grown.add_(...)` with a value that may require grad)"),
        ("local_evidence", 86, "`same` is changed in place (`same.requires_grad_()`)"),
        ("local_evidence", 100, "`self.table` may be given a value that requires grad: `w` is a parameter of `shift`"),
        ("local_evidence", 127, "`self.w` is an attribute whose value this file does not show"),
        ("local_evidence", 127, "`self.never_set` is an attribute whose value this file does not show"),
        ("local_evidence", 133, "`w` is an item of `layer.parameters()`"),
        ("refilled_attribute", 35, "it is stored in `self.grid1`, and nothing shows that nothing else holds the object it held"),
        ("refilled_attribute", 46, "it is stored in `self.grid2`, and nothing shows that nothing else holds the object it held"),
        ("refilled_attribute", 57, "`self.base` is an attribute whose value this file does not show"),
        ("refilled_attribute", 65, "`self.whole` may be given a value that requires grad: `torch.ones(...)` is given `requires_grad=`"),
        ("refilled_attribute", 75, "`self.table` is an attribute whose value this file does not show"),
        ("as_tensor", 24, "`torch.ones(...)` is given `requires_grad=`"),
        ("as_tensor", 25, "`torch.ones(...)` is given `requires_grad=`"),
        ("as_tensor", 26, "`torch.ones(...)` is given `requires_grad=`"),
        ("as_tensor", 27, "`held` is changed in place (`held.requires_grad_()`)"),
        ("command_line", 38, "`opt.shift` is a command-line value, but this file sets it"),
        ("command_line", 39, "`opt.gain` is made by `type=gain_of`, which this file does not show to make no tensor"),
        ("command_line", 48, "not shown to be grad-free (`opt.gain` is made by `type=gain_of`, which this file does not show to make no tensor)"),
        ("earlier_binding", 42, "`torch.full(...)` is given `requires_grad=`"),
        ("earlier_binding", 49, "`x` is changed in place (`x.add_(...)` with a value that may require grad)"),
        ("registered_elsewhere", 36, "`self.grid` is an attribute whose value this file does not show"),
        ("random_fills", 37, "`p` is a parameter of `dropped`"),
        ("data_of_any_object", 39, "`ps.data` may be a `PackedSequence`'s data, which can require grad (this file packs sequences)"),
    ],
)
def test_sites_without_evidence_keep_the_detach_and_say_what_is_missing(stem: str, line: int, missing: str) -> None:
    """The safe fix keeps the detach `Variable` did (`x.detach()`: executed above, in
    `test_safe_unwraps_keep_what_the_program_does`); plain `x` is the unsafe fix, held back
    without `--unsafe-fixes`. Both messages name the missing evidence."""
    safe = _messages(stem)[line]
    assert ".detach()`, which is what `Variable` did (`--unsafe-fixes` writes plain `" in safe
    assert "; unsafe:" not in safe and missing in safe
    unsafe = _messages(stem, unsafe=True)[line]
    assert "; unsafe: `Variable` also detached it from the autograd graph" in unsafe
    assert missing in unsafe


def test_the_traps_are_real() -> None:
    """Where evidence is missing the unsafe rewrite does change the program: shown for a
    value changed in place (directly, through an alias, before the wrap), a parameter, a
    collate_fn."""
    (before, printed_before), (after, printed_after) = _before_after("local_evidence", unsafe=True)
    # `later` (changed through `marked`), `kept` (through an alias), `grown` (by a parameter in
    # place before the wrap): without grad before, requiring grad after the unsafe rewrite
    for name in ("later", "kept", "seen", "base"):
        assert not before[name].requires_grad and after[name].requires_grad, name
    assert printed_before != printed_after
    leaf = torch.ones(2, requires_grad=True)
    assert not before["unknown"](leaf).requires_grad and after["unknown"](leaf).requires_grad
    assert not any(w.requires_grad for w in before["weights"]) and all(w.requires_grad for w in after["weights"])
    holder = before["Holder"](), after["Holder"]()
    holder[0].never_set = holder[1].never_set = torch.zeros(1)
    assert not holder[0]()[0].requires_grad and holder[1]()[0].requires_grad  # a registered parameter
    source = (FIXTURES / "data_loader.in.py").read_text(encoding="utf-8").replace(
        "collate_fn=lambda batch: batch", "collate_fn=lambda batch: [[leaf * 2]]"
    ).replace("custom = DataLoader", "leaf = torch.ones(2, requires_grad=True)\ncustom = DataLoader")
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    assert "item = batch[0][0]" in unsafe
    old, new = _run(source, "collate_before")[0], _run(unsafe, "collate_after")[0]
    assert not old["item"].requires_grad and new["item"].requires_grad


def test_attribute_and_as_tensor_traps_are_real() -> None:
    """The sites left unsafe in these fixtures do change the program when unwrapped: the old
    object of `self.grid = Variable(self.grid)` has another holder made to require grad later
    (or is a view of a tensor changed in place), `self.table` is made to require grad through
    another receiver, and `torch.as_tensor` (or a legacy type alias) of a tensor returns it (or
    one in its graph)."""
    printed = {}
    for stem in ("refilled_attribute", "as_tensor"):
        source = (FIXTURES / f"{stem}.in.py").read_text(encoding="utf-8")
        unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
        assert "Variable(" not in unsafe.replace("from torch.autograd import Variable", "")
        printed[stem] = _run(source, f"{stem}_before")[1].splitlines(), _run(unsafe, f"{stem}_unsafe")[1].splitlines()
    before, after = printed["refilled_attribute"]
    # Through, Kept, Stashed, Shared, Viewed: no grad before, grad once unwrapped
    assert " ".join(before[2:]).split() == ["False"] * 5
    assert " ".join(after[2:]).split() == ["True"] * 5
    before, after = printed["as_tensor"]
    assert (before[-1], after[-1]) == ("False False False False", "True True True True")  # same, wider, typed, base (through held)


def test_a_packed_sequences_data_is_no_evidence() -> None:
    """A `PackedSequence`'s `.data` can require grad: `Variable(ps.data * 2)` unwrapped keeps
    the grad that `Variable` cut, so in a file that packs sequences it stays unsafe."""
    source = (FIXTURES / "data_of_any_object.in.py").read_text(encoding="utf-8")
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    assert "return ps.data * 2" in unsafe
    old, new = _run(source, "packed_before")[0], _run(unsafe, "packed_unsafe")[0]
    assert not old["scaled"].requires_grad and new["scaled"].requires_grad


def test_command_line_values_are_no_tensors_unless_made_so() -> None:
    """`opt.img_size` of `parser.parse_args()` is an int (a `Resize` size in a torchvision
    pipeline, a factory size); a value the file sets to a tensor, or one a `type=` of the
    project's own makes, can require grad: there the unsafe rewrite changes the program. The
    batches of the pipeline are those of before, and a command line changes them alike."""
    source = (FIXTURES / "command_line.in.py").read_text(encoding="utf-8")
    safe = transform_source(source, [VariableWrapper]).text
    assert "    real_imgs = imgs\n" in safe and "noise = torch.ones(2, opt.img_size)" in safe
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    assert "shifted = torch.zeros(2) + opt.shift" in unsafe and "gained = torch.ones(2) * opt.gain" in unsafe
    (old, printed_old), (new, printed_new) = _run(source, "command_line_before"), _run(unsafe, "command_line_unsafe")
    assert printed_old.splitlines()[-1] == "False False" and printed_new.splitlines()[-1] == "True True"
    assert not old["gained"].requires_grad and new["gained"].requires_grad
    args = ("--img_size", "7", "--batch-size", "3", "--flip")
    before, after = _run(source, "cl_args_before", args), _run(safe, "cl_args_after", args)
    assert before[1] == after[1] and "(3, 1, 7, 7)" in before[1]
    assert _tensors(before[0]) == _tensors(after[0])


COMMAND_LINE = """import argparse
import torch
from torch.autograd import Variable

parser = argparse.ArgumentParser()
{between}
parser.add_argument({option})
opt = parser.parse_args({parse})
{after}
x = Variable(torch.zeros(2) * opt.size)
"""
PLAIN = '"--size", type=int, default=3'


@pytest.mark.parametrize(
    "option, between, parse, after, why",
    [
        (PLAIN, "", "", "opt.size = torch.ones(1, requires_grad=True)", "this file sets it"),
        (PLAIN, "", "", "opt.size += torch.ones(1, requires_grad=True)", "this file sets it"),
        (PLAIN, "", "", "opt.size, y = w, 1", "this file sets it"),
        (PLAIN, "", "", "del opt.size", "this file sets it"),
        (PLAIN, "", "", "setattr(opt, 'size', w)", "`opt` is passed on"),
        (PLAIN, "", "", "vars(opt)['size'] = w", "`opt` is passed on"),
        (PLAIN, "", "", "opt.__dict__['size'] = w", "`opt.__dict__` is used"),
        (PLAIN, "", "", "fill_in(opt)", "`opt` is passed on"),
        (PLAIN, "", "", "other = opt", "`opt` is passed on"),
        (PLAIN, "", "", "globals()['opt'].size = w", "runs code it does not show"),
        (PLAIN, "", "", "opt = torch.ones(1)", "`opt` is also bound to something else"),
        (PLAIN, "parser.set_defaults(size=w)", "", "", "`parser.set_defaults`"),
        (PLAIN, "add_options(parser)", "", "", "`parser` is passed on"),
        (PLAIN, "group = parser.add_argument_group('g')", "", "", "`parser.add_argument_group`"),
        (PLAIN, "parser.add_argument(*names, default=w)", "", "", "has a name this file does not spell out"),
        (PLAIN, "parser = argparse.ArgumentParser(argument_default=w)", "", "", "`parser` is made with arguments that change what it parses"),
        (PLAIN, "int = make_tensor", "", "", "`type=int`, which this file does not show"),  # not the builtin where it is called
        (PLAIN, "", "namespace=holder", "", "`parser.parse_args(namespace=holder)` is given arguments other than strings"),
        (PLAIN, "", "args", "", "`parser.parse_args(args)` is given"),
        ('"--size", type=int, nargs="+"', "", "", "", 'a list (`nargs="+"`)'),  # a list: it may be filled later
        ('"--size", type=int, action="append"', "", "", "", '`action="append"`, which may store anything'),
        ('"--size", type=int, action=Store', "", "", "", "`action=Store`"),
        ('"--size", type=int, default=w', "", "", "", "a `default=` that is not a literal"),
        ('"--size", type=lambda s: torch.ones(1, requires_grad=True)', "", "", "", "`type=lambda s:"),
        ('"--other", type=int', "", "", "", "is no argument this file shows `parser` to add"),  # no `--size` added
        ('"--" + name, type=int', "", "", "", "has a name this file does not spell out"),  # a name not spelt out
    ],
)
def test_command_line_values_need_every_write_shown(option: str, between: str, parse: str, after: str, why: str) -> None:
    """`opt.size` of `parse_args()` stays unsafe where a write may escape this file's view,
    and says which."""
    source = COMMAND_LINE.format(option=option, between=between, parse=parse, after=after)
    (finding,) = [f for f in transform_source(source, [VariableWrapper]).findings if f.line == 10]
    assert "nothing shows it cannot require grad: `opt.size` " in finding.message and why in finding.message, finding.message


@pytest.mark.parametrize(
    "option",
    [PLAIN, '"-s", "--size", type=float', '"size", type=int', '"-s", dest="size", default=-1', '"--size", action="store_const", const=2', '"--size", action="store_true"'],
)
def test_command_line_values_shown_in_full_are_unwrapped(option: str) -> None:
    source = COMMAND_LINE.format(option=option, between="print(parser.format_help())", parse="", after="print(opt)")
    result = transform_source(source, [VariableWrapper])
    assert "x = torch.zeros(2) * opt.size\n" in result.text, result.findings[-1].message


def test_a_change_in_place_counts_where_it_reaches_the_object_read() -> None:
    """`x -= m` on the array or tensor a name held before `x = torch.from_numpy(...)` (or a
    factory) is no change of the new object read later: those reads unwrap and the program is
    the same. Where the change acts on the object read (after its binding, or in a loop
    around both), the unsafe rewrite gives it grad: it stays unsafe."""
    source = (FIXTURES / "earlier_binding.in.py").read_text(encoding="utf-8")
    safe = transform_source(source, [VariableWrapper]).text
    assert "    return image\n" in safe and "    return x\n" in safe and "outs.append(x)\n" in safe
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    old, new = _run(source, "earlier_before")[0], _run(unsafe, "earlier_unsafe")[0]
    assert not old["later"].requires_grad and new["later"].requires_grad
    assert not old["looped"][0].requires_grad and new["looped"][0].requires_grad
    assert not any(new[name].requires_grad for name in ("first", "second")) and not any(t.requires_grad for t in new["third"])


REACHING_CHANGE = """import torch
from torch.autograd import Variable

w = torch.ones(3, requires_grad=True)


def f(n):
{body}


result = f(2)
"""


@pytest.mark.parametrize(
    "body",
    [
        "    a = torch.zeros(3)\n    x = a\n    x.add_(w)\n    x = a\n    return Variable(x)",  # the same object bound again
        "    x = torch.zeros(3)\n\n    def g():\n        x.add_(w)\n\n    g()\n    return Variable(x)",  # a closure, run later
        "    x = torch.zeros(3)\n    while n:\n        out = Variable(x)\n        x.add_(w)\n        n -= 1\n    return out",
        "    x = torch.zeros(3)\n    y = x\n    x = torch.zeros(3)\n    x = y\n    y.add_(w)\n    return Variable(x)",
        "    x = torch.zeros(3)\n    out = Variable(x)\n    x = x.float()\n    x.add_(w)\n    return out",  # the object read, bound again
    ],
)
def test_a_change_that_may_reach_the_object_read_stays_unsafe(body: str) -> None:
    """The safe fix keeps `Variable`'s detach, and the result is the one of before; unwrapped
    (the unsafe fix), the object read has been given grad in place: the result requires grad."""
    source = REACHING_CHANGE.format(body=body)
    result = transform_source(source, [VariableWrapper])
    assert "return x.detach()" in result.text or "out = x.detach()" in result.text
    assert "Variable(" not in result.text and "nothing shows it cannot require grad" in result.findings[-1].message
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    assert "Variable(x)" not in unsafe and ".detach()" not in unsafe
    before, safe, unwrapped = (_run(text, f"reaching_{i}")[0]["result"] for i, text in enumerate((source, result.text, unsafe)))
    assert not before.requires_grad and not safe.requires_grad and torch.equal(before, safe)
    assert unwrapped.requires_grad
    assert not _run(source, "reaching_before")[0]["result"].requires_grad
    assert _run(unsafe, "reaching_unsafe")[0]["result"].requires_grad


def test_a_registration_hides_a_buffer_only_where_it_may_be_on_the_class() -> None:
    """`self.stack.add_module("table", ...)` on an `nn.Sequential()` registers nothing on
    `Positions`: its buffer unwraps (the program is the same). A parameter registered through
    `self.inner`, which holds a `Grid`, does reach `Grid.grid`: unwrapped, it requires grad."""
    source = (FIXTURES / "registered_elsewhere.in.py").read_text(encoding="utf-8")
    assert "return x + self.table[: x.size(0)]\n" in transform_source(source, [VariableWrapper]).text
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    old, new = _run(source, "registered_before")[0], _run(unsafe, "registered_unsafe")[0]
    assert not old["grid"].requires_grad and new["grid"].requires_grad


REGISTERED = """import torch
import torch.nn as nn
from torch.autograd import Variable


class P(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.zeros(2))

    def forward(self):
        return Variable(self.table)


class Q(nn.Module):
    def __init__(self, c):
        super().__init__()
{register}
"""


@pytest.mark.parametrize(
    "register",
    [
        "        self.add_module('table', nn.Linear(1, 1))",
        "        seq = P()\n        seq.add_module('table', nn.Linear(1, 1))",
        "        self.inner = nn.Sequential() if c else P()\n        self.inner.add_module('table', nn.Linear(1, 1))",
        "        self.inner = nn.Sequential()\n        self.inner = c\n        self.inner.add_module('table', nn.Linear(1, 1))",
        "        self.inner = nn.utils.weight_norm(c)\n        self.inner.add_module('table', nn.Linear(1, 1))",
        "        c.register_parameter('table', nn.Parameter(torch.ones(2)))",
    ],
)
def test_a_registration_that_may_be_on_the_class_hides_its_buffer(register: str) -> None:
    (finding,) = [f for f in transform_source(REGISTERED.format(register=register), [VariableWrapper]).findings if f.line == 12]
    assert "`self.table` is an attribute whose value this file does not show" in finding.message, finding.message


def test_random_fills_take_numbers_only() -> None:
    """`normal_(mean, std)` and the other random fills raise `TypeError` for a tensor that
    requires grad: whatever their parameters, only the receiver's grad reaches the result, and
    those sites unwrap. `bernoulli_(p)` takes a tensor `p`, whose grad it gives the receiver:
    unwrapped, the mask requires grad."""
    leaf = torch.tensor(0.5, requires_grad=True)
    for method, args in (("normal_", (0.0, leaf)), ("uniform_", (leaf, 1.0)), ("exponential_", (leaf,)), ("cauchy_", (0.0, leaf)),
                         ("log_normal_", (leaf, 1.0)), ("geometric_", (leaf,)), ("random_", (0, leaf))):
        with pytest.raises(TypeError):
            getattr(torch.zeros(3), method)(*args)
    source = (FIXTURES / "random_fills.in.py").read_text(encoding="utf-8")
    assert "noise = x.data.new(x.size()).normal_(0, sigma ** 2)\n" in transform_source(source, [VariableWrapper]).text
    unsafe = transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    old, new = _run(source, "fills_before")[0], _run(unsafe, "fills_unsafe")[0]
    assert not old["mask"].requires_grad and new["mask"].requires_grad


def test_refilled_attribute_is_one_object_as_before() -> None:
    """Unwrapped, `self.batch` holds the object made in `forward` (nothing else held it): the
    values, the graph of the output and the attribute's autograd state are those of before."""
    (before, _), (after, _) = _before_after("refilled_attribute")
    for side in (before, after):
        model = side["GridGen"]()
        x = torch.arange(3.0, requires_grad=True)
        out = model(x)
        out.sum().backward()
        assert not model.batch.requires_grad and model.batch.is_leaf and x.grad is not None
    assert torch.equal(before["GridGen"]()(torch.ones(2)), after["GridGen"]()(torch.ones(2)))
    assert "Variable(self.batch)" not in (FIXTURES / "refilled_attribute.out.py").read_text(encoding="utf-8")


REFILL = """import torch
from torch.autograd import Variable


class Grid(torch.nn.Module):
    def helper(self):
        return 3

    def forward(self, x):
        self.a = {made}
{between}
        self.a = Variable(self.a)
        return self.a
"""


@pytest.mark.parametrize(
    "made, between",
    [
        ("torch.zeros(3)", "        self.keep = self.a"),  # a second holder
        ("torch.zeros(3)", "        self.helper()"),  # the class's own code runs
        ("torch.zeros(3)", "        x.register(self)"),  # `self` given away
        ("torch.zeros(3)", "        self.a[0] = self.a[1]"),  # a view of the old object made
        ("torch.zeros(3)", "        while x:\n            self.a[0] = 1"),  # only `for` loops
        ("torch.zeros(3)", "        for i in x:\n            self.a[0] = 1"),  # only over a range
        ("torch.zeros(3)", "        if x:\n            self.a[0] = 1"),
        ("torch.zeros(3)", "        self.a[0] = self.helper"),  # a method: a property may run code
        ("torch.zeros(3)", "        self.a[0] = g(x)"),  # a function of the project's own
        ("torch.zeros(3, out=x)", "        pass"),  # the object `out=` holds
        ("x.new_zeros(3)", "        pass"),  # not a torch factory
        ("torch.zeros(3)", "        x = torch.zeros(3)\n        self.a = x"),  # rebound to another holder's object
    ],
)
def test_a_refilled_attribute_needs_a_new_object_only_it_holds(made: str, between: str) -> None:
    source = REFILL.format(made=made, between=between)
    (finding,) = [f for f in transform_source(source, [VariableWrapper]).findings if f.line == 12 + between.count("\n")]
    assert "nothing shows it cannot require grad" in finding.message, finding.message


def test_a_refilled_attribute_made_here_and_filled_is_unwrapped() -> None:
    between = "        for i in range(x.size(0)):\n            self.a[i % 3] = torch.ones(1) * len(x)\n        pass"
    result = transform_source(REFILL.format(made="torch.zeros(3)", between=between), [VariableWrapper])
    assert "Variable(" not in result.text.replace("from torch.autograd import Variable", "")
    assert "self.a = self.a" not in result.text and "        return self.a\n" in result.text
    assert [f.message for f in result.findings] == ["`Variable(...)` is a deprecated wrapper since PyTorch 0.4: use the tensor itself"]


SHARED_OBJECT = """import torch
from torch.autograd import Variable

w = torch.ones(3, requires_grad=True)
x = torch.zeros(3)
y = Variable(x)
y.unsqueeze_(0)
a = torch.zeros(2, 3)
b = Variable(a)
a.t_()
c = torch.zeros(3)
d = Variable(c).view(3)
d.add_(w)
e = torch.zeros(3)
f = Variable(e)[0:2]
f.add_(w[:2])
g = torch.zeros(3)
h = Variable(g)
h.tag = 1
ok = torch.zeros(3)
fine = Variable(ok).view(3)
print(x.shape, b.shape, c.requires_grad, e.requires_grad, hasattr(g, "tag"), fine.shape)
"""


def test_what_reaches_the_unwrapped_object_through_another_name_stays_unsafe() -> None:
    """Unwrapped, `y` and `x` are one object (or `d` a view of `c`): a change of its shape, a
    Python attribute set on it, an in-place change by a grad value through a view reach the
    other name, which the detached copy kept apart. Each such site stays unsafe and says why;
    the unsafe rewrite really changes what the program prints; the safe one does not."""
    result = transform_source(SHARED_OBJECT, [VariableWrapper])
    messages = {f.line: f.message for f in result.findings}
    assert "`y` is changed in place (`y.unsqueeze_()`" in messages[6]
    assert "`a` is changed in place (`a.t_()`" in messages[9]
    assert "`d` is changed in place (`d.add_(...)` with a value that may require grad)" in messages[12]
    assert "`f` is changed in place (`f.add_(...)` with a value that may require grad)" in messages[15]
    assert "`h.tag` is set" in messages[18]
    assert "(unsafe" not in messages[21] and "fine = ok.view(3)" in result.text
    unsafe = transform_source(SHARED_OBJECT, [VariableWrapper], options=RunOptions(unsafe_fixes=True)).text
    before, safe, after = (_run(text, name)[1] for text, name in ((SHARED_OBJECT, "shared_before"), (result.text, "shared_safe"), (unsafe, "shared_unsafe")))
    assert before == safe == "torch.Size([3]) torch.Size([2, 3]) False False False torch.Size([3])\n"
    assert after == "torch.Size([1, 3]) torch.Size([3, 2]) True True True torch.Size([3])\n"


def test_a_notebook_is_one_program(tmp_path: Path) -> None:
    """The DataLoader of one cell is evidence for the loops of the others."""
    cells = [
        "import torch\nfrom torch.autograd import Variable\nfrom torch.utils.data import DataLoader, TensorDataset",
        "loader = DataLoader(TensorDataset(torch.randn(4, 2), torch.zeros(4)), batch_size=2)",
        "for x, y in loader:\n    x = Variable(x, volatile=True)\n    print(x.sum())",
    ]
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c} for c in cells],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    path = tmp_path / "eval.ipynb"
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    out = run_cli("apply", "eval.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    sources = ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    assert sources[0] == "import torch\nfrom torch.utils.data import DataLoader, TensorDataset"
    assert sources[2] == "with torch.no_grad():\n    for x, y in loader:\n        print(x.sum())"


# -- the order of bindings (codemods/_name_flow.py) ------------------------------------------------
def _facets():
    """A tree's facets as :meth:`ModuleValues.tree_facet` keeps them (each computed once)."""
    known: dict = {}
    return lambda name, compute: known[name] if name in known else known.setdefault(name, compute())


def _reaching(source: str, name: str = "x") -> list[int]:
    """Lines of the bindings of ``name`` reaching its read in ``use(x)``."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    scopes, parents, positions = (wrapper.resolve(p) for p in (ScopeProvider, ParentNodeProvider, PositionProvider))
    read = next(
        n for n in scopes if isinstance(n, cst.Name) and n.value == name
        and isinstance(parents.get(n), cst.Arg) and isinstance(parents[parents[n]], cst.Call)
        and getattr(parents[parents[n]].func, "value", None) == "use"
    )
    bindings = [a.node for a in scopes[read][name]]
    scope = scopes[read].node if hasattr(scopes[read], "node") else wrapper.module
    found = reaching_bindings(scope, name, bindings, read, parents.get)
    skipping = reaching_bindings(scope, name, bindings, read, parents.get, _facets())
    assert skipping == found  # passing over statements that bind nothing changes no answer
    if found is None:
        return [-1]
    return sorted(positions[b].start.line for b in found)


@pytest.mark.parametrize(
    "source, lines",
    [
        ("x = 1\nx = 2\nuse(x)\n", [2]),
        ("x = 1\nif c:\n    x = 2\nuse(x)\n", [1, 3]),
        ("x = 1\nif c:\n    x = 2\nelse:\n    x = 3\nuse(x)\n", [3, 5]),
        ("for x in y:\n    use(x)\n    x = 2\n", [1]),
        ("x = 0\nwhile c:\n    use(x)\n    x = 2\n", [1, 4]),
        ("x = 0\nfor i in y:\n    if c:\n        x = 1\n        continue\n    x = 2\nuse(x)\n", [1, 4, 6]),
        ("x = 0\nfor i in y:\n    x = 1\n    break\n    x = 2\nuse(x)\n", [1, 3]),
        ("x = 0\ntry:\n    x = 1\n    f()\n    x = 2\nexcept E:\n    use(x)\n", [1, 3, 5]),
        ("def f(x):\n    x = g(x)\n    return use(x)\n", [2]),
        ("def f(x):\n    if c:\n        x = 1\n    return use(x)\n", [1, 3]),
        ("def f(x):\n    if c:\n        return 0\n    use(x)\n", [1]),
        ("x = 0\nif (x := 1):\n    pass\nuse(x)\n", [1, 2]),
        ("x = 0\nwith open(p) as f:\n    x = 1\nuse(x)\n", [1, 3]),
        ("x = 0\nmatch v:\n    case 1:\n        x = 1\nuse(x)\n", [-1]),
        ("x = 0\ndef g():\n    global x\n    x = 1\nuse(x)\n", [-1]),
        # statements that bind nothing, passed over where they end no path
        ("x = 0\nprint(1)\nif c:\n    y = 1\nfor i in z:\n    w = i\nuse(x)\n", [1]),
        ("x = 0\nfor i in y:\n    if c:\n        break\n    x = 1\nuse(x)\n", [1, 5]),
        ("x = 0\nfor i in y:\n    if c:\n        continue\n    w = 2\n    x = 1\nuse(x)\n", [1, 6]),
        ("def f(x):\n    if c:\n        raise E\n    else:\n        return 1\n    use(x)\n", []),
        ("def f(x):\n    try:\n        g()\n    except E:\n        return 0\n    use(x)\n", [1]),
        ("x = 0\nif c:\n    del x\nx2 = 1\nuse(x)\n", [1]),
        ("x = 0\nwhile c:\n    with m:\n        if d:\n            break\n    x = 1\nuse(x)\n", [1, 6]),
    ],
)
def test_reaching_bindings(source: str, lines: list[int]) -> None:
    assert _reaching(source) == lines


def test_passing_over_statements_changes_no_reaching_bindings_in_the_fixtures() -> None:
    """Every read of a name in a function or at module level of every fixture input: the
    bindings that reach it are the same whether the walk passes over the statements that bind
    nothing, read nothing asked and end no path (``jumps``) or goes through every statement."""
    compared = told = 0
    for path in sorted((Path(__file__).parent / "fixtures").rglob("*.in.py")):
        try:
            module = cst.parse_module(path.read_text(encoding="utf-8"))
        except cst.ParserSyntaxError:
            continue  # Python 2 inputs: the token pass's, not this walk's
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        scopes, parents = wrapper.resolve(ScopeProvider), wrapper.resolve(ParentNodeProvider)
        facet = _facets()
        for scope in {id(s): s for s in scopes.values() if s is not None}.values():
            home = getattr(scope, "node", None)
            if not isinstance(home, (cst.Module, cst.FunctionDef)):
                continue
            for access in scope.accesses:
                read = access.node
                if not isinstance(read, cst.Name):
                    continue
                bindings = [a.node for a in scope[read.value] if getattr(a, "node", None) is not None]
                found = reaching_bindings(home, read.value, bindings, read, parents.get)
                assert reaching_bindings(home, read.value, bindings, read, parents.get, facet) == found, (path, read.value)
                compared += 1
                told += found is not None
    assert compared > 3000 and told > compared // 2


# -- module-level bindings without the skeleton's analysis (codemods/_module_bindings.py) ----------
MODULE_SOURCES = [
    "import os\nimport a.b.c\nimport a.b as ab\nfrom m import n as k, o\nfrom . import rel\nfrom .pkg import t as u\n",
    "x = 1\nx: int\ny: float = 2\nz += 1\na, (b, *c) = f()\nd[0] = e.f = 3\nfor i, (j, k) in pairs:\n    q = i\n",
    "with open(p) as fh, lock:\n    w = fh.read()\ntry:\n    pass\nexcept E as err:\n    r = err\nif (n := 3):\n    pass\n",
    "def f(x):\n    g = 1\n    return g\nclass C:\n    h = 2\n@deco\ndef d(): pass\nlam = lambda v: v\nsq = [s * s for s in range(3)]\n",
    "while (m := next(it)) is not None:\n    total = m\nelse:\n    total = 0\nprint((p := 5))\n",
    "from torch.autograd import *\nfrom models import *\nimport torch\nVariable = torch.autograd.Variable\nnet = Net()\n",
]


@pytest.mark.parametrize("source", MODULE_SOURCES)
def test_module_bindings_are_libcsts(source: str) -> None:
    from torchfix_device.syntax.module_bindings import module_bindings
    from torchfix_device.syntax.scopes import ModuleSkeleton

    module = cst.parse_module(source)
    ours = module_bindings(module)
    assert not ours.everything_unknown and ours.by_name
    skeleton = ModuleSkeleton(module)
    names = {n.value for n in _walk_names(module)} | set(ours.by_name)
    compared = 0
    for name in sorted(names - ours.unknown):
        exact = {id(a.node) for a in skeleton.bindings(name) if hasattr(a, "node")}
        assert {id(b.node) for b in ours.by_name.get(name, ())} == exact, name
        compared += bool(exact)
    assert compared >= 3
    scope = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)[module]
    for name, bindings in ours.by_name.items():  # what an import gives `name.attr`
        theirs = list(scope.assignments[name])
        if len(bindings) == len(theirs) == 1 and bindings[0].imported:
            spelt = f"{name}.attr"
            assert bindings[0].qualified_names_for(spelt) == {q.name for q in theirs[0].get_qualified_names_for(spelt)}, name


@pytest.mark.parametrize("source", MODULE_SOURCES)
def test_module_bindings_skip_the_walrus_search_only_where_no_walrus_is_spelt(source: str) -> None:
    """Told the code spells no ``:=``, the search for walrus targets is skipped: the same
    answer wherever that is so; where a walrus is spelt the search finds its targets."""
    from torchfix_device.syntax.module_bindings import module_bindings

    module = cst.parse_module(source)
    full, skipped = module_bindings(module), module_bindings(module, walruses=False)
    describe = lambda found: ({k: [id(b.node) for b in v] for k, v in found.by_name.items()}, found.unknown)  # noqa: E731
    if ":=" not in source:
        assert describe(skipped) == describe(full)
    else:
        assert {"n", "m", "p"} & set(full.by_name) and not {"n", "m", "p"} & set(skipped.by_name)


def _walk_names(module: cst.Module):

    return [n for n in traversal.walk(module) if isinstance(n, cst.Name)]
