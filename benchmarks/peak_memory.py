"""Peak memory of one process on one file: ``torchfix-device check`` (``--jobs 1``, no cache)
next to a bare ``libcst.parse_module`` of the same file, each in a fresh interpreter.

    python benchmarks/peak_memory.py FILE [FILE ...]

Prints one line per file: the two peaks (largest resident set, MB) and their difference.
"""

from __future__ import annotations

import subprocess
import sys

_CHECK = (
    "import resource, sys\n"
    "from torchfix_device.cli import main\n"
    "sys.argv = ['torchfix-device', 'check', '--no-cache', '--jobs', '1', sys.argv[1]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)
_PARSE = (
    "import resource, sys, libcst\n"
    "libcst.parse_module(open(sys.argv[1], 'rb').read())\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)


def peak_mb(program: str, path: str) -> int:
    """The peak resident set, in MB, of a fresh interpreter running ``program`` on ``path``."""
    done = subprocess.run([sys.executable, "-c", program, path], capture_output=True, text=True, check=True)
    return int(done.stderr.strip().splitlines()[-1]) // 1024


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for path in paths:
        ours, bare = peak_mb(_CHECK, path), peak_mb(_PARSE, path)
        print(f"{path}: torchfix-device check {ours} MB, libcst.parse_module {bare} MB, difference {ours - bare:+d} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
