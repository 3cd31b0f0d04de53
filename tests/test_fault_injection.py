"""Fault injection (issue 22): ``apply`` over a tree of 200 files, killed (SIGKILL) or
terminated (SIGTERM) at a random point, five times: each of SIGKILL and SIGTERM on a cold run
(pool workers rewrite) and on a warm one (the main process rewrites, from the cache), and one
drawn at random (seeds 0-4; ``benchmarks/faults.py`` runs fifty, all drawn). After each fault: every file is byte-identical to its original or its full rewrite, no
worker process is left, the exit status and the message are right, no temp file is left (a run
killed in the middle of a write leaves its one temp file, removed by the next run), and the
next run finishes the job. See ``faults.inject_fault``."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from faults import inject_fault, make_template

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads worker processes from /proc (Linux)")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("faults") / "template"
    return root, make_template(root)


KINDS = [(signal.SIGKILL, True), (signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGKILL, False), (None, None)]


@pytest.mark.parametrize("seed", range(5))
def test_a_fault_at_a_random_point_loses_nothing(template, tmp_path: Path, seed: int) -> None:
    root, expected = template
    how, cold = KINDS[seed]
    account = inject_fault(root, expected, tmp_path / "tree", seed, how=how, cold=cold)
    print(account)
    assert account.startswith(f"seed {seed}: ")
