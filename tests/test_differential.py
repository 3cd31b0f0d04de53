"""Issue 21, the proof harness: every safe fixture rewrite is executed before and after.

For every ``tests/fixtures/<codemod>/<case>.in.py`` of a SAFE codemod and every ``.noop.py``,
the original and the tool's safe output (every codemod, safe fixes only) run in fresh processes
(see ``tests/differential.py``) on the ``cpu`` leg (``.cuda()`` a recorded move to the CPU) and
the ``gpu`` leg (CUDA "available", ``meta`` playing the GPU); what a user can observe must be
equal. A fixture whose original cannot run as it is (an undefined ``args``, ``model``…) is
reported as not executable (skipped with the reason), never counted as a pass.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from differential import compare, not_executable, python3, rewrite, run_sources
from torchfix_device.codemods.catalog import all_codemods, rule_slug

pytestmark = pytest.mark.xdist_group("differential-fixtures")  # one batch of executions, run once (see pyproject.toml)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAFE = {rule_slug(c.__module__): c.safe for c in all_codemods()}
LEGS = ("cpu", "gpu")

KNOWN_DIFFERENCES: dict[str, str] = {}
"""fixture id -> issue 21 reason: a wrong SAFE rewrite found on today's code (strict xfail)."""


def _fixtures() -> list[Path]:
    paths = []
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name in SAFE):
        if SAFE[folder.name]:
            # an input of the token pass that only --unsafe-fixes makes Python 3 is refused by
            # the safe rewrite: nothing to execute after
            paths += [
                p for p in sorted(folder.glob("*.in.py"))
                if ".unsafe." not in p.name or python3(p.read_text(encoding="utf-8"))
            ]
        paths += sorted(folder.glob("*.noop.py"))
    return paths


RUN_AS_THE_OUT = {
    "iterator_next_method/generator.in.py": "a generator's Python 2 `.next()` cannot be given back "
    "(its type cannot be patched): the .out's `next(gen)` is what Python 2 ran",
    "py2_iterator_as_list/replay_buffer.in.py": "Python 2's list-returning `zip` cannot be given back "
    "without changing every library that calls it: the .out's `list(zip(...))` is what Python 2 ran "
    "(tests/test_py2_iterator_as_list.py runs the original under Python 2's builtins)",
    "py2_iterator_as_list/used_as_lists.in.py": "Python 2's list-returning `zip`, `map` and `filter` "
    "cannot be given back without changing every library that calls them: the .out's `list(...)` is "
    "what Python 2 ran (tests/test_py2_iterator_as_list.py runs the original under Python 2's builtins)",
}
"""fixture id -> why its original cannot run on Python 3 / torch 2.x even under ``verify.legacy``'s
shims, so that its ``.out.py``, the same program in today's spelling, stands for it."""


def _before(path: Path) -> str:
    """The program before the rewrite. An input of the token pass (``.cuda(async=True)``)
    cannot even be compiled by Python >= 3.7: its ``.out.py``, the same program with
    ``non_blocking=`` written by hand, stands for it; so does a fixture of :data:`RUN_AS_THE_OUT`."""
    text = path.read_text(encoding="utf-8")
    if python3(text) and f"{path.parent.name}/{path.name}" not in RUN_AS_THE_OUT:
        return text
    return path.with_name(path.name.replace(".in.py", ".out.py")).read_text(encoding="utf-8")


PATHS = _fixtures()


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@lru_cache(maxsize=1)
def _results() -> dict[str, dict]:
    """Run every fixture, before and after, on both legs, in one worker (forks per run)."""
    jobs, keys, unchanged = [], [], set()
    for path in PATHS:
        before = _before(path)
        after = rewrite(path.read_text(encoding="utf-8"), str(path))
        sides = [("before", before), ("after", after)]
        if after == before:  # a trap left byte-identical: the same program, executed once
            unchanged.add(_id(path))
            sides = sides[:1]
        for leg in LEGS:
            for side, source in sides:
                jobs.append({"source": source, "leg": leg, "filename": str(path)})
                keys.append((_id(path), leg, side))
    records = run_sources(jobs)
    results: dict[str, dict] = {}
    for (fixture, leg, side), record in zip(keys, records):
        results.setdefault(fixture, {}).setdefault(leg, {})[side] = record
    for fixture in unchanged:  # nothing to compare but the text, which test_fixtures holds
        for leg in LEGS:
            results[fixture][leg]["after"] = results[fixture][leg]["before"]
    return results


def summary() -> dict[str, list[str]]:
    """Fixture ids by outcome: equal, different, not executable (for the report)."""
    out: dict[str, list[str]] = {"equal": [], "different": [], "not executable": []}
    for fixture, legs in _results().items():
        if not_executable(legs["cpu"]["before"]):
            out["not executable"].append(f"{fixture} ({legs['cpu']['before']['error']})")
        elif any(compare(legs[leg]["before"], legs[leg]["after"]) for leg in LEGS):
            out["different"].append(fixture)
        else:
            out["equal"].append(fixture)
    return out


def _params():
    for path in PATHS:
        marks = []
        if _id(path) in KNOWN_DIFFERENCES:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[_id(path)]))
        yield pytest.param(path, id=_id(path), marks=marks)


def test_there_are_fixtures_to_prove() -> None:
    assert len(PATHS) > 40
    assert any(not not_executable(legs["cpu"]["before"]) for legs in _results().values())


@pytest.mark.parametrize("path", list(_params()))
def test_safe_rewrite_keeps_behaviour(path: Path) -> None:
    legs = _results()[_id(path)]
    if not_executable(legs["cpu"]["before"]):
        pytest.skip(f"not executable as it is: {legs['cpu']['before']['error']}: {legs['cpu']['before']['message'][:120]}")
    diffs = {leg: compare(legs[leg]["before"], legs[leg]["after"]) for leg in LEGS}
    assert diffs == {leg: [] for leg in LEGS}


def test_harness_sees_a_difference() -> None:
    """The harness itself: a rewrite that drops a user's flag is caught (not a vacuous pass)."""
    before = "import torch\nflag = False\nx = torch.ones(2)\nif flag:\n    x = x.cuda()\nprint(x.device)\n"
    after = "import torch\nflag = False\nx = torch.ones(2)\nx = x.to('cuda')\nprint(x.device)\n"
    records = run_sources([{"source": s, "leg": "gpu"} for s in (before, after)])
    assert compare(*records)
