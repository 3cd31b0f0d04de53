"""TFD001 on ``assert torch.cuda.is_available()``, executed before and after ``--unsafe-fixes``.

The fixture ``cuda_call/asserts_a_gpu.unsafe.in.py`` runs in fresh processes
(``tests/differential.py``, torch seeded with 0) on the ``gpu`` leg (CUDA "available", ``meta``
playing the GPU) and the ``bare`` leg (this machine's torch as it is: no CUDA, nothing patched).
With a GPU the program does what it did; without one the original stops at its assert and the
migrated program runs on the CPU, printing the model's output computed here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from differential import compare, run_sources
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.options import RunOptions

pytestmark = pytest.mark.xdist_group("cuda-assert")  # one batch of executions, run once

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "cuda_call" / "asserts_a_gpu.unsafe.in.py"
LEGS = ("gpu", "bare")


def _migrated(unsafe: bool) -> str:
    source = FIXTURE.read_text(encoding="utf-8")
    return transform_source(source, all_codemods(), filename=str(FIXTURE), options=RunOptions(unsafe_fixes=unsafe)).text


@lru_cache(maxsize=1)
def _results() -> dict:
    sides = {"before": FIXTURE.read_text(encoding="utf-8"), "safe": _migrated(False), "unsafe": _migrated(True)}
    keys = [(leg, side) for leg in LEGS for side in sides]
    records = run_sources([{"source": sides[side], "leg": leg, "filename": str(FIXTURE)} for leg, side in keys])
    return dict(zip(keys, records))


def test_only_the_unsafe_fix_takes_the_assert_away() -> None:
    safe, unsafe = _migrated(False), _migrated(True)
    assert "assert torch.cuda.is_available()" in safe and "assert cuda.is_available()" in safe
    asserts = [line for line in unsafe.splitlines() if line.strip().startswith("assert")]
    assert asserts == [] and "is_available()," not in unsafe
    assert ".to(device)" in safe and ".to(device)" in unsafe


def test_with_a_gpu_nothing_observable_changes() -> None:
    before = _results()[("gpu", "before")]
    assert before["error"] is None and before["stdout"].strip()
    assert compare(before, _results()[("gpu", "unsafe")]) == []


def test_without_a_gpu_the_assert_stopped_it_and_the_migrated_program_runs_on_the_cpu() -> None:
    before, safe, unsafe = (_results()[("bare", side)] for side in ("before", "safe", "unsafe"))
    assert before["error"] == "AssertionError" and "needs a GPU" in before["message"]
    assert safe["error"] == "AssertionError"  # the safe tier keeps it: the script still stops
    assert unsafe["error"] is None
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    expected = torch.nn.Linear(3, 1)(torch.ones(2, 3)).sum().item()
    assert unsafe["stdout"] == f"{expected}\n"
    assert {s["device"] for s in unsafe["modules"]["model"]["state"].values()} == {"cpu"}
