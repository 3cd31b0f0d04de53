"""The run harness's CI subset: our own legacy-style scripts, run original / after ``apply`` /
after ``apply --unsafe-fixes`` by ``benchmarks/run_harness/run.py``'s own functions, on the CPU.

The scripts and their manifest live in ``tests/fixtures/run_scripts/`` (torch and NumPy only:
no torchvision, no network, no corpus mirror). The manifest states today's outcome of each
variant; a variant that fails today for one of the three known classes of the migration —
(a) a tensor the migration put on the GPU reaches the host, (b) a 0.3 Python number that is now
a 0-dim tensor, (c) a legacy autograd Function — is asserted to run under
``xfail(strict=True)`` naming the class, so that the test turns into an error the day the tool
fixes it (then move the expectation to ``ok``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from conftest import FIXTURES, ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "run_harness"))
import run as harness  # noqa: E402

pytestmark = pytest.mark.xdist_group("run_harness")

SCRIPTS = FIXTURES / "run_scripts"
ENTRIES = harness.load_manifest(SCRIPTS / "manifest.toml")
CLASSES = {
    "a": "class (a): a tensor the migration put on the GPU reaches the host",
    "b": "class (b): a 0.3 Python number is now a 0-dim tensor",
    "c": "class (c): legacy autograd Function with a non-static forward",
}


class KnownFailure(Exception):
    """The run failed with exactly the exception the manifest names for its known class."""


def _run_subset(work: Path) -> dict:
    options = harness.Options(python=sys.executable, device="cpu", jobs=2, warm=True, tool_python=sys.executable,
                              tool_pythonpath=str(ROOT / "src"))
    result = harness.run_all(ENTRIES, work, options)
    return {"sources": result["sources"], "results": [dataclasses.asdict(r) for r in result["results"]]}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict:
    """One batch of runs for the whole module. Under xdist the workers share it through a file
    (the ``xdist_group`` alone does not keep this module on one worker)."""
    if worker_id == "master":
        data = _run_subset(tmp_path_factory.mktemp("run-harness"))
    else:
        shared = tmp_path_factory.getbasetemp().parent / "run-harness-report.json"
        with FileLock(str(shared) + ".lock"):
            if shared.is_file():
                data = json.loads(shared.read_text(encoding="utf-8"))
            else:
                data = _run_subset(tmp_path_factory.mktemp("run-harness"))
                shared.write_text(json.dumps(data, default=str), encoding="utf-8")
    results = [harness.Result(**r) for r in data["results"]]
    return {"sources": data["sources"], "results": results, "by_key": {(r.id, r.variant): r for r in results}}


def _cases():
    for entry in ENTRIES:
        for variant in harness.VARIANTS:
            marks = []
            known = entry.known.get(variant)
            if known:
                marks.append(pytest.mark.xfail(strict=True, raises=KnownFailure, reason=CLASSES[known]))
            yield pytest.param(entry, variant, id=f"{entry.id}-{variant}", marks=marks)


def test_the_subset_covers_every_idiom_and_known_class():
    text = "".join(p.read_text(encoding="utf-8") for p in SCRIPTS.glob("*.py"))
    for idiom in ("if args.cuda:", "volatile=True", ".data[0]", ".data.numpy()", "hidden.cuda()\n",
                  "[1][0]", "(Function):"):
        assert idiom in text, idiom
    # classes (a), (b) and (c): fixed by TFD018, TFD019 and TFD017; every script runs after apply
    assert not any(e.known for e in ENTRIES)
    assert all(e.expect[v] == "ok" for e in ENTRIES for v in ("safe", "unsafe"))
    assert all(e.expect.keys() == set(harness.VARIANTS) for e in ENTRIES)


def test_apply_rewrote_each_script(report):
    """Both applies ran and changed every script (else the variants would test nothing)."""
    (source,) = report["sources"].values()
    for variant in ("safe", "unsafe"):
        applied = source["apply"][variant]
        assert applied["returncode"] == 0, applied["stderr"]
        assert f"{len(ENTRIES)} files scanned, {len(ENTRIES)} changed" in applied["stderr"], applied["summary"]


@pytest.mark.parametrize(("entry", "variant"), list(_cases()))
def test_outcome(report, entry: harness.Entry, variant: str):
    result = report["by_key"][(entry.id, variant)]
    expected = entry.expect[variant]
    known = entry.known.get(variant)
    if known:
        # today's failure must be the known one; anything else is a real regression
        if not result.ok and result.exception_name == expected:
            raise KnownFailure(f"{result.exception_name}: {result.exception_message}")
        assert result.ok, f"{result.exception_name}: {result.exception_message}\n{result.stderr_tail}"
        return
    if expected == "ok":
        assert result.ok, f"{result.outcome} {result.exception_name}: {result.exception_message}\n{result.stderr_tail}"
        assert result.exception_name is None
        if entry.steps:
            assert result.outcome == "step-limit" and result.steps == entry.steps
            assert result.returncode == harness.LIMIT_STATUS
        else:
            assert result.outcome == "finished" and result.returncode == 0 and result.steps > 0
    else:
        assert not result.ok and result.outcome == "error", result.outcome
        assert result.exception_name == expected, f"{result.exception_name}: {result.exception_message}"
        assert result.returncode == 1


def test_summary_line_counts_the_runs(report):
    results = report["results"]
    assert len(results) == len(ENTRIES) * len(harness.VARIANTS)
    line = harness.summary_line(results)
    expected = {v: sum(e.expect[v] == "ok" for e in ENTRIES) for v in harness.VARIANTS}
    assert line == "runs: " + ", ".join(f"{v} {expected[v]}/{len(ENTRIES)}" for v in harness.VARIANTS)
    table = harness.table(ENTRIES, results)
    assert all(e.id in table for e in ENTRIES)


def test_the_runs_left_the_sources_alone(report):
    """The harness works on copies: the fixture folder is as committed (no output, no cache)."""
    names = sorted(p.name for p in SCRIPTS.iterdir())
    assert names == sorted([*(e.entry for e in ENTRIES), "manifest.toml"])


def test_notebook_script_drops_magics_but_keeps_a_modulo_continuation():
    script = harness.notebook_script(SCRIPTS / "magic_notebook.ipynb")
    compile(script, "magic_notebook", "exec")
    assert "pass  # [run-harness] dropped: %matplotlib inline" in script
    assert "pass  # [run-harness] dropped: !echo" in script
    assert "%%time" not in script
    assert "print('step %d loss %.4f' % (step," in script


def test_last_exception_reads_the_last_traceback():
    stderr = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nValueError: first\n"
        "some output\nTraceback (most recent call last):\n  File \"b.py\", line 2, in <module>\n"
        "    x[tensor(1)]\nKeyError: tensor(1)\n"
    )
    assert harness.last_exception(stderr) == ("KeyError", "tensor(1)")
    assert harness.last_exception("no traceback here\n") is None


def test_step_limit_and_record_through_the_standins(tmp_path: Path):
    """The stand-ins alone: a script stopped at its 2nd optimizer step leaves status 86, the
    marker line and a record with the steps; an uncaught exception is recorded with its type."""
    script = tmp_path / "tree" / "loop.py"
    script.parent.mkdir()
    script.write_text(
        "import torch\nw = torch.zeros(2, requires_grad=True)\nopt = torch.optim.SGD([w], lr=0.1)\n"
        "for i in range(10):\n    opt.zero_grad(); (w - 1).pow(2).sum().backward(); opt.step()\n    print('step', i)\n",
        encoding="utf-8",
    )
    entry = harness.Entry(id="loop", repo="local", commit="-", entry="loop.py", steps=2, timeout=60)
    result = harness.run_entry(entry, script.parent, "original", tmp_path / "run", sys.executable)
    assert (result.outcome, result.ok, result.returncode, result.steps) == ("step-limit", True, 86, 2)
    assert harness.LIMIT_MARKER in result.stderr_tail
    records = [json.loads(p.read_text()) for p in (tmp_path / "run.records").glob("record.*.json")]
    assert [(r["ended"], r["steps"], r["top"]) for r in records] == [("limit", 2, True)]

    script.write_text("import torch\n{0: 1}[torch.tensor(0)]\n", encoding="utf-8")
    result = harness.run_entry(entry, script.parent, "original", tmp_path / "run2", sys.executable)
    assert (result.outcome, result.ok, result.exception_name, result.exception_message) == ("error", False, "KeyError", "tensor(0)")
