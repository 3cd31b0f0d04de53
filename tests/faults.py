"""Helpers for the tests that interrupt and kill runs (``test_interruption.py``,
``test_fault_injection.py``) and for ``benchmarks/faults.py``: a tree of legacy files with
their expected rewrites, the run's worker processes, and the checks made after a fault.

Not a test module (no ``test_`` prefix): imported by them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from torchfix_device.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.fileio import TEMP_SUFFIX

TEMPLATES = [
    "import torch\n\n\ndef load_{i}(path):\n    model = torch.load(path)\n    return model.cuda()\n",
    "import torch\n\nCKPT = 'ckpt_{i}.pt'\nstate = torch.load(CKPT)  # file {i}\n",
    "import torch\nimport torch.nn as nn\n\n\nclass Net{i}(nn.Module):\n    def forward(self, x):\n        return x + torch.randn(3)\n",
    "import torch\n\ncriterion = torch.nn.MSELoss()\n\n\ndef train_{i}(a, b):\n    loss = criterion(a, b)\n    return loss.data[0]\n",
]
SENTINEL = "987654321"
_REWRITES: list[str] = []


def make_tree(root: Path, count: int, *, folders: int = 1) -> dict[Path, tuple[bytes, bytes]]:
    """``count`` legacy files under ``root`` (spread over ``folders`` subfolders when more than
    one); for each, its original bytes and its expected full rewrite. The rewrites are made once
    per template (the file number only appears in names and strings)."""
    if not _REWRITES:
        _REWRITES.extend(transform_source(t.format(i=SENTINEL), all_codemods()).text for t in TEMPLATES)
    root.mkdir(parents=True)
    expected = {}
    for i in range(count):
        text = TEMPLATES[i % len(TEMPLATES)].format(i=i)
        rewrite = _REWRITES[i % len(TEMPLATES)].replace(SENTINEL, str(i))
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
