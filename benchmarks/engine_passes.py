"""Where the engine's time goes on one file, codemod by codemod: how many times each codemod
transformed a tree (passes), how many nodes it entered (statements stage 1 skips are not
entered), and its processor seconds; libcst's import transforms (`AddImportsVisitor`,
`RemoveImportsVisitor`, run after a codemod that asked for them) are shown on rows of their own,
named with that codemod, too (their seconds are also in that codemod's row).

    python benchmarks/engine_passes.py FILE [FILE ...] [--pythonpath SRC] [--safe]

The run is ``transform_source`` with every codemod (``--unsafe-fixes`` unless ``--safe``), the
CLI's own engine call, in this interpreter; the counts come from wrapping the engine's visit
hooks, which adds about a tenth to the time (the total printed is that of the wrapped run).
For the large concatenated file of ``legacy_speed.py`` (``build_big_file``), compare the rows
of two sizes: a codemod whose seconds grow faster than its nodes does more than a walk a node.
CI does not run this.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--pythonpath", default=str(Path(__file__).resolve().parent.parent / "src"), help="the engine's tree (default: this checkout's src)")
    parser.add_argument("--safe", action="store_true", help="safe fixes only")
    args = parser.parse_args()
    sys.path.insert(0, args.pythonpath)
    from libcst.codemod import Codemod as LibcstCodemod

    from torchfix_device.codemods.catalog import all_codemods
    from torchfix_device.engine import transform_source
    from torchfix_device.engine.visiting import EngineVisiting
    from torchfix_device.options import RunOptions

    rows: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0, 0.0])  # passes, nodes, seconds
    on_visit, transform_module, imports = EngineVisiting.on_visit, EngineVisiting.transform_module, LibcstCodemod.transform_module

    def counted_visit(self, node):
        rows[self.code][1] += 1
        return on_visit(self, node)

    running: list[str] = []  # the codemod whose transform is under way

    def timed_transform(self, tree):
        start = time.process_time()
        running.append(self.code)
        try:
            return transform_module(self, tree)
        finally:
            running.pop()
            rows[self.code][0] += 1
            rows[self.code][2] += time.process_time() - start

    def timed_imports(self, tree):
        start = time.process_time()
        try:
            return imports(self, tree)
        finally:
            if not isinstance(self, EngineVisiting):  # libcst's own: AddImportsVisitor, RemoveImportsVisitor
                name = f"({type(self).__name__} of {running[-1] if running else '?'})"
                rows[name][0] += 1
                rows[name][2] += time.process_time() - start

    EngineVisiting.on_visit, EngineVisiting.transform_module = counted_visit, timed_transform
    LibcstCodemod.transform_module = timed_imports
    codemods, options = all_codemods(), RunOptions(unsafe_fixes=not args.safe)
    for path in args.files:
        rows.clear()
        text = path.read_text(encoding="utf-8", errors="replace")
        start = time.process_time()
        transform_source(text, codemods, options=options, filename=str(path))
        total = time.process_time() - start
        print(f"{path}: {text.count(chr(10)):,} lines, {total:.1f} CPU-s in all")
        print(f"{'codemod':<34} {'passes':>6} {'nodes':>10} {'CPU-s':>7}")
        for code, (passes, nodes, seconds) in sorted(rows.items(), key=lambda row: -row[1][2]):
            print(f"{code:<34} {passes:>6} {nodes:>10,} {seconds:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
