"""The engine with and without ``syntax/node_classes.py`` (libcst's node classes answering
``isinstance`` through ``type``'s checks), in one process, interleaved: processor seconds.

    python benchmarks/node_classes_ab.py --rounds 8 --every 3 tests/fixtures examples
    python benchmarks/node_classes_ab.py --rounds 4 --every 6 /tmp/legacy-speed/corpus

One interpreter runs ``transform_source`` (every codemod, ``--unsafe-fixes``) on every
``--every``-th ``*.py`` file under the paths, once with the plain checks installed and once with
libcst's ABC checks put back, alternating which goes first from round to round, so that a shared
machine's load falls on both alike (``engine_ab.py`` compares two source trees in fresh
interpreters; here the switch is the only difference, which keeps the noise of separate processes
out). Prints the sums, the ratio (plain / ABC) and the ratio of each round; the outputs of the two
are compared too (exit status 1 where they differ). CI does not run this.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--every", type=int, default=1, help="take every N-th file (default: all)")
    args = parser.parse_args(argv)

    from torchfix_device.codemods.catalog import all_codemods
    from torchfix_device.engine import transform_source
    from torchfix_device.options import RunOptions
    from torchfix_device.syntax import node_classes

    files = sorted(f for p in args.paths for f in ([p] if p.is_file() else p.rglob("*.py")))[:: args.every]
    texts = [(str(f), f.read_text(encoding="utf-8", errors="replace")) for f in files]
    codemods, options = all_codemods(), RunOptions(unsafe_fixes=True)

    def run() -> tuple[float, list]:
        outputs = []
        started = time.process_time()
        for name, text in texts:
            try:
                out = transform_source(text, codemods, options=options, filename=name)
                outputs.append((out.text, out.findings, out.notes))
            except Exception as exc:  # noqa: BLE001 - the same failure is the same result
                outputs.append(type(exc).__name__)
        return time.process_time() - started, outputs

    run()  # imports, memos
    seconds: dict[bool, list[float]] = {True: [], False: []}
    outputs: dict[bool, list] = {}
    for i in range(args.rounds):
        for plain in ((True, False) if i % 2 else (False, True)):
            node_classes.install() if plain else node_classes.uninstall()
            took, outputs[plain] = run()
            seconds[plain].append(took)
            print(f"round {i + 1} {'plain' if plain else 'ABC  '}: {took:.2f} CPU-s", flush=True)
    node_classes.install()
    same = outputs[True] == outputs[False]
    ratio = sum(seconds[True]) / sum(seconds[False])
    print(f"{len(texts)} files, {args.rounds} rounds: ABC checks {sum(seconds[False]):.1f} CPU-s, plain "
          f"{sum(seconds[True]):.1f}: plain/ABC {ratio:.3f} (rounds: "
          + ", ".join(f"{a / b:.3f}" for a, b in zip(seconds[True], seconds[False]))
          + f"); outputs {'identical' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
