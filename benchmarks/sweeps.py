"""The exhaustive sweeps of the suite on every file, not on CI's sample.

The tests marked ``sweep`` compare a shortcut of the engine with libcst's own answer (children,
visiting order, bindings, scopes, qualified names) or the engine with stage 1 against the engine
without it, on every node of a set of files. CI runs them on a fixed sample of the fixtures
(``tests/conftest.py``: ``sweep_sample``, about 3 files in 10, at least one per codemod's
folder); this script runs them on every fixture, example and (for the children) source file,
and with ``--corpus DIR`` on every ``*.py`` under DIR as well (a folder of real legacy code:
files CI never sees). Run it after a change to the engine, ``syntax/`` or stage 1.

    python benchmarks/sweeps.py [--corpus /tmp/legacy-speed/corpus] [--jobs N] [--json out.json]

Prints the number of sweep tests that passed, failed and were skipped, and the wall time; the
exit status is pytest's. Results: benchmarks/RESULTS-sweeps.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", default=[], type=Path,
                        help="a folder whose *.py files the sweeps take too (repeatable)")
    parser.add_argument("--jobs", default="auto", help="pytest-xdist workers (default: every core)")
    parser.add_argument("--json", type=Path, help="write the counts and the time here")
    args = parser.parse_args(argv)
    for folder in args.corpus:
        if not folder.is_dir():
            parser.error(f"--corpus {folder}: not a folder")
    env = {**os.environ, "TFD_SWEEP": "all",
           "TFD_SWEEP_EXTRA": os.pathsep.join(str(f.resolve()) for f in args.corpus)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "sweep",
               "-n", str(args.jobs), "-o", "addopts=-ra --dist loadfile", "tests"]
    started = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    sys.stdout.write(run.stdout[-20000:])
    sys.stderr.write(run.stderr[-5000:])
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", summary)}
    result = {"corpus": [str(f) for f in args.corpus], "seconds": round(seconds, 1), "exit": run.returncode, **counts}
    print(f"sweeps on every file{' and ' + ', '.join(map(str, args.corpus)) if args.corpus else ''}: "
          f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
          f"{counts.get('skipped', 0)} skipped in {seconds:.0f} s (exit {run.returncode})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
