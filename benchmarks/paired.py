"""Time two source trees of torchfix-device against each other, interleaved, in one run.

For a refactor that must not change speed: each round runs ``check`` from the base tree and
from the new tree, one after the other (the order alternates between rounds), cold (``--no-cache``)
and warm (a cache primed once per tree), so that load on a shared machine hits both alike.

    python benchmarks/paired.py --base /tmp/base/src --new src /tmp/bw/corpora/legacy --runs 5

Prints the median seconds of each and the ratio new / base. CI does not run this.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _time(src: Path, corpus: Path, cache_home: Path, cold: bool) -> float:
    env = {**os.environ, "PYTHONPATH": str(src.resolve()), "XDG_CACHE_HOME": str(cache_home), "NO_COLOR": "1"}
    args = [sys.executable, "-m", "torchfix_device", "check", "--jobs", "2", *(["--no-cache"] if cold else []), str(corpus)]
    start = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, cwd=tempfile.gettempdir())
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{src}: check failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the base tree's src/ folder")
    parser.add_argument("--new", type=Path, required=True, help="the new tree's src/ folder")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("corpora", type=Path, nargs="+")
    options = parser.parse_args()
    trees = {"base": options.base, "new": options.new}
    print(f"| corpus | mode | base (s) | new (s) | new / base |\n|---|---|---|---|---|")
    for corpus in options.corpora:
        with tempfile.TemporaryDirectory() as caches:
            homes = {name: Path(caches) / name for name in trees}
            for name, src in trees.items():
                _time(src, corpus, homes[name], cold=False)  # prime each tree's cache
            for cold in (True, False):
                times: dict[str, list[float]] = {name: [] for name in trees}
                for round_ in range(options.runs):
                    order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
                    for name in order:
                        times[name].append(_time(trees[name], corpus, homes[name], cold))
                base, new = statistics.median(times["base"]), statistics.median(times["new"])
                mode = "cold" if cold else "warm"
                print(f"| {corpus.name} | {mode} | {base:.2f} | {new:.2f} | {new / base:.3f} |", flush=True)


if __name__ == "__main__":
    main()
