"""Carry a ``differential.py`` result from the commit it ran on to another checkout (issue 21).

    python benchmarks/differential_transfer.py OLD_CHECKOUT NEW_CHECKOUT [--examples 10000] [--seed 0] [--jobs 2]

The differential harness compares what a script does before and after the rewrite; the result
of an example depends only on its script, the rewritten text, the findings and whether a second
run changes the text. This script draws the same examples as ``differential.py --seed S``,
rewrites each with OLD's code and with NEW's (each checkout imported in its own processes), and
re-executes with NEW's harness only the examples whose text or findings differ, or whose second
run under NEW is not a no-op. With none left to re-execute, OLD's result holds for NEW's code.
Prints the counts and any problem found.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rewrite_digests(root: Path, examples: int, seed: int, part: int, parts: int, second_run: bool) -> dict[str, list]:
    """In a child importing ``root``'s code: digest of (text, findings) and, with
    ``second_run``, whether a second run leaves the text, for examples ``part::parts``."""
    child = f"""
import hashlib, json, random, sys
sys.path[:0] = [{str(root / 'tests')!r}, {str(root / 'src')!r}]
import generated
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
rng = random.Random({seed})
examples = [generated.draw_example(rng) for _ in range({examples})]
codemods = all_codemods()
out = {{}}
for i in range({part}, {examples}, {parts}):
    text = generated.build_script(examples[i])
    try:
        r = transform_source(text, codemods, filename="example.py")
        second = transform_source(r.text, codemods, filename="example.py").text == r.text if {second_run} else None
        out[i] = [hashlib.sha256((r.text + repr(sorted(r.findings))).encode()).hexdigest(), second]
    except Exception as exc:
        out[i] = ["error " + type(exc).__name__, None]
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd="/tmp", check=False)
    if proc.returncode != 0:
        sys.exit(f"rewriting with {root} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="checkout the differential run was made on")
    parser.add_argument("new", type=Path, help="checkout to carry the result to")
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    old, new = args.old.resolve(), args.new.resolve()
    tasks = [(old, p, args.jobs, False) for p in range(args.jobs)] + [(new, p, args.jobs, True) for p in range(args.jobs)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda t: rewrite_digests(t[0], args.examples, args.seed, t[1], t[2], t[3]), tasks))
    a = {k: v for r in results[: args.jobs] for k, v in r.items()}
    b = {k: v for r in results[args.jobs:] for k, v in r.items()}
    assert len(a) == len(b) == args.examples, (len(a), len(b))
    differ = sorted(int(i) for i in a if a[i][0] != b[i][0])
    not_idempotent = sorted(int(i) for i in b if b[i][1] is not True)
    print(f"examples: {args.examples}; rewrite (text and findings) differs: {len(differ)}; "
          f"second run not a no-op under the new code: {len(not_idempotent)}")
    todo = sorted(set(differ) | set(not_idempotent))
    if not todo:
        print("nothing to re-execute: the old run's result holds for the new code")
        return 0
    sys.path[:0] = [str(new / "tests"), str(new / "src")]
    import generated  # noqa: PLC0415 - the new checkout's harness

    rng = random.Random(args.seed)
    drawn = [generated.draw_example(rng) for _ in range(args.examples)]
    problems = 0
    for start in range(0, len(todo), 100):
        chunk = todo[start:start + 100]
        for index, result in zip(chunk, generated.check_examples([drawn[i] for i in chunk])):
            found = generated.problems(result)
            if found:
                problems += 1
                print(f"example {index} {result['example']}: {found[:3]}")
    print(f"re-executed: {len(todo)}; with a problem: {problems}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
