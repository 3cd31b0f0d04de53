"""One large legacy file: a generated ~990 kB file with 20,000 findings (issue 22, item 9),
transformed by the engine in a fresh interpreter; processor time, wall time and peak memory.

    python benchmarks/big_file.py [--findings 20000] [--pythonpath SRC ...] [--output FILE]

Each ``--pythonpath`` is a ``src`` folder of a checkout to measure (default: the installed
package), so a commit can be compared with another on the same generated file. With
``--findings`` given several times (``--findings 5000 --findings 10000``) the sizes show whether
time grows linearly. Writes Markdown headed by the exact command to ``--output`` (default:
stdout). CI does not run it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

_MEASURE = (
    "import resource, sys, time\n"
    "from torchfix_device.codemods.catalog import all_codemods\n"
    "from torchfix_device.engine import transform_source\n"
    "text = open(sys.argv[1], encoding='utf-8').read()\n"
    "cpu, wall = time.process_time(), time.perf_counter()\n"
    "out = transform_source(text, all_codemods())\n"
    "cpu, wall = time.process_time() - cpu, time.perf_counter() - wall\n"
    "print(len(out.findings), f'{cpu:.1f}', f'{wall:.1f}', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n"
)


def generate(findings: int) -> str:
    """Functions of ten steps, each step three findings (TFD001, TFD006, TFD005), with a long
    comment so the file is about 49 bytes a finding (990 kB for 20,000)."""
    lines = ["import torch", "import torch.nn as nn", "", ""]
    count = index = 0
    while count < findings:
        lines.append(f"def step_{index}(model, batch, path):")
        for j in range(10):
            k = index * 10 + j
            lines.append(f"    out_{j} = model(batch.cuda()).data[0]  # training step {k:06d} of the legacy loop, kept as it was")
            lines.append(f"    ckpt_{j} = torch.load(path + '_{k:06d}.pt')")
            count += 3
        lines += ["    return out_0", ""]
        index += 1
    return "\n".join(lines) + "\n"


def measure(path: Path, pythonpath: str | None) -> list[str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, env=env, check=True)
    return done.stdout.split()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--findings", type=int, action="append")
    parser.add_argument("--pythonpath", action="append", help="a src folder to measure (repeatable)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    sizes = args.findings or [20000]
    sources = args.pythonpath or [None]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for size in sizes:
            path = Path(work) / f"legacy_{size}.py"
            path.write_text(generate(size), encoding="utf-8")
            kb = path.stat().st_size / 1000
            for source in sources:
                found, cpu, wall, peak = measure(path, source)
                rows.append(f"| {source or 'installed'} | {kb:.0f} kB | {found} | {cpu} s | {wall} s | {peak} MB |")
    command = shlex.join(["python", "benchmarks/big_file.py", *argv])
    text = "\n".join([
        f"`{command}`", "",
        "| source | file | findings | processor time | wall time | peak memory |",
        "|---|---:|---:|---:|---:|---:|", *rows, "",
    ])
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
