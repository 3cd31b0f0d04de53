"""TFD001 on ``x.cuda(i)``: ``x.to(torch.device("cuda", i))`` where ``i`` is an int, executed.

The programs run before and after the rewrite (``tests/differential.py``, one worker) on three
legs: ``cpu`` (``.cuda()`` a recorded move to the CPU), ``gpu`` (CUDA "available", ``meta``
playing the GPU) and ``bare`` (this machine's torch as it is: no CUDA, nothing patched, so a
CUDA move raises what it raises for a user without a GPU). What a user observes must be equal:
printed output, exception, devices and values of tensors, modules' parameters and outputs.

One difference is torch's own, not the rewrite's: without CUDA, torch 2.13's ``.cuda(0)`` raises
``RuntimeError`` ("Cannot access accelerator device when none is available") where
``.to(torch.device("cuda", 0))`` raises what ``.cuda()`` raises there (``AssertionError``
"Torch not compiled with CUDA enabled" on a CPU build). The ``bare`` leg checks that both fail
at the same place with exactly the errors torch gives each spelling (probed on the same leg).

The stand-in legs ignore the index (``meta`` has none), so the index itself is checked on the
``bare`` leg, where torch validates it: a negative one raises the same error either way.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from differential import compare, rewrite, run_sources
from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source

pytestmark = pytest.mark.xdist_group("gpu-index")  # one batch of executions, run once

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cuda_call"
LEGS = ("cpu", "gpu", "bare")
DEVICE = 'torch.device("cuda", '

GUARDED = """\
import torch
import torch.nn as nn

model = nn.Linear(3, 2)
image = torch.randn(1, 3)
if torch.cuda.is_available():
    model.cuda(0)
    inputs = image.cuda(0)
else:
    inputs = image
out = model(inputs)
print(out.device, tuple(out.shape))
"""
NEGATIVE = """\
import torch

x = torch.ones(2)
try:
    x = x.cuda(-1)
except RuntimeError as exc:
    print("refused:", exc)
print(x.device)
"""
PER_GPU = """\
import torch
import torch.nn as nn

replicas = []
for i in range(1):
    replicas.append(nn.Linear(3, 2).cuda(i))
out = replicas[0](torch.randn(1, 3).cuda(len(replicas) - 1))
print(out.device, tuple(out.shape))
"""
CAUGHT = """\
import torch

x = torch.ones(2)
try:
    x = x.cuda(0)
except RuntimeError:
    print("no gpu here")
print(x.device)
"""
STRING = """\
import torch

x = torch.ones(2).cuda("cuda:0")
"""
PROBES = {
    "cuda(0)": "import torch\ntorch.ones(1).cuda(0)\n",
    "to(cuda, 0)": 'import torch\ntorch.ones(1).to(torch.device("cuda", 0))\n',
}
CASES = {
    # name: (source, unsafe, argv sets)
    "gpu_index.in.py": ((FIXTURES / "gpu_index.in.py").read_text(encoding="utf-8"), False, ([],)),
    "guarded": (GUARDED, False, ([],)),
    "per_gpu": (PER_GPU, False, ([],)),  # an int the facts show: a `range` loop's target, `len(...) - 1`
    "compared": ((FIXTURES / "gpu_index_compared.in.py").read_text(encoding="utf-8"), False, ([],)),
    "presumed": ((FIXTURES / "gpu_index_presumed.unsafe.in.py").read_text(encoding="utf-8"), True, ([],)),
    "flag_gpu_index": ((FIXTURES / "flag_gpu_index.in.py").read_text(encoding="utf-8"), False, ([], ["--gpu", "0"])),
}


def _after(source: str, unsafe: bool) -> str:
    if not unsafe:
        return rewrite(source)
    return transform_source(source, all_codemods(), options=RunOptions(unsafe_fixes=True)).text


@lru_cache(maxsize=1)
def _results() -> dict:
    """Every case before and after on every leg (and argv), the probes, in one worker."""
    jobs, keys = [], []
    for name, (source, unsafe, argvs) in CASES.items():
        after = _after(source, unsafe)
        for leg in LEGS:
            for argv in argvs:
                for side, text in (("before", source), ("after", after)):
                    jobs.append({"source": text, "leg": leg, "argv": argv})
                    keys.append((name, leg, " ".join(argv), side))
    for side, text in (("before", NEGATIVE), ("after", rewrite(NEGATIVE))):
        jobs.append({"source": text, "leg": "bare"})
        keys.append(("negative", "bare", "", side))
    caught_after = transform_source(CAUGHT, all_codemods(), options=RunOptions(unsafe_fixes=True)).text
    for side, text in (("before", CAUGHT), ("after", caught_after)):
        jobs.append({"source": text, "leg": "bare"})
        keys.append(("caught", "bare", "", side))
    hand = STRING.replace('.cuda("cuda:0")', '.to(torch.device("cuda", "cuda:0"))')
    for side, text in (("before", STRING), ("after", hand)):
        jobs.append({"source": text, "leg": "gpu"})
        keys.append(("string", "gpu", "", side))
    for probe, text in PROBES.items():
        jobs.append({"source": text, "leg": "bare"})
        keys.append(("probe", "bare", "", probe))
    results: dict = {}
    for (name, leg, argv, side), record in zip(keys, run_sources(jobs)):
        results.setdefault(name, {}).setdefault((leg, argv), {})[side] = record
    return results


def _no_gpu_error(record: dict) -> tuple[str | None, str]:
    return record["error"], record["message"]


@pytest.mark.parametrize("name", list(CASES))
def test_the_index_moves_and_nothing_observable_changes(name: str) -> None:
    source, unsafe, _ = CASES[name]
    after = _after(source, unsafe)
    assert DEVICE in after and after != source  # the move was rewritten, nothing else needed
    probes = _results()["probe"][("bare", "")]
    compared = 0
    for (leg, argv), sides in _results()[name].items():
        before, new = sides["before"], sides["after"]
        if leg == "bare" and before["error"] is not None:
            # no GPU: both fail at the same place, each with torch's own error for its spelling
            assert (_no_gpu_error(before), _no_gpu_error(new)) == (
                _no_gpu_error(probes["cuda(0)"]), _no_gpu_error(probes["to(cuda, 0)"])
            ), (leg, argv)
            assert before["stdout"] == new["stdout"]
        else:
            assert before["error"] is None or leg == "bare", (leg, argv, before["error"], before["message"])
            assert compare(before, new) == [], (leg, argv)
        compared += 1
    assert compared >= len(LEGS)


def test_on_the_stand_in_gpu_the_moves_reach_it() -> None:
    assert 'weights = torch.randn(3).to(torch.device("cuda", 0))' in _after(*CASES["gpu_index.in.py"][:2])
    assert "self.to(torch.device(\"cuda\", self.gpu))" in _after(*CASES["compared"][:2])
    assert _after(PER_GPU, False).count(DEVICE) == 2  # both indices are ints the facts show
    gpu = _results()["gpu_index.in.py"][("gpu", "")]["after"]
    assert gpu["error"] is None
    assert gpu["tensors"]["weights"]["device"] == gpu["tensors"]["inputs"]["device"] == "meta"
    assert {s["device"] for s in gpu["modules"]["built"]["state"].values()} == {"meta"}
    deeprl = _results()["compared"][("gpu", "")]["after"]
    assert deeprl["error"] is None and {s["device"] for s in deeprl["modules"]["net"]["state"].values()} == {"meta"}


def test_without_a_gpu_a_guarded_index_keeps_the_cpu_and_the_same_values() -> None:
    bare = _results()["guarded"][("bare", "")]
    assert bare["before"]["error"] is None and bare["before"]["stdout"].startswith("cpu (1, 2)")
    assert compare(bare["before"], bare["after"]) == [] and bare["before"]["tensors"]["out"]["values"]
    after = rewrite(GUARDED)
    assert 'inputs = image.to(torch.device("cuda", 0))' in after
    assert "if torch.cuda.is_available():" in after  # the guard tests the machine: it stays


def test_a_negative_index_is_refused_the_same_way() -> None:
    assert 'x.to(torch.device("cuda", -1))' in rewrite(NEGATIVE)
    sides = _results()["negative"][("bare", "")]
    assert "Device index must not be negative" in sides["before"]["stdout"]
    assert compare(sides["before"], sides["after"]) == []


def test_a_move_in_a_try_catching_runtime_error_waits_for_unsafe_fixes() -> None:
    """Without a GPU, torch 2.13's ``.cuda(0)`` raises ``RuntimeError`` and the rewrite an
    ``AssertionError``: under ``except RuntimeError:`` the program took the handler before and
    stops after, so the fix is unsafe there (a negative index raises RuntimeError either way)."""
    out = transform_source(CAUGHT, all_codemods())
    assert out.text == CAUGHT
    assert any(f.code == "TFD001" and not f.fixed and "`except RuntimeError` around it" in f.message for f in out.findings)
    assert DEVICE in transform_source(CAUGHT, all_codemods(), options=RunOptions(unsafe_fixes=True)).text
    sides = _results()["caught"][("bare", "")]
    assert sides["before"]["error"] is None and "no gpu here" in sides["before"]["stdout"]
    assert sides["after"]["error"] == "AssertionError"


def test_a_device_string_is_left_alone_because_the_index_form_would_raise() -> None:
    """Why an index that may be a string stays for manual review: ``.cuda("cuda:0")`` moves,
    ``torch.device("cuda", "cuda:0")`` raises ``TypeError``."""
    out = transform_source(STRING, all_codemods(), options=RunOptions(unsafe_fixes=True))
    assert out.text == STRING
    assert any(f.code == "TFD001" and not f.fixed and "is a string, not an int GPU index" in f.message for f in out.findings)
    sides = _results()["string"][("gpu", "")]
    assert sides["before"]["error"] is None and sides["after"]["error"] == "TypeError"
    assert compare(sides["before"], sides["after"])


@pytest.mark.parametrize("name", ["compared", "flag_gpu_index"])
def test_an_index_ordered_against_an_int_by_its_guard_is_fixed_by_default(name: str) -> None:
    out = transform_source(CASES[name][0], all_codemods())
    fixed = [f for f in out.findings if f.code == "TFD001" and "cuda" in f.message]
    assert fixed and all(f.fixed for f in fixed) and DEVICE in out.text


@pytest.mark.parametrize("name", ["presumed"])
def test_an_index_only_presumed_an_int_waits_for_unsafe_fixes(name: str) -> None:
    source = CASES[name][0]
    out = transform_source(source, all_codemods())
    assert out.text == source  # the safe run leaves it as it was (and the guard)
    held = [f for f in out.findings if f.code == "TFD001"]
    assert held and all(not f.fixed and "nothing shows it is an int, not a `torch.device` or a string" in f.message for f in held)


GLOBAL_REBOUND = """\
import torch

SPARE = 1


def use_spare():
    global SPARE
    SPARE = "cuda:1"


def place(x):
    return x.cuda(SPARE)
"""


def test_a_module_name_rebound_through_global_is_no_int() -> None:
    """``SPARE = 1`` at module level, ``SPARE = "cuda:1"`` in a function declaring it ``global``:
    a binding of its scope is a string, so the call is left for review (a trap kept out of the
    fixtures: ``test_scopes`` checks its shortcuts on every fixture without ``global``)."""
    for unsafe in (False, True):
        out = transform_source(GLOBAL_REBOUND, all_codemods(), options=RunOptions(unsafe_fixes=unsafe))
        assert out.text == GLOBAL_REBOUND
        assert any(f.code == "TFD001" and not f.fixed and "bound to a non-int on some path" in f.message for f in out.findings)


def test_what_survives_an_ordering_guard_is_taken_or_refused_alike_by_both_spellings() -> None:
    """Why an index ordered against an int (``if self.gpu >= 0:``) makes TFD001's fix safe: a
    string, ``None`` or a ``torch.device`` raise ``TypeError`` in the guard itself, and each
    number that passes is refused by ``.cuda(i)`` and ``torch.device("cuda", i)`` alike, or taken
    by both (then, without CUDA, both fail at the move: see the ``bare`` leg above). The one
    difference, a 0-dim tensor index, is the one the rule's documentation names."""
    torch = pytest.importorskip("torch")
    numpy = pytest.importorskip("numpy")
    from fractions import Fraction

    for refused in ("0", "cuda:0", None, torch.device("cuda", 0)):
        with pytest.raises(TypeError):
            refused >= 0  # noqa: B015 - the guard's own comparison

    def outcome(move) -> str:
        try:
            move()
        except TypeError:
            return "TypeError"
        except (RuntimeError, AssertionError):  # torch without CUDA: the index was taken
            return "taken"
        return "taken"

    seen = {}
    for number in (0, 1, numpy.int64(1), numpy.int32(0), 1.0, True, numpy.float32(1), Fraction(1), torch.tensor(1)):
        assert number >= 0
        before = outcome(lambda: torch.ones(1).cuda(number))
        after = outcome(lambda: torch.ones(1).to(torch.device("cuda", number)))
        seen[repr(number)] = (before, after)
    differ = {name: pair for name, pair in seen.items() if pair[0] != pair[1]}
    assert differ == {"tensor(1)": ("TypeError", "taken")}, seen
    assert seen["1"] == ("taken", "taken") and seen["1.0"] == ("TypeError", "TypeError")
