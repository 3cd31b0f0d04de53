"""Fault injection at length (issue 22): ``tests/test_fault_injection.py`` runs five faults in CI;
this runs fifty (or ``--repetitions N``), each a SIGKILL or SIGTERM at a random point of a cold
or warm ``apply`` over 200 files, with the same checks (``tests/faults.py``: every file its
original or its full rewrite, no worker left, exit status and message right, no temp file left
once the next run has started, and that run finishes the job).

    python benchmarks/faults.py [--repetitions 50] [--first-seed 0] [--output FILE]

Writes Markdown headed by the exact command to ``--output`` (default: stdout); exit 1 if a
repetition fails (its seed reproduces it: ``--first-seed SEED --repetitions 1``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from faults import inject_fault, make_template  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    accounts: list[str] = []
    failures: list[str] = []
    kinds: Counter = Counter()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        template = Path(work) / "template"
        expected = make_template(template)
        for seed in range(args.first_seed, args.first_seed + args.repetitions):
            try:
                account = inject_fault(template, expected, Path(work) / f"run{seed}", seed)
            except AssertionError as exc:
                account = f"seed {seed}: FAILED: {str(exc).splitlines()[0] if str(exc) else 'assertion'}"
                failures.append(account)
            accounts.append(account)
            kinds[account.split(": ")[1].split(" after")[0]] += 1
            print(account, flush=True)
    elapsed = time.monotonic() - started
    command = shlex.join(["python", "benchmarks/faults.py", *argv])
    lines = [
        f"`{command}`",
        "",
        f"{args.repetitions} faults, {len(failures)} failed, {elapsed:.0f} s "
        f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}).",
        "",
        "Each: every file holds its original or its full rewrite; no worker process is left; the exit "
        "status and the message are right (SIGKILL: -9; SIGTERM: 143 and `terminated after N of 200 files`, N "
        "the files rewritten; 0 when the run finished first); no temp file is left (after SIGKILL at most the "
        "killed process's one, removed by the next run, which then rewrites the rest).",
        "",
        *(f"- {a}" for a in accounts),
        "",
    ]
    text = "\n".join(lines)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
