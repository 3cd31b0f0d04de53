"""Processor time and peak memory of the facts a run learns over all its files before it looks
at any (``run/run_facts.py:project_facts``: the classes that move themselves, star imports, the
attributes and functions files import from each other, the legacy autograd Functions, the files
no file imports), on one folder, as ``check`` finds its files.

    python benchmarks/project_facts.py FOLDER [--src SRC] [--runs N]

Each run is a fresh process (``PYTHONPATH`` set to ``--src``, default this checkout's ``src``),
run from FOLDER's parent with FOLDER's name as the path given, as ``check FOLDER`` would be.
Prints one line per run: files, CPU seconds of the facts alone, peak resident MB of the process.
Results go in ``RESULTS-torch.md`` (the installed torch tree) or wherever the folder belongs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import resource, sys, time
from pathlib import Path
from torchfix_device.files.selection import find_files
try:
    from torchfix_device.run.run_facts import project_facts
except ImportError:  # a build before run/run_facts.py
    from torchfix_device.run.runner import _project_facts as project_facts
root = Path(sys.argv[1])
files, _ = find_files([root], (), respect_gitignore=True, force_exclude=False)
start = time.process_time()
project_facts(files, [root], legacy=True)
cpu = time.process_time() - start
print(f"{len(files)} files, {cpu:.1f} CPU-s, peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    folder = args.folder.resolve()
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
    for _ in range(args.runs):
        done = subprocess.run([sys.executable, "-c", CHILD, folder.name], cwd=folder.parent, env=env, check=False)
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
