"""Helpers for the tests that interrupt and kill runs (``test_interruption.py``,
``test_fault_injection.py``) and for ``benchmarks/faults.py``: a tree of legacy files with
their expected rewrites, the run's worker processes, and the checks made after a fault.

Not a test module (no ``test_`` prefix): imported by them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.files.sources import TEMP_SUFFIX

TEMPLATES = [
    "import torch\n\n\ndef load_{i}(path):\n    model = torch.load(path)\n    return model.cuda()\n",
    "import torch\n\nCKPT = 'ckpt_{i}.pt'\nstate = torch.load(CKPT)  # file {i}\n",
    "import torch\nimport torch.nn as nn\n\n\nclass Net{i}(nn.Module):\n    def forward(self, x):\n        return x + torch.randn(3)\n",
    "import torch\n\ncriterion = torch.nn.MSELoss()\n\n\ndef train_{i}(a, b):\n    loss = criterion(a, b)\n    return loss.data[0]\n",
]
SENTINEL = "987654321"
_REWRITES: list[str] = []


def make_tree(root: Path, count: int, *, folders: int = 1, distinct: bool = True) -> dict[Path, tuple[bytes, bytes]]:
    """``count`` legacy files under ``root`` (spread over ``folders`` subfolders when more than
    one); for each, its original bytes and its expected full rewrite. The rewrites are made once
    per template (the file number only appears in names and strings). ``distinct=False``: the
    files repeat the templates' first four texts exactly, so that a result cache filled from
    four files answers for all (a warm run without the cost of a cold one)."""
    if not _REWRITES:
        _REWRITES.extend(transform_source(t.format(i=SENTINEL), all_codemods()).text for t in TEMPLATES)
    root.mkdir(parents=True)
    expected = {}
    for i in range(count):
        number = i if distinct else i % len(TEMPLATES)
        text = TEMPLATES[i % len(TEMPLATES)].format(i=number)
        rewrite = _REWRITES[i % len(TEMPLATES)].replace(SENTINEL, str(number))
        folder = root / f"pkg{i % folders}" if folders > 1 else root
        folder.mkdir(exist_ok=True)
        path = folder / f"m{i:03d}.py"
        path.write_text(text)
        expected[path] = (text.encode(), rewrite.encode())
    return expected


def check_rewrite_sample(expected: dict[Path, tuple[bytes, bytes]]) -> None:
    """The substituted rewrites are what the engine gives (a few, one per template)."""
    for path, (original, rewrite) in list(expected.items())[: len(TEMPLATES)]:
        assert transform_source(original.decode(), all_codemods()).text.encode() == rewrite


def rewritten(expected: dict[Path, tuple[bytes, bytes]]) -> int:
    """How many files hold their full rewrite; asserts every other one holds its original."""
    done = 0
    for path, (original, rewrite) in expected.items():
        data = path.read_bytes()
        assert data in (original, rewrite), f"{path.name} is neither the original nor the full rewrite"
        done += data == rewrite
    return done


def count_rewritten(expected: dict[Path, tuple[bytes, bytes]]) -> int:
    """How many files hold their rewrite, without judging the others (while a run works)."""
    count = 0
    for path, (_, rewrite) in expected.items():
        try:
            count += path.read_bytes() == rewrite
        except OSError:
            pass
    return count


def temp_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX))


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "torchfix_device", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def wait_for(condition, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux: read from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and fields[1] == str(pid):
                found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    """Running (a zombie, exited but not yet reaped, is not)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def wait_gone(pids: set[int], timeout: float = 20) -> set[int]:
    """The ``pids`` still running after ``timeout`` seconds (killed then, so none leaks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    left = {p for p in pids if alive(p)}
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


INTERRUPTED = re.compile(r"^(interrupted|terminated) after (\d+) of (\d+) files; every file is either unchanged or fully rewritten$")


# -- one fault, injected and judged (test_fault_injection.py, benchmarks/faults.py) -------------
def make_template(root: Path, count: int = 200) -> dict[str, tuple[bytes, bytes]]:
    """A project of ``count`` legacy files over a few folders, with a warm result cache (the
    runs that recover from a fault, and the warm faulted runs, read it): relative path →
    (original, rewrite)."""
    expected = make_tree(root, count, folders=4, distinct=False)
    check_rewrite_sample(expected)
    (root / "pyproject.toml").write_text("[project]\nname = 'faults'\n")
    done = root / "warm-rewrites"  # the rewrites' own results too: a run after a fault reads both
    done.mkdir()
    for index, (original, rewrite) in enumerate(list(expected.values())[: len(TEMPLATES)]):
        (done / f"r{index}.py").write_bytes(rewrite)
    warm = subprocess.run([sys.executable, "-m", "torchfix_device", "check", "--jobs", "1", "."], cwd=root, capture_output=True)
    assert warm.returncode == 1, warm.stderr.decode()
    shutil.rmtree(done)
    return {path.relative_to(root).as_posix(): data for path, data in expected.items()}


def inject_fault(
    template: Path, expected: dict[str, tuple[bytes, bytes]], work: Path, seed: int, *,
    how: signal.Signals | None = None, cold: bool | None = None,
) -> str:
    """Copy ``template`` to ``work``, start ``apply`` on it, and at a random point (after the
    k-th rewritten file, k drawn by ``seed``) send ``how`` (SIGKILL or SIGTERM, drawn when not
    given) to a ``cold`` run (pool workers rewrite, no cache) or a warm one (the main process
    rewrites, from the cache; drawn when not given); then assert: every file
    holds its original or its full rewrite, no worker process is left, the exit status and the
    message are right, no temp file is left (after SIGKILL, a run killed in the middle of a
    write may leave its one temp file, which the next run removes), and a run started right
    after finishes the job. Returns a one-line account of what was done."""
    import random

    rng = random.Random(seed)
    drawn_how, drawn_cold = rng.choice([signal.SIGKILL, signal.SIGTERM]), rng.random() < 0.5
    how = drawn_how if how is None else how
    cold = drawn_cold if cold is None else cold
    at = rng.randint(1, 20 if cold else 190)
    shutil.copytree(template, work)
    files = {work / name: data for name, data in expected.items()}
    args = ["apply", "--no-cache", "--jobs", "2", "."] if cold else ["apply", "."]
    main = start(args, work)
    workers: set[int] = set()
    try:
        def reached() -> bool:
            workers.update(children(main.pid))
            return count_rewritten(files) >= at

        try:
            wait_for(reached, main)
            main.send_signal(how)
        except AssertionError:
            if main.poll() is None:
                raise
        _, err = main.communicate(timeout=120)
    finally:
        main.kill()
        left = wait_gone(workers)
    stderr = err.decode()
    account = f"seed {seed}: {'cold' if cold else 'warm'}, {how.name} after {at} files"
    assert not left, f"{account}: worker processes left: {sorted(left)}"
    assert "Traceback" not in stderr, f"{account}:\n{stderr}"
    done = rewritten(files)  # every file: its original or its full rewrite
    temps = temp_files(work)
    if main.returncode == 0:  # finished before the signal came, or while it printed its summary
        assert done == len(files) and temps == [], account
        assert f"{done} files scanned, {done} changed, 0 failed" in stderr, f"{account}:\n{stderr}"
    elif how == signal.SIGKILL:
        assert main.returncode == -signal.SIGKILL, f"{account}: exit {main.returncode}\n{stderr}"
        assert len(temps) <= 1 and all(f".{main.pid}." in t.name for t in temps), f"{account}: {temps}"
    else:
        assert main.returncode == 143, f"{account}: exit {main.returncode}\n{stderr}"
        lines = [m for m in map(INTERRUPTED.match, stderr.splitlines()) if m]
        assert len(lines) == 1 and lines[0].group(1) == "terminated", f"{account}:\n{stderr}"
        assert (int(lines[0].group(2)), int(lines[0].group(3))) == (done, len(files)), f"{account}: {done} rewritten\n{stderr}"
        assert f"{done} files scanned, {done} changed, 0 failed" in stderr, f"{account}:\n{stderr}"
        assert temps == [], f"{account}: {temps}"
    again = subprocess.run([sys.executable, "-m", "torchfix_device", "apply", "."], cwd=work, capture_output=True, timeout=300)
    assert again.returncode == 0, f"{account}: the next run failed\n{again.stderr.decode()}"
    assert rewritten(files) == len(files) and temp_files(work) == [], account
    return f"{account}: {done} of {len(files)} rewritten, exit {main.returncode}, {len(temps)} temp file(s) left for the next run"
