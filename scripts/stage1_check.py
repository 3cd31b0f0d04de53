#!/usr/bin/env python
"""Check on real code that stage 1 (``torchfix_device.prefilter.candidates``) never leaves out a codemod
that would act.

    python scripts/stage1_check.py PATH... [--select TFD003,TFD004]

For every Python file under PATH and every codemod whose trigger substrings occur in it but whose
stage-1 condition says "no", the codemod is run alone, without stage 1
(``engine.transform_unfiltered``, unsafe fixes on). If it reports or changes anything, the
condition was not a necessary one: the file and codemod are printed as MISSED and the script
exits 1. Slow on purpose (one libcst run per left-out codemod and file); read-only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from torchfix_device.options import RunOptions
from torchfix_device.prefilter.candidates import candidate_codemods, parse_facts
from torchfix_device.codemods.catalog import select_codemods
from torchfix_device.files.sources import SourceError, read_source
from torchfix_device.engine import active_codemods, transform_unfiltered
from torchfix_device.files.selection import collect_files


def left_out_but_acting(text: str, codemods) -> list[str]:
    """Codes of the codemods stage 1 leaves out of ``text`` that report or change something."""
    facts = parse_facts(text)
    if facts is None:
        return []  # stage 1 sends text CPython cannot parse on whole
    triggered = active_codemods(text, codemods)
    kept = set(candidate_codemods(facts, triggered))
    missed = []
    for codemod in triggered:
        if codemod in kept:
            continue
        try:
            out = transform_unfiltered(text, [codemod], options=RunOptions(unsafe_fixes=True))
        except Exception as exc:  # a failure the filtered run would not show
            missed.append(f"{codemod.code} (raised {type(exc).__name__})")
            continue
        if out.findings or out.text != text:
            missed.append(codemod.code)
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--select", default="", help="comma-separated codes (default: every codemod)")
    args = parser.parse_args()
    codemods = select_codemods([c for c in args.select.split(",") if c] or None, None)
    files, _ = collect_files(args.paths)
    start, missed = time.perf_counter(), 0
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            text = read_source(path).text
        except SourceError:
            continue
        for code in left_out_but_acting(text, codemods):
            print(f"MISSED {path}: {code}")
            missed += 1
    print(f"{len(files)} files, {missed} missed, {time.perf_counter() - start:.0f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
