"""Two source trees of the engine on the same files, in-process, interleaved: processor seconds
and a digest of every output, for a change that must make the engine faster and change nothing.

    python benchmarks/engine_ab.py --base /tmp/head-tree/src --new src --rounds 3 \\
        tests/fixtures examples
    python benchmarks/engine_ab.py --base /tmp/head-tree/src --new src --rounds 2 /tmp/big/b5k.py

Each round runs the base tree, then the new one, in a fresh interpreter each (``transform_source``
with every codemod and ``--unsafe-fixes``, the CLI's own engine call, on every ``*.py`` file
under the given paths that compiles, in path order); the order alternates between rounds, so
that the load of a shared machine falls on both alike. The time is that of the transforms alone
(``time.process_time`` around them: imports and reading excluded). The digest covers each
file's output text, findings and notes (or the exception's type): equal digests mean the two
trees give the same results on these files. Prints every run, the medians, their ratio (new /
base), whether the digests agree and, where they do not, each file whose output differs (its
text, or its findings only); exit status 1 where they do not. CI does not run this.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import hashlib, json, sys, time, warnings
src, paths = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, src)
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.options import RunOptions
codemods, options = all_codemods(), RunOptions(unsafe_fixes=True)
texts = [(p, open(p, encoding="utf-8", errors="replace").read()) for p in paths]
digest, seconds, files = hashlib.sha256(), 0.0, {}
for path, text in texts:
    start = time.process_time()
    try:
        out = transform_source(text, codemods, options=options, filename=path)
        result = repr((out.text, [repr(f) for f in out.findings], out.notes, out.suppressed))
        parts = (out.text, result)
    except Exception as exc:  # the same failure is the same result
        result = type(exc).__name__
        parts = (result, result)
    seconds += time.process_time() - start
    digest.update(path.encode() + b"\0" + result.encode() + b"\0")
    files[path] = [hashlib.sha256(part.encode()).hexdigest()[:16] for part in parts]
print(json.dumps({"seconds": seconds, "digest": digest.hexdigest()[:16], "files": files}))
"""


def python_files(paths: list[Path]) -> list[str]:
    found = []
    for root in paths:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            try:
                compile(path.read_text(encoding="utf-8", errors="replace"), str(path), "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                continue
            found.append(str(path.resolve()))
    return found


def run(src: Path, files: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(src.resolve()), json.dumps(files)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{src}: the engine run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the base tree's src/ folder")
    parser.add_argument("--new", type=Path, required=True, help="the new tree's src/ folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("paths", type=Path, nargs="+", help="files or folders (their *.py files)")
    args = parser.parse_args()
    files = python_files(args.paths)
    if not files:
        raise SystemExit("no Python file that compiles under the paths given")
    times: dict[str, list[float]] = {"base": [], "new": []}
    digests: dict[str, set[str]] = {"base": set(), "new": set()}
    per_file: dict[str, dict] = {}
    for round_number in range(args.rounds):
        order = ("base", "new") if round_number % 2 == 0 else ("new", "base")
        for which in order:
            result = run(args.base if which == "base" else args.new, files)
            times[which].append(result["seconds"])
            digests[which].add(result["digest"])
            per_file[which] = result["files"]
            print(f"round {round_number + 1} {which}: {result['seconds']:.1f} CPU-s, digest {result['digest']}", flush=True)
    base, new = statistics.median(times["base"]), statistics.median(times["new"])
    same = digests["base"] == digests["new"] and len(digests["base"]) == 1
    print(f"{len(files)} files; median base {base:.1f} CPU-s, new {new:.1f} CPU-s: new/base {new / base:.3f}; "
          f"outputs {'identical' if same else 'DIFFER'} ({', '.join(sorted(digests['base'] | digests['new']))})")
    for path in files:  # where they differ: the rewritten text, or only the findings
        base_file, new_file = per_file["base"][path], per_file["new"][path]
        if base_file != new_file:
            print(f"  differs: {path} ({'text' if base_file[0] != new_file[0] else 'findings only'})")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
