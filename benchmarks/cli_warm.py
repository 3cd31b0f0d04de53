"""How fast a warm ``torchfix-device check`` answers, next to ``ruff check`` on the same files in
the same run (issue 23, item 11).

    python benchmarks/cli_warm.py [--ruff PATH] [--runs N] [--cold-runs N] [--workdir DIR] [--output FILE]

The corpus is a copy of the installed torch's ``nn``, ``optim`` and ``distributions`` (about
200 files) under ``--workdir``, with an empty ``pyproject.toml`` at its top so that both tools
keep their cache there (``.torchfix_device_cache``, ``.ruff_cache``), as in a user's project.
Measured, each as the console script a user runs, from the corpus' top folder:

- **one file, warm**: ``check optim/sgd.py`` with the cache filled;
- **tree, warm**: ``check .`` with the cache filled;
- **tree, cold**: ``check .`` after deleting torchfix-device's cache (``--cold-runs`` times).

Runs get the environment less ``PYTHONDONTWRITEBYTECODE`` (compiled modules are kept, as after
``pip install``). Warm runs of the two tools alternate (``--runs`` of each), so both see the same machine load;
the table gives the fastest and the median run. Targets: one file ≤ 0.12 s, tree ≤ 0.15 s and
≥ 10× faster than cold. ``--output`` writes the table (Markdown) headed by the command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ("nn", "optim", "distributions")
ONE_FILE = "optim/sgd.py"
TARGET_ONE, TARGET_TREE, TARGET_RATIO = 0.12, 0.15, 10.0


def _torch_folder() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed: the corpus is a copy of its nn, optim and distributions")
    return Path(list(spec.submodule_search_locations)[0])


def build_corpus(workdir: Path) -> Path:
    tree = workdir / "torch-nn-optim-distributions"
    if tree.is_dir():
        return tree
    source = _torch_folder()
    for package in PACKAGES:
        shutil.copytree(source / package, tree / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    (tree / "pyproject.toml").write_text("# the corpus' project root: both tools keep their cache here\n")
    return tree


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""As a user runs it: Python keeps the compiled modules (``__pycache__``), as after ``pip install``."""


def _timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed


def _ours() -> list[str]:
    script = Path(sys.executable).parent / "torchfix-device"
    return [str(script)] if script.exists() else [sys.executable, "-m", "torchfix_device"]


def _summary(times: list[float]) -> str:
    return f"{min(times):.3f} s (median {statistics.median(times):.3f} s)"


def measure(tree: Path, ruff: str, runs: int, cold_runs: int) -> dict[str, list[float]]:
    ours = _ours()
    files = sum(1 for _ in tree.rglob("*.py"))
    print(f"corpus: {tree} ({files} files); torchfix-device: {' '.join(ours)}; ruff: {ruff}", flush=True)
    cache = tree / ".torchfix_device_cache"
    cold: list[float] = []
    for _ in range(cold_runs):
        shutil.rmtree(cache, ignore_errors=True)
        cold.append(_timed([*ours, "check", "."], tree))
        print(f"  cold tree: {cold[-1]:.2f} s", flush=True)
    for command in ([*ours, "check", "."], [ruff, "check", "."]):  # fill both caches
        _timed(command, tree)
        _timed(command, tree)
    times: dict[str, list[float]] = {
        "cold tree": cold, "ours one": [], "ruff one": [], "ours tree": [], "ruff tree": [], "python": [],
    }
    for _ in range(runs):
        times["python"].append(_timed([sys.executable, "-c", "pass"], tree))
        times["ours one"].append(_timed([*ours, "check", ONE_FILE], tree))
        times["ruff one"].append(_timed([ruff, "check", ONE_FILE], tree))
        times["ours tree"].append(_timed([*ours, "check", "."], tree))
        times["ruff tree"].append(_timed([ruff, "check", "."], tree))
    return times


def table(times: dict[str, list[float]], files: int) -> str:
    one, tree = min(times["ours one"]), min(times["ours tree"])
    ratio = min(times["cold tree"]) / tree if times["cold tree"] else float("nan")
    rows = [
        "| measurement | torchfix-device | ruff check | target | met |",
        "|---|---:|---:|---|---|",
        f"| warm `check` of one file (`{ONE_FILE}`) | {_summary(times['ours one'])} | {_summary(times['ruff one'])} "
        f"| ≤ {TARGET_ONE} s | {'yes' if one <= TARGET_ONE else 'NO'} |",
        f"| warm `check .` ({files} files) | {_summary(times['ours tree'])} | {_summary(times['ruff tree'])} "
        f"| ≤ {TARGET_TREE} s | {'yes' if tree <= TARGET_TREE else 'NO'} |",
        f"| cold `check .` (cache deleted) | {_summary(times['cold tree']) if times['cold tree'] else 'not run'} | | | |",
        f"| cold / warm (fastest runs) | {ratio:.1f}× | | ≥ {TARGET_RATIO:.0f}× | {'yes' if ratio >= TARGET_RATIO else 'NO'} |",
        f"| floor: the interpreter alone (`python -c pass`) | {_summary(times['python'])} | | | |",
    ]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ruff", default=shutil.which("ruff"), help="the ruff executable (default: ruff on PATH)")
    parser.add_argument("--runs", type=int, default=15, help="warm runs of each tool and target (default 15)")
    parser.add_argument("--cold-runs", type=int, default=3, help="cold runs of the tree (default 3)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "torchfix-device-cli-warm")
    parser.add_argument("--output", type=Path, help="write the results (Markdown) here")
    args = parser.parse_args(argv)
    if not args.ruff:
        parser.error("no ruff found: install it (pip install ruff, in a separate virtualenv) and pass --ruff PATH")
    tree = build_corpus(args.workdir)
    times = measure(tree, args.ruff, args.runs, args.cold_runs)
    files = sum(1 for _ in tree.rglob("*.py"))
    ruff_version = subprocess.run([args.ruff, "--version"], capture_output=True, text=True).stdout.strip()
    text = table(times, files)
    print(text)
    if args.output is not None:
        command = "python benchmarks/cli_warm.py " + " ".join(a if " " not in a else repr(a) for a in (argv or sys.argv[1:]))
        header = (
            f"# Warm `check` next to `ruff check`\n\n```\n{command}\n```\n\n"
            f"{ruff_version}; Python {sys.version.split()[0]}; {os.cpu_count()} cores, load average "
            f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; {time.strftime('%Y-%m-%d %H:%M')}. "
            f"Fastest of {args.runs} alternating runs (median in brackets).\n\n"
        )
        args.output.write_text(header + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
