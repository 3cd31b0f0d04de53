#!/usr/bin/env python
"""Run the rewrite engine over real codebases and check its promises on every file.

    python scripts/corpus_check.py PATH... [--pypi NAME==VERSION]... [--unsafe-fixes]

Each corpus (a folder, or a PyPI release fetched at run time with ``pip download`` into a
temporary folder and unpacked there; nothing is kept) is copied to a temporary folder, and the
engine (``torchfix_device.run.runner.run(..., options=RunOptions(write=True))``) rewrites the COPY; the original is never
touched. Then, for every Python file:

- no crash: the run returns one result per file; a file it cannot handle is a ``failed`` result
  with a reason (tallied by reason). ``internal error`` results are codemod bugs: violations;
- a rewritten file compiles, and holds exactly the bytes the engine reported;
- the rewrite touches only statements that hold a fixed finding: both versions are flattened into
  statements (a compound statement is its header, spanning its whole block, then its blocks),
  aligned by ``ast.dump`` (no positions), and every statement of the original that changed or
  vanished must span a line with a fixed finding; statements may only be added to files that
  have a fix (the device binding, ``import torch``), and in those files imports may change or
  go (``from torch.autograd import Variable`` once no ``Variable`` is left);
- a second run over the rewritten files changes nothing;
- a file without findings, and any file not rewritten, is byte-identical to the original.

It prints two tables (files, changed, failures by reason, seconds, violations; findings per
code) and exits 1 if any check failed. ``tests/test_corpus.py`` runs the same checks on the
installed torch's ``nn/modules`` and ``optim``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import difflib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.results import FileResult
from torchfix_device.run.runner import run

BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass
class CorpusReport:
    name: str
    files: int = 0
    changed: int = 0
    failed: Counter = field(default_factory=Counter)
    """Failed files by reason."""
    skipped: Counter = field(default_factory=Counter)
    fixed: Counter = field(default_factory=Counter)
    """Fixed findings per code."""
    manual: Counter = field(default_factory=Counter)
    """Findings left for manual review (or held back as unsafe) per code."""
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    """Broken promises, one line each: ``path: check: details``."""


# -- fetching and copying -------------------------------------------------------------------------
def fetch_pypi(spec: str, workdir: Path) -> Path:
    """Download ``NAME==VERSION`` (an sdist, else a wheel) into ``workdir`` and unpack it."""
    download = workdir / "download"
    attempts = (["--no-binary", ":all:"], ["--only-binary", ":all:"], [])
    errors = []
    for extra in attempts:
        shutil.rmtree(download, ignore_errors=True)
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *extra, spec, "-d", str(download)]
        done = subprocess.run(command, capture_output=True, text=True)
        archives = sorted(download.glob("*")) if download.exists() else []
        if done.returncode == 0 and archives:
            break
        errors.append(done.stderr.strip().splitlines()[-1:] or ["?"])
    else:
        raise SystemExit(f"cannot download {spec}: {errors}")
    archive = archives[0]
    unpacked = workdir / "unpacked"
    unpacked.mkdir()
    if archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2")):
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(unpacked)
    elif archive.suffix in (".zip", ".whl"):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(unpacked)
    else:
        raise SystemExit(f"{spec}: unknown archive type {archive.name}")
    return unpacked


def copy_python_tree(source: Path, target: Path) -> None:
    """Folders and ``*.py`` files of ``source`` (links kept as links, never followed)."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if not n.endswith(".py") and not (Path(folder) / n).is_dir()]

    shutil.copytree(source, target, symlinks=True, ignore=ignore)


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


# -- the statement-level comparison ---------------------------------------------------------------
def statements(tree: ast.Module) -> list[tuple[str, int, int]]:
    """``(key, first line, last line)`` per statement, depth first; a compound statement is its
    header (its blocks emptied) spanning the whole statement, then a marker and the statements of
    each block."""
    out: list[tuple[str, int, int]] = []

    def visit(nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.match_case):
                start = node.pattern.lineno
                end = max((getattr(n, "end_lineno", start) or start) for n in node.body)
            else:
                start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
                end = node.end_lineno or start
            blocks = [f for f in BLOCK_FIELDS if isinstance(getattr(node, f, None), list)]
            if not blocks:
                out.append((ast.dump(node), start, end))
                continue
            header = copy.copy(node)
            for name in blocks:
                setattr(header, name, [])
            out.append((ast.dump(header), start, end))
            for name in blocks:
                out.append((f"<{name}>", start, end))
                visit(getattr(node, name))
            out.append(("</block>", start, end))

    visit(tree.body)
    return out


def unexplained_changes(old_text: str, new_text: str, fix_lines: set[int], other_lines: set[int]) -> list[str]:
    """Statements of ``old_text`` that the rewrite changed although they hold no fixed finding."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old, new = statements(ast.parse(old_text)), statements(ast.parse(new_text))
    matcher = difflib.SequenceMatcher(None, [k for k, _, _ in old], [k for k, _, _ in new], autojunk=False)
    problems = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2 and not fix_lines:
            first, last = new[j1][1], new[j2 - 1][2]
            problems.append(f"statements added at new lines {first}-{last} in a file without a fix")
        for key, start, end in old[i1:i2]:
            if key.startswith("<") or key == "</block>":
                continue
            if fix_lines and key.startswith(("Import(", "ImportFrom(")):
                continue  # bookkeeping of a fix: an import it made unused (`Variable`), or extended
            if not any(start <= line <= end for line in fix_lines):
                why = " (only a manual-review finding there)" if any(start <= l <= end for l in other_lines) else ""
                problems.append(f"statement at lines {start}-{end} changed without a fixed finding{why}")
    return problems


# -- one corpus -----------------------------------------------------------------------------------
def reason(error: str | None) -> str:
    text = (error or "").lower()
    for needle, label in (
        ("internal error", "internal error"),
        ("syntax error", "syntax error"),
        ("nested too deeply", "nested too deeply"),
        ("mb limit", "too large"),
        ("symbolic link", "symbolic link"),
        ("cannot decode", "encoding"),
        ("coding cookie", "encoding"),
        ("nul bytes", "NUL bytes"),
        ("no python files", "no Python files"),
    ):
        if needle in text:
            return label
    return (error or "?").split(";")[0][:40]


def check_tree(source: Path, name: str | None = None, *, unsafe_fixes: bool = False) -> CorpusReport:
    """Copy ``source``, run the engine on the copy and check every file (see the module doc)."""
    report = CorpusReport(name or str(source))
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        root = Path(tmp) / "tree"
        copy_python_tree(source, root)
        originals = {p.relative_to(root): p.read_bytes() for p in root.rglob("*.py") if p.is_file() and not p.is_symlink()}
        codemods = all_codemods()
        with working_directory(root):
            started = time.perf_counter()
            try:
                results = run([Path(".")], codemods, options=RunOptions(write=True, unsafe_fixes=unsafe_fixes))
            except Exception as exc:  # the runner promises never to raise
                report.violations.append(f"{source}: crash: the run raised {type(exc).__name__}: {exc}")
                return report
            report.seconds = time.perf_counter() - started
            changed = _check_results(results, root, originals, report)
            if changed:  # a second run over the rewritten files changes nothing
                for again in run(changed, codemods, options=RunOptions(unsafe_fixes=unsafe_fixes)):
                    if again.status != "unchanged":
                        detail = again.error or _first_difference(again)
                        report.violations.append(f"{again.display}: second run: {again.status}: {detail}")
            processed = {r.path.resolve() for r in results}
        for rel, data in originals.items():  # files the run did not look at (skipped folders)
            if (root / rel).resolve() not in processed and (root / rel).read_bytes() != data:
                report.violations.append(f"{rel.as_posix()}: not processed, yet its bytes changed")
    return report


def _check_results(results: list[FileResult], root: Path, originals: dict[Path, bytes], report: CorpusReport) -> list[Path]:
    changed = []
    for result in results:
        path = result.path
        rel = Path(os.path.relpath(path.resolve(), root.resolve()))  # the run's cwd is root
        original = originals.get(rel)
        if result.status in ("changed", "unchanged", "failed") and original is not None:
            report.files += 1
        for finding in result.findings:
            (report.fixed if finding.fixed else report.manual)[finding.code] += 1
        if result.status == "failed":
            report.failed[reason(result.error)] += 1
            if "internal error" in (result.error or ""):
                report.violations.append(f"{result.display}: internal error: {result.error}")
        elif result.status == "skipped":
            report.skipped[reason(result.error)] += 1
        if original is None:
            continue
        now = path.read_bytes()
        if result.status != "changed":
            if now != original:
                report.violations.append(f"{result.display}: {result.status}, yet its bytes changed")
            continue
        report.changed += 1
        changed.append(path)
        assert result.source is not None and result.new_text is not None
        if now != result.source.encode(result.new_text):
            report.violations.append(f"{result.display}: the bytes written are not the reported rewrite")
        if not any(f.fixed for f in result.findings):
            report.violations.append(f"{result.display}: rewritten without a fixed finding")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(result.new_text, result.display, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            report.violations.append(f"{result.display}: the rewrite does not compile: {exc}")
            continue
        fix_lines = {f.line for f in result.findings if f.fixed}
        other_lines = {f.line for f in result.findings if not f.fixed}
        for problem in unexplained_changes(result.source.text, result.new_text, fix_lines, other_lines):
            report.violations.append(f"{result.display}: {problem}")
    return changed


def _first_difference(result: FileResult) -> str:
    if result.source is None or result.new_text is None:
        return "?"
    old, new = result.source.text.splitlines(), result.new_text.splitlines()
    for number, (a, b) in enumerate(zip(old, new), 1):
        if a != b:
            return f"line {number}: {a.strip()!r} -> {b.strip()!r}"
    return f"{len(old)} -> {len(new)} lines"


# -- output ---------------------------------------------------------------------------------------
def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) if cell.replace(".", "").isdigit() else cell.ljust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_reports(reports: list[CorpusReport]) -> str:
    def tally(counter: Counter) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "-"

    main = [["corpus", "files", "changed", "failed", "failed by reason", "skipped", "seconds", "violations"]]
    for r in reports:
        main.append([r.name, str(r.files), str(r.changed), str(sum(r.failed.values())), tally(r.failed),
                     tally(r.skipped), f"{r.seconds:.1f}", str(len(r.violations))])
    codes = sorted(set().union(*(set(r.fixed) | set(r.manual) for r in reports)))
    per_code = [["code"] + [r.name for r in reports]]
    for code in codes:
        per_code.append([code] + [f"{r.fixed[code]} fixed / {r.manual[code]} manual" for r in reports])
    out = [_table(main), "", "findings per code (fixed / left for review or held back):"]
    out.append(_table(per_code) if codes else "(none)")
    for r in reports:
        for violation in r.violations:
            out.append(f"VIOLATION [{r.name}] {violation}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="folders to check (a copy is rewritten)")
    parser.add_argument("--pypi", action="append", default=[], metavar="NAME==VERSION",
                        help="a release fetched from PyPI at run time (repeatable)")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    args = parser.parse_args(argv)
    if not args.paths and not args.pypi:
        parser.error("give at least one PATH or --pypi NAME==VERSION")
    reports = []
    for path in args.paths:
        if not path.is_dir():
            parser.error(f"not a folder: {path}")
        label = f"{path.resolve().parent.name}/{path.resolve().name}"
        reports.append(check_tree(path.resolve(), label, unsafe_fixes=args.unsafe_fixes))
        print(f"checked {path}: {reports[-1].files} files, {reports[-1].seconds:.0f} s", file=sys.stderr, flush=True)
    for spec in args.pypi:
        with tempfile.TemporaryDirectory(prefix="corpus-pypi-") as tmp:
            tree = fetch_pypi(spec, Path(tmp))
            reports.append(check_tree(tree, spec, unsafe_fixes=args.unsafe_fixes))
        print(f"checked {spec}: {reports[-1].files} files, {reports[-1].seconds:.0f} s", file=sys.stderr, flush=True)
    print(format_reports(reports))
    return 1 if any(r.violations for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
