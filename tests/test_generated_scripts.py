"""Issue 21, the proof harness: generated legacy scripts keep their behaviour through the tool.

``tests/generated.py`` builds runnable scripts from positive patterns and traps; for each one
the tool's safe output must compile, a second run must change nothing, and before/after must be
observably equal with the user's ``--no-cuda`` flag off and on, on a CPU machine and on one
where CUDA is available (``meta`` playing the GPU); with ``--no-cuda`` nothing may end up off the
CPU. The examples of one hypothesis call run in one worker process (a fork per execution).

Pieces the tool gets wrong today are listed in ``generated.KNOWN_ISSUE_21``: the property test
leaves them out, and one strict-xfail test per entry holds the wrong rewrite until it is fixed.
"""

from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import differential
import generated
from generated import FLAGS, KNOWN_ISSUE_21, PIECES, check_examples, examples, problems

pytestmark = pytest.mark.xdist_group("generated-scripts")  # one batch of executions, run once (see pyproject.toml)

BATCH = 6


@lru_cache(maxsize=1)
def _single_pieces() -> dict[str, list[dict]]:
    """Every piece alone, with each flag spelling where it tests the flag, checked in one worker."""
    batch = [((kind, flag),) for kind in PIECES for flag in (FLAGS if "{flag}" in PIECES[kind] else FLAGS[:1])]
    out: dict[str, list[dict]] = {}
    for result in check_examples(batch):
        out.setdefault(result["example"][0][0], []).append(result)
    return out


@settings(max_examples=2, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(examples(exclude_known=True), min_size=BATCH, max_size=BATCH))
def test_generated_scripts_keep_behaviour(batch) -> None:
    failures = {}
    for result in check_examples(batch):
        found = problems(result)
        if found:
            failures[result["example"]] = found
    assert failures == {}


@pytest.mark.parametrize("kind", [k for k in PIECES if k not in KNOWN_ISSUE_21])
def test_each_piece_alone_keeps_behaviour(kind: str) -> None:
    results = _single_pieces()[kind]
    assert {r["example"]: problems(r) for r in results} == {r["example"]: [] for r in results}


@pytest.mark.parametrize(
    "kind",
    [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=KNOWN_ISSUE_21[k])) for k in KNOWN_ISSUE_21],
)
def test_known_issue_21_piece(kind: str) -> None:
    """Holds a wrong rewrite found by the generator; XPASS (a failure) once it is fixed: then
    remove the entry from ``generated.KNOWN_ISSUE_21`` so the property test covers it."""
    results = _single_pieces()[kind]
    assert [problems(r) for r in results] == [[] for _ in results]


def test_the_checks_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: a wrong rewrite is reported as a behaviour difference. The wrong rewrite is
    issue 21 #1 as it was: the device of the user's flag replaced by one that asks
    ``torch.cuda.is_available()`` alone, so ``--no-cuda`` moves and loads onto the GPU."""
    flagged = '"cuda" if args.cuda and torch.cuda.is_available() else "cpu"'
    made: list[str] = []

    def wrong(text: str, filename: str = "<generated>") -> str:
        out = differential.rewrite(text, filename)
        made.append(out)
        return out.replace(flagged, '"cuda" if torch.cuda.is_available() else "cpu"')

    monkeypatch.setattr(generated, "rewrite", wrong)
    results = check_examples([(("torch_load", "args.cuda"),), (("tensor_move", "use_cuda"),), (("flag_ifexp", "args.cuda"),)])
    assert all(flagged in out for out in made[::2])  # the tool's own output had the flag's device
    assert all(problems(result) for result in results)


def test_every_trap_and_positive_is_generated() -> None:
    assert set(generated.POSITIVES) >= {"tensor_move", "module_move", "layer_list", "loss_data", "variable",
                                        "flag_ifexp", "tensor_alias", "flag_parameter", "flag_in_main",
                                        "torch_load", "size_average", "factory_in_forward"}
    assert set(KNOWN_ISSUE_21) <= set(PIECES)
    assert len(generated.TRAPS) == 9
