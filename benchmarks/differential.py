"""Issue 21: the differential generator at scale (``tests/generated.py``, every piece included).

    PYTHONPATH=src python benchmarks/differential.py [--examples 10000] [--seed 0] [--batch 200]
        [--jobs 2] [--output benchmarks/RESULTS-differential.md]

Prints: examples, compiled, idempotent, behaviour equal, and the differences by kind (the piece
kinds of the examples that differ, and the first line of each difference). Known issue-21 pieces
are included, so until they are fixed the differences are expected; ``--exclude-known`` leaves
them out (the property test's view).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import subprocess
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "src")]

import generated  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=200, help="examples per worker process")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="batches checked at once, each in its own process (default: cores)")
    parser.add_argument("--exclude-known", action="store_true", help="leave out generated.KNOWN_ISSUE_21")
    parser.add_argument("--output", type=Path, help="write a Markdown summary here")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    counts = Counter()
    by_kind: Counter = Counter()
    by_problem: Counter = Counter()
    examples_shown: list = []
    start = time.perf_counter()
    batches = []  # drawn up front, in order, so the examples depend on --seed alone
    while sum(map(len, batches)) < args.examples:
        size = min(args.batch, args.examples - sum(map(len, batches)))
        batches.append([generated.draw_example(rng, exclude_known=args.exclude_known) for _ in range(size)])
    done = 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for results in pool.map(generated.check_examples, batches):
            for result in results:
                counts["examples"] += 1
                counts["compiled"] += result["compiled"]
                counts["idempotent"] += result["compiled"] and result["idempotent"]
                found = generated.problems(result)
                behaviour = [p for p in found if p != "second run changes the output"]
                counts["behaviour equal"] += result["compiled"] and not behaviour
                if found:
                    for kind in sorted({k for k, _ in result["example"]}):
                        by_kind[kind] += 1
                    for problem in {p.split(":")[0].rsplit(" ", 1)[0] if p.startswith("[") else p.split(":")[0] for p in found}:
                        by_problem[problem] += 1
                    if len(examples_shown) < 5:
                        examples_shown.append((result["example"], found[:3]))
            done += len(results)
            print(f"{done}/{args.examples} examples, {time.perf_counter() - start:.0f} s", file=sys.stderr)
            if args.output:  # a partial summary after every batch: a killed run still leaves its figures
                write_summary(args, counts, by_kind, by_problem, time.perf_counter() - start, done)
    seconds = time.perf_counter() - start

    lines = [f"{key}: {counts[key]}" for key in ("examples", "compiled", "idempotent", "behaviour equal")]
    lines.append(f"seconds: {seconds:.1f}")
    lines.append("examples with a difference, by piece kind they contain:")
    lines += [f"  {kind}: {n}" + (" (known issue 21)" if kind in generated.KNOWN_ISSUE_21 else "")
              for kind, n in by_kind.most_common()]
    lines.append("differences by kind (leg and observable):")
    lines += [f"  {problem}: {n}" for problem, n in by_problem.most_common()]
    lines.append("first examples with a difference:")
    lines += [f"  {example}: {found}" for example, found in examples_shown]
    print("\n".join(lines))
    if args.output:
        write_summary(args, counts, by_kind, by_problem, seconds, done)
    return 0


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src", "tests"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out + (" (with uncommitted changes in src/ or tests/)" if dirty else "")


def write_summary(args, counts, by_kind, by_problem, seconds: float, done: int) -> None:
    md = [
        "# Differential generator (issue 21)",
        "",
        f"`python benchmarks/differential.py --examples {args.examples} --seed {args.seed} --jobs {args.jobs}"
        + (" --exclude-known" if args.exclude_known else "") + "`",
        "",
        f"Code: commit {_commit()}." + ("" if done >= args.examples
                                       else f" **Partial: {done} of {args.examples} examples checked so far.**"),
        "",
        "| measure | count |", "|---|---|",
        *[f"| {key} | {counts[key]} |" for key in ("examples", "compiled", "idempotent", "behaviour equal")],
        f"| seconds | {seconds:.1f} |",
        "",
        "## Examples with a difference, by piece kind",
        "",
        "| piece | examples | known issue 21 |", "|---|---|---|",
        *[f"| {kind} | {n} | {generated.KNOWN_ISSUE_21.get(kind, '')} |" for kind, n in by_kind.most_common()],
        "",
        "## Differences by kind",
        "",
        "| difference | examples |", "|---|---|",
        *[f"| `{problem}` | {n} |" for problem, n in by_problem.most_common()],
        "",
    ]
    args.output.write_text("\n".join(md), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
