"""Issue 31 ("Speed"): processor time of a cold check over the development corpus of legacy
repos, next to TorchFix 0.7 and an earlier build, interleaved in one run; and one large legacy
file made of the corpus's files.

    python benchmarks/legacy_speed.py --base-src /tmp/base-1d58ef4/src --runs 3 \\
        --workdir /tmp/legacy-speed --output benchmarks/RESULTS-legacy.md

1. **The corpus.** The ``dev`` tier of ``real_corpus/repos.csv``, extracted from the bare
   mirrors under ``--mirror-root`` with :func:`real_repos.extract` (``*.py`` and ``*.ipynb``;
   blobs a mirror lacks are left out and listed) into ``--workdir`` (never committed).
2. **The tools**, cold, on the corpus's ``*.py`` files alone (linked into ``corpus-py``: the files
   TorchFix reads, so that all are timed on the same files): ``torchfix-device check --no-cache``
   from ``--src`` (default: this checkout) and from ``--base-src`` (an earlier build's ``src``,
   e.g. ``git worktree add /tmp/base-1d58ef4 1d58ef4``), and ``torchfix --select ALL`` (TorchFix
   0.7, ``--torchfix``, else installed into a virtual environment under ``--workdir``; it reads
   the ``*.py`` files only), all with ``--jobs`` processes. ``--runs`` rounds; in each round
   every tool runs once, the order rotating from round to round, so that the load of a shared
   machine falls on all alike. Then the two builds on the whole corpus, notebooks included
   (``--skip-notebooks`` leaves it out). A run whose stderr holds a traceback (1d58ef4 dies on a
   notebook output without ``output_type``, leaving the files after it unchecked) is marked
   ``crashed`` and given no ratio.
3. **One large file**: the corpus's ``*.py`` files that compile, in path order, concatenated
   until ``--big-lines`` lines (``from __future__`` imports moved to the top), checked with
   ``check --no-cache --jobs 1`` by each build (``--big-timeout`` seconds at most).

Measured per run: processor seconds (user + system) of the whole process tree (the tool and its
workers: ``RUSAGE_CHILDREN`` of a fresh measuring process), wall seconds, and the peak resident
set of the largest process. Reported: medians, every run, and the ratios of the medians
(``--src`` over each other tool; the median of the per-round ratios too). Writes Markdown headed
by the exact command to ``--output`` (default: stdout only). CI does not run this.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_repos  # noqa: E402  (benchmarks/real_repos.py: the corpus and its extraction)

TORCHFIX_SPEC = "torchfix==0.7.0"

# One fresh process per measurement: its RUSAGE_CHILDREN after the wait is the tool's whole
# process tree (workers included, once reaped), and nothing else.
_CHILD = r"""
import json, os, resource, subprocess, sys, time
cmd, env, cwd, timeout = json.loads(sys.argv[1])
start = time.perf_counter()
try:
    done = subprocess.run(cmd, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    stderr = done.stderr.decode(errors="replace")
    rc, err = done.returncode, stderr[-600:]
    if "Traceback" in stderr:  # a tool that dies on one file leaves the rest undone: not a time
        rc = "crashed"
        err = stderr[stderr.rindex("Traceback"):][:300] + " ... " + err[-300:]
except subprocess.TimeoutExpired:
    rc, err = "timeout", ""
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "peak_mb": usage.ru_maxrss / 1024, "rc": rc, "err": err}))
"""


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the corpus and the large file -----------------------------------------------------------------
def build_corpus(mirror_root: Path, workdir: Path) -> tuple[Path, dict[str, int]]:
    """The dev tier's ``*.py`` and ``*.ipynb`` files under ``workdir/corpus`` (made once)."""
    root = workdir / "corpus"
    counts_file = workdir / "corpus-counts.json"
    if root.is_dir() and counts_file.exists():
        return root, json.loads(counts_file.read_text())
    repos = real_repos.select_repos(real_repos.read_repos(real_repos.DEFAULT_REPOS), "dev", None)
    counts: dict[str, int] = {}
    for repo in repos:
        counts[repo["repo"]] = real_repos.extract(mirror_root, repo["repo"], repo["commit"], root / real_repos.repo_dir_name(repo["repo"]))
    for name, missing in sorted(real_repos.MISSING_BLOBS.items()):
        log(f"{name}: {len(missing)} blobs missing from the mirror, left out")
    counts_file.write_text(json.dumps(counts, indent=1))
    return root, counts


def python_files_only(corpus: Path, workdir: Path) -> Path:
    """The corpus's ``*.py`` files alone, linked under ``workdir/corpus-py`` (made once): the
    files TorchFix reads, so that every tool is timed on the same files."""
    root = workdir / "corpus-py"
    done = workdir / "corpus-py.done"
    if root.is_dir() and done.exists():
        return root
    for path in sorted(corpus.rglob("*.py")):
        if not path.is_file():
            continue
        target = root / path.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            os.link(path, target)
    done.write_text("")
    return root


def build_big_file(corpus: Path, lines: int, target: Path) -> tuple[int, int]:
    """The corpus's ``*.py`` files that compile, in path order, concatenated until ``lines``
    lines; ``from __future__`` imports gathered at the top. Returns (lines, files)."""
    parts: list[str] = []
    futures: set[str] = set()
    count = 0
    for path in sorted(corpus.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        drop: set[int] = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                futures.update(alias.name for alias in node.names)
                drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        body = [line for number, line in enumerate(text.splitlines(), 1) if number not in drop]
        parts.append(f"# ---- {path.relative_to(corpus).as_posix()}\n" + "\n".join(body) + "\n")
        count += len(body) + 1
        if count >= lines:
            break
    text = "".join(f"from __future__ import {name}\n" for name in sorted(futures)) + "".join(parts)
    compile(text, str(target), "exec", dont_inherit=True)
    target.write_text(text, encoding="utf-8")
    return text.count("\n"), len(parts)


def torchfix_executable(workdir: Path, given: str | None) -> Path:
    if given:
        return Path(given)
    venv = workdir / "torchfix-venv"
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        log(f"installing {TORCHFIX_SPEC} into {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", TORCHFIX_SPEC], check=True)
    return exe


# -- measuring -------------------------------------------------------------------------------------
def measure(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps([cmd, env, str(cwd), timeout])], capture_output=True, text=True, check=True
    )
    data = json.loads(out.stdout)
    if data["rc"] not in (0, 1):
        log(f"  exit {data['rc']}: {data['err']}")
    return data


def tfd_command(src: str, jobs: int, target: str) -> tuple[list[str], dict[str, str]]:
    env = {"PYTHONPATH": src, "NO_COLOR": "1", "COLUMNS": "200"}
    return [sys.executable, "-m", "torchfix_device", "check", "--no-cache", "--jobs", str(jobs), target], env


def interleaved(tools: dict[str, tuple[list[str], dict[str, str]]], runs: int, cwd: Path, timeout: float | None = None) -> dict[str, list[dict]]:
    """Every tool once per round, the order rotating from round to round."""
    names = list(tools)
    results: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(runs):
        shift = round_ % len(names)
        order = names[shift:] + names[:shift]
        if round_ % 2:
            order.reverse()
        for name in order:
            cmd, env = tools[name]
            data = measure(cmd, env, cwd, timeout)
            results[name].append(data)
            log(f"  round {round_ + 1}: {name}: {data['cpu']:.1f} CPU-s, {data['wall']:.1f} s wall, peak {data['peak_mb']:.0f} MB, exit {data['rc']}")
    return results


# -- report ----------------------------------------------------------------------------------------
def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def table(results: dict[str, list[dict]], reference: str) -> list[str]:
    rows = [
        "| tool | CPU s (median) | CPU s, every run | wall s (median) | peak MB (largest process) | exit |",
        "|---|---:|---|---:|---:|---|",
    ]
    for name, runs in results.items():
        cpus = ", ".join(f"{r['cpu']:.1f}" for r in runs)
        exits = ", ".join(sorted({str(r["rc"]) for r in runs}))
        rows.append(f"| {name} | {_median(runs, 'cpu'):.1f} | {cpus} | {_median(runs, 'wall'):.1f} | {max(r['peak_mb'] for r in runs):.0f} | {exits} |")
    rows += ["", "Ratios of processor time (same run):", ""]
    ours = results[reference]
    for name, runs in results.items():
        if name == reference:
            continue
        unfinished = sorted({str(r["rc"]) for r in [*ours, *runs] if r["rc"] not in (0, 1)})
        if unfinished:
            rows.append(f"- {reference} / {name}: none: a run did not finish its files (exit {', '.join(unfinished)})")
            continue
        paired = [a["cpu"] / b["cpu"] for a, b in zip(ours, runs) if b["cpu"] > 0]
        rows.append(
            f"- {reference} / {name}: **{_median(ours, 'cpu') / _median(runs, 'cpu'):.2f}×** of the medians "
            f"(per round: {', '.join(f'{p:.2f}' for p in paired)}; their median {statistics.median(paired):.2f}×)"
        )
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="rounds (every tool once per round)")
    parser.add_argument("--src", default=str(HERE.parent / "src"), help="the src folder of the build to measure (default: this checkout)")
    parser.add_argument("--base-src", help="the src folder of an earlier build to compare with (e.g. a worktree of 1d58ef4)")
    parser.add_argument("--base-name", default=None, help="how the table names the earlier build (default: its folder)")
    parser.add_argument("--torchfix", help="TorchFix 0.7's executable (default: installed into a venv under --workdir)")
    parser.add_argument("--skip-torchfix", action="store_true")
    parser.add_argument("--skip-notebooks", action="store_true", help="skip the builds' runs over the whole corpus, notebooks included")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for every tool (default: cores)")
    parser.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/legacy-speed"), help="the corpus and the large file (never committed)")
    parser.add_argument("--big-lines", type=int, default=20000, help="lines of the large file (0: skip it)")
    parser.add_argument("--big-runs", type=int, default=None, help="rounds on the large file (default: --runs)")
    parser.add_argument("--big-timeout", type=float, default=600.0, help="seconds a build may take on the large file")
    parser.add_argument("--note", default="", help="a sentence about the conditions (shared machine, load)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus, counts = build_corpus(args.mirror_root, args.workdir)
    files = sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix in (".py", ".ipynb"))
    py = [p for p in files if p.suffix == ".py"]
    lines = sum(p.read_bytes().count(b"\n") for p in py)
    log(f"corpus: {len(counts)} repos, {len(files)} files ({len(py)} *.py, {lines:,} lines; {len(files) - len(py)} *.ipynb)")

    new_name = f"torchfix-device ({Path(args.src).resolve().parent.name})"
    base_name = args.base_name or (f"torchfix-device ({Path(args.base_src).resolve().parent.name})" if args.base_src else "")
    python_only = python_files_only(corpus, args.workdir)
    tools: dict[str, tuple[list[str], dict[str, str]]] = {new_name: tfd_command(args.src, args.jobs, python_only.name)}
    if args.base_src:
        tools[base_name] = tfd_command(args.base_src, args.jobs, python_only.name)
    if not args.skip_torchfix:
        exe = torchfix_executable(args.workdir, args.torchfix)
        tools["TorchFix 0.7 --select ALL"] = ([str(exe), "--select", "ALL", "--jobs", str(args.jobs), python_only.name], {})
    log(f"cold runs over the corpus's *.py files, {args.runs} rounds, --jobs {args.jobs}")
    corpus_results = interleaved(tools, args.runs, args.workdir)
    whole_tools = {new_name: tfd_command(args.src, args.jobs, corpus.name)}
    if args.base_src:
        whole_tools[base_name] = tfd_command(args.base_src, args.jobs, corpus.name)
    whole_results: dict[str, list[dict]] = {}
    if not args.skip_notebooks:
        log(f"cold runs over the whole corpus (notebooks too), {args.runs} rounds")
        whole_results = interleaved(whole_tools, args.runs, args.workdir)

    big_section: list[str] = []
    if args.big_lines:
        big = args.workdir / f"legacy_{args.big_lines}.py"
        big_lines, big_files = build_big_file(corpus, args.big_lines, big)
        big_tools = {new_name: tfd_command(args.src, 1, big.name)}
        if args.base_src:
            big_tools[base_name] = tfd_command(args.base_src, 1, big.name)
        log(f"the large file: {big_lines:,} lines from {big_files} files, {args.big_runs or args.runs} rounds")
        big_results = interleaved(big_tools, args.big_runs or args.runs, args.workdir, args.big_timeout)
        big_section = [
            f"## One large file: {big_lines:,} lines ({big.stat().st_size / 1000:.0f} kB), the first {big_files} `*.py` files of the corpus that compile, concatenated",
            "",
            f"`check --no-cache --jobs 1` on it (targets: ≤ 20 CPU-s, ≤ 500 MB; a run stopped at {args.big_timeout:g} s shows exit `timeout`).",
            "",
            *table(big_results, new_name),
            "",
        ]

    command = shlex.join(["python", "benchmarks/legacy_speed.py", *argv])
    text = "\n".join([
        "# Legacy corpus: processor time (issue 31)",
        "",
        f"Produced by `{command}` on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores. {args.note}".rstrip(),
        "",
        f"## Cold check over the dev corpus's `*.py` files: {len(counts)} repos, {len(py)} files, {lines:,} lines",
        "",
        f"The files TorchFix reads (its {len(files) - len(py)} `*.ipynb` files left out, linked into one folder), "
        f"each tool with `--jobs {args.jobs}`: `torchfix-device check --no-cache`, "
        "`torchfix --select ALL`. Processor time is user + system of the whole process tree. "
        f"{args.runs} rounds, the order of the tools rotating from round to round. A run whose output "
        "holds a traceback did not check every file: its exit reads `crashed` and it has no ratio.",
        "",
        *table(corpus_results, new_name),
        "",
        *([
            f"## Cold check over the whole dev corpus: {len(files)} files, notebooks included",
            "",
            *table(whole_results, new_name),
            "",
        ] if whole_results else []),
        *big_section,
    ]) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    (args.workdir / "results.json").write_text(json.dumps({"python files": corpus_results, "whole corpus": whole_results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
