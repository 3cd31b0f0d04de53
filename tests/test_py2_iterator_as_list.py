"""TFD023, the migrated program runs: a Python 2 ``zip``/``map``/``filter`` result used as a list
raises TypeError on Python 3 before the rewrite and, after it, gives what Python 2 gave.

What Python 2 gave is computed two ways: by hand for RL-Adventure's replay-buffer sample, and by
running each safe fixture's original with Python 2's builtins (:data:`PY2_BUILTINS`: the three
return lists) next to its rewrite with Python 3's own.
"""

from __future__ import annotations

import builtins
import io
import random
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from conftest import FIXTURES  # noqa: E402
from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402
from torchfix_device.options import RunOptions  # noqa: E402

TFD023 = [c for c in all_codemods() if c.code == "TFD023"]
FOLDER = FIXTURES / "py2_iterator_as_list"
PY2_BUILTINS = {
    "zip": lambda *columns: list(builtins.zip(*columns)),
    "map": lambda function, *columns: list(builtins.map(function, *columns)),
    "filter": lambda function, values: list(builtins.filter(function, values)),
}
"""Python 2's list-returning builtins (for the originals only; a ``map`` of ``None`` aside)."""


def _rewrite(source: str, unsafe: bool = False):  # noqa: ANN202
    return transform_source(source, TFD023, filename="program.py", options=RunOptions(unsafe_fixes=unsafe))


def _run(source: str, py2: bool = False) -> dict:
    """What a user observes running ``source``: the namespace and the printed text, or the
    exception (type and message)."""
    namespace: dict = {"__name__": "program", **(PY2_BUILTINS if py2 else {})}
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            exec(compile(source, "program.py", "exec"), namespace)
    except Exception as exc:  # the exception is what a user observes
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"namespace": namespace, "printed": out.getvalue()}


SAMPLE = textwrap.dedent(
    """
    import random
    import numpy as np

    def sample(memory, batch_size):
        samples = random.sample(memory, batch_size)
        batch = zip(*samples)
        states = np.concatenate(batch[0])
        actions = batch[1]
        rewards = np.array(batch[2])
        return states, actions, rewards, len(batch)

    random.seed(4)
    memory = [(np.full((1, 2), i), i % 3, float(i)) for i in range(6)]
    result = sample(memory, 3)
    """
)


def test_the_replay_buffer_sample_raises_before_and_gives_python_2s_batch_after() -> None:
    out = _rewrite(SAMPLE)
    assert "batch = list(zip(*samples))" in out.text and out.text.count("list(") == 1, out.text
    assert [(f.fixed, f.unsafe) for f in out.findings] == [(True, False)]

    before = _run(SAMPLE)
    assert before == {"raised": "TypeError", "message": "'zip' object is not subscriptable"}
    after = _run(out.text)
    assert "raised" not in after, after
    states, actions, rewards, count = after["namespace"]["result"]

    random.seed(4)  # the same draw, the batch transposed by hand as Python 2's zip gave it
    memory = [(np.full((1, 2), i), i % 3, float(i)) for i in range(6)]
    picked = random.sample(memory, 3)
    assert np.array_equal(states, np.concatenate([state for state, _, _ in picked]))
    assert states.shape == (3, 2)
    assert actions == tuple(action for _, action, _ in picked)
    assert rewards.tolist() == [reward for _, _, reward in picked]
    assert count == 3  # len(batch): the three columns


SAFE_FIXTURES = sorted(p for p in FOLDER.glob("*.in.py") if ".unsafe." not in p.name)


def test_there_are_safe_fixtures_to_run() -> None:
    assert len(SAFE_FIXTURES) >= 2


@pytest.mark.parametrize("path", SAFE_FIXTURES, ids=lambda p: p.name)
def test_each_safe_fixture_raises_before_and_prints_what_python_2_printed_after(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    before = _run(source)
    assert before.get("raised") == "TypeError" and "'zip' object" in before["message"], before
    legacy, after = _run(source, py2=True), _run(_rewrite(source).text)
    assert "raised" not in legacy and "raised" not in after, (legacy, after)
    assert after["printed"] == legacy["printed"] != ""


def test_a_read_that_may_need_the_iterator_is_held_back_without_unsafe_fixes() -> None:
    source = textwrap.dedent(
        """
        def stream(pairs):
            steps = map(abs, pairs)
            first = steps[0]
            return first, next(steps)

        result = stream([-1, -2, -3])
        """
    )
    safe, unsafe = _rewrite(source), _rewrite(source, unsafe=True)
    assert safe.text == source
    assert [(f.held_back, f.unsafe) for f in safe.findings] == [(True, True)]
    assert "`next(steps)` needs an iterator" in safe.findings[0].message
    assert "steps = list(map(abs, pairs))" in unsafe.text and [f.fixed for f in unsafe.findings] == [True]
    assert _run(source)["raised"] == "TypeError"
    # the fix runs past the subscript, and next() of a list fails: why it waits for --unsafe-fixes
    assert _run(unsafe.text) == {"raised": "TypeError", "message": "'list' object is not an iterator"}


def test_a_loop_over_zip_and_a_shadowed_zip_are_left_alone() -> None:
    source = textwrap.dedent(
        """
        def zip(*columns):
            return [tuple(c) for c in columns]

        for a, b in map(tuple, [[1, 2]]):
            print(a, b)
        result = zip([1, 2], [3, 4])[0]
        """
    )
    out = _rewrite(source, unsafe=True)
    assert out.text == source and out.findings == []
    assert _run(source)["namespace"]["result"] == (1, 2)
