"""Issue 31 ("Measure like a scientist"): a seeded random sample of the lines a corpus run
changed, each shown with its hunk, for reading by hand.

    python benchmarks/sample_changed_lines.py /tmp/rc-held/orig /tmp/rc-held/safe --seed 20261127 \\
        --count 100 > /tmp/sample.md

``ORIGINAL`` and ``REWRITTEN`` are the two trees :mod:`real_repos` leaves in its ``--workdir``
(``orig`` and ``safe`` or ``unsafe``). A changed line is a line of the rewritten file that a
line diff (:mod:`difflib`, per file) marks as inserted or replaced; every such line of every file
is one candidate, in path order, and ``random.Random(seed).sample`` picks ``--count`` of them.
Each pick is printed as ``path:line`` with the lines it replaced and a few lines around it, as
Markdown, numbered, so that a reader can write a verdict beside each number. Notebooks are
compared as their JSON text (a cell's source line is a JSON string). CI does not run this.
"""

from __future__ import annotations

import argparse
import difflib
import random
import sys
from pathlib import Path

SUFFIXES = (".py", ".ipynb")


def changed_lines(original: Path, rewritten: Path) -> list[tuple[str, int, list[str], list[str], list[str]]]:
    """(path, line number in the rewritten file, the old lines, the new lines, the new file's lines)
    for every inserted or replaced line, in path order."""
    found = []
    for new_path in sorted(p for p in rewritten.rglob("*") if p.suffix in SUFFIXES and p.is_file()):
        relative = new_path.relative_to(rewritten)
        old_path = original / relative
        if not old_path.is_file():
            continue
        old_bytes, new_bytes = old_path.read_bytes(), new_path.read_bytes()
        if old_bytes == new_bytes:
            continue
        old = old_bytes.decode("utf-8", "replace").splitlines()
        new = new_bytes.decode("utf-8", "replace").splitlines()
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag in ("replace", "insert"):
                for j in range(j1, j2):
                    found.append((relative.as_posix(), j + 1, old[i1:i2], new[j1:j2], new))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("original", type=Path)
    parser.add_argument("rewritten", type=Path)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--context", type=int, default=3, help="lines of the new file shown around a pick")
    args = parser.parse_args(argv)
    for folder in (args.original, args.rewritten):
        if not folder.is_dir():
            parser.error(f"{folder}: not a folder")
    lines = changed_lines(args.original, args.rewritten)
    picks = sorted(random.Random(args.seed).sample(range(len(lines)), min(args.count, len(lines))))
    out = sys.stdout
    out.write(f"# {len(picks)} of {len(lines)} changed lines (seed {args.seed})\n\n")
    out.write(f"`{args.original}` → `{args.rewritten}`\n\n")
    for number, index in enumerate(picks, 1):
        path, line, old, new, text = lines[index]
        out.write(f"## {number}. `{path}:{line}`\n\n```\n")
        out.write(f"{text[line - 1]}\n```\n\nreplaced ({len(old)} line(s)):\n\n```\n")
        out.write("\n".join(old) + "\n```\n\naround it:\n\n```\n")
        start, end = max(0, line - 1 - args.context), min(len(text), line + args.context)
        for k in range(start, end):
            out.write(f"{'>' if k == line - 1 else ' '} {k + 1:5} {text[k]}\n")
        out.write("```\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
