"""Benchmark torchfix-device against TorchFix and the parser floors, in one run, on this machine.

    python benchmarks/run.py                                   # every corpus, 3 runs each
    python benchmarks/run.py --corpus legacy --corpus torch-nn-optim --runs 3
    python benchmarks/run.py --corpus synthetic --synthetic-files 2000,8000

Corpora (built under --workdir, never committed):
  torch           the installed torch package's own Python sources
  torch-nn-optim  torch/nn and torch/optim only
  legacy          old PyTorch packages from the package index (`pip download --no-deps`)
  synthetic       a generated monorepo mixing legacy patterns and plain code (--synthetic-files;
                  TorchFix is left out there unless --torchfix-on-synthetic)

Measured per corpus (wall seconds, median of --runs; peak RSS of the largest process):
  torchfix-device check: cold (default --jobs), cold --jobs 1, warm cache (default --jobs);
  TorchFix 0.7 (`torchfix --select ALL`, installed into its own venv by this script);
  bare libcst.parse_module of every file, of the files the substring prefilter keeps and of
  those stage 1 keeps; ast.parse of every file (the floors run on as many processes as the
  default --jobs).
The Markdown table goes to --output (default benchmarks/RESULTS.md). CI does not run this.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEGACY_PACKAGES = [
    "pytorch-pretrained-bert==0.6.2", "pretrainedmodels==0.7.4", "torchnet==0.0.4", "pytorch-transformers==1.2.0",
]
TORCHFIX_SPEC = "torchfix==0.7.*"

# One child per measurement: it runs the command and reports the wall time and the peak RSS of
# the largest process it waited for (RUSAGE_CHILDREN's ru_maxrss is a per-process maximum).
_CHILD = r"""
import json, resource, subprocess, sys, time
cmd = json.loads(sys.argv[1])
start = time.perf_counter()
proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - start
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "peak_mb": peak_kb / 1024, "rc": proc.returncode, "err": proc.stderr.decode(errors="replace")[-400:]}))
"""

# The floors: parse every listed file, in a pool of N processes.
_FLOOR = r"""
import ast, json, sys
from multiprocessing import Pool
kind, list_file, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = [l for l in open(list_file, encoding="utf-8").read().splitlines() if l]

def parse(path):
    text = open(path, "rb").read().decode("utf-8", "replace")
    try:
        if kind == "ast":
            ast.parse(text)
        else:
            import libcst
            libcst.parse_module(text)
    except Exception:
        pass

if __name__ == "__main__":
    if jobs > 1:
        with Pool(jobs) as pool:
            pool.map(parse, sorted(files, key=lambda f: -len(open(f, "rb").read())), chunksize=1)
    else:
        for f in files:
            parse(f)
"""


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- corpora ---------------------------------------------------------------------------------
def _copy_python_tree(source: Path, target: Path) -> None:
    for path in source.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)


def _mark_project(root: Path) -> None:
    """A pyproject.toml at the corpus root: the cache goes next to it, inside the work folder."""
    (root / "pyproject.toml").write_text('[project]\nname = "benchmark-corpus"\nversion = "0"\n')


def build_torch(workdir: Path, subset: tuple[str, ...] = ()) -> Path:
    import torch  # only to find its sources; the tool under test never imports it

    source = Path(torch.__file__).parent
    name = "torch-" + "-".join(subset) if subset else "torch"
    root = workdir / "corpora" / name
    if not root.exists():
        for part in subset or ("",):
            _copy_python_tree(source / part, root / part if part else root)
        _mark_project(root)
    return root


def build_legacy(workdir: Path) -> Path:
    root = workdir / "corpora" / "legacy"
    if root.exists():
        return root
    downloads = workdir / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(downloads), *LEGACY_PACKAGES], check=True)
    for archive in sorted(downloads.iterdir()):
        target = root / archive.name.split("-")[0]
        if archive.suffix == ".whl" or archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    if member.endswith(".py"):
                        z.extract(member, target)
        elif archive.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(archive) as t:
                members = [m for m in t.getmembers() if m.isfile() and m.name.endswith(".py")]
                t.extractall(target, members=members, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(target, members=members)
    _mark_project(root)
    return root


_SYNTHETIC_TEMPLATES = [
    # legacy patterns
    'import torch\nfrom torch.autograd import Variable\n\n\ndef step{i}(model, x):\n    x = Variable(x).cuda()\n    return model(x)\n',
    'import torch\nimport torch.nn as nn\n\n\nclass Net{i}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear({i} % 7 + 1, 2)\n\n    def forward(self, x):\n        return self.fc(x) + torch.zeros(2)\n',
    'import torch\n\nstate{i} = torch.load("ckpt{i}.pt")\nloss = torch.nn.MSELoss(size_average=False)\n',
    # plain code
    'import os\n\n\ndef helper{i}(path):\n    """Read a file."""\n    with open(os.path.join(path, "f{i}")) as handle:\n        return handle.read()\n',
    'from dataclasses import dataclass\n\n\n@dataclass\nclass Config{i}:\n    name: str = "run{i}"\n    steps: int = {i}\n\n    def describe(self):\n        return f"{{self.name}}: {{self.steps}}"\n',
    'import torch\n\n\ndef add{i}(a, b):\n    return torch.add(a, b) * {i}\n',
]


def build_synthetic(workdir: Path, files: int) -> Path:
    root = workdir / "corpora" / f"synthetic-{files}"
    if root.exists():
        return root
    rng = random.Random(files)
    for i in range(files):
        template = _SYNTHETIC_TEMPLATES[rng.randrange(len(_SYNTHETIC_TEMPLATES))]
        path = root / f"team{i % 50:02d}" / f"pkg{i % 17:02d}" / f"mod{i:06d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(i=i) * (1 + rng.randrange(3)))
    _mark_project(root)
    return root


# -- tools -----------------------------------------------------------------------------------
def torchfix_executable(workdir: Path) -> Path:
    venv = workdir / "torchfix-venv"
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        log(f"installing {TORCHFIX_SPEC} into {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", TORCHFIX_SPEC], check=True)
    return exe


def torchfix_device_executable() -> list[str]:
    exe = shutil.which("torchfix-device")
    return [exe] if exe else [sys.executable, "-m", "torchfix_device"]


def python_files(root: Path) -> list[Path]:
    sys.path.insert(0, str(HERE.parent / "src"))
    from torchfix_device.files.selection import collect_files

    files, _ = collect_files([root])
    return files


def kept_files(files: list[Path]) -> tuple[list[Path], list[Path]]:
    """The files the substring prefilter keeps (some selected codemod's trigger occurs: item 2 of
    the issue, the floor its target names), and those stage 1 keeps (the ones libcst parses)."""
    from torchfix_device.prefilter.candidates import candidate_codemods, parse_facts
    from torchfix_device.codemods.catalog import all_codemods
    from torchfix_device.files.sources import SourceError, read_source
    from torchfix_device.engine import active_codemods
    from torchfix_device.files.selection import MAX_FILE_BYTES

    prefiltered, kept = [], []
    for path in files:
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = read_source(path).text
        except SourceError:
            continue
        triggered = active_codemods(text, all_codemods())
        if not triggered:
            continue
        prefiltered.append(path)
        facts = parse_facts(text)
        if facts is None or candidate_codemods(facts, triggered):
            kept.append(path)
    return prefiltered, kept


# -- measuring -------------------------------------------------------------------------------
def measure(cmd: list[str], runs: int, before=None) -> dict:
    walls, peaks, rcs = [], [], set()
    for _ in range(runs):
        if before is not None:
            before()
        out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cmd)], capture_output=True, text=True, check=True)
        data = json.loads(out.stdout)
        walls.append(data["wall"])
        peaks.append(data["peak_mb"])
        rcs.add(data["rc"])
        if data["rc"] not in (0, 1):
            log(f"  exit {data['rc']}: {data['err']}")
    return {"median": statistics.median(walls), "walls": walls, "peak_mb": max(peaks), "rc": sorted(rcs)}


def bench_corpus(name: str, root: Path, args, jobs: int, workdir: Path) -> list[dict]:
    files = python_files(root)
    prefiltered, kept = kept_files(files)
    lists = workdir / "lists"
    lists.mkdir(parents=True, exist_ok=True)
    all_list, pre_list, kept_list = lists / f"{name}.all", lists / f"{name}.prefiltered", lists / f"{name}.kept"
    all_list.write_text("\n".join(map(str, files)) + "\n")
    pre_list.write_text("\n".join(map(str, prefiltered)) + "\n")
    kept_list.write_text("\n".join(map(str, kept)) + "\n")
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    pre_lines = sum(p.read_bytes().count(b"\n") for p in prefiltered)
    kept_lines = sum(p.read_bytes().count(b"\n") for p in kept)
    log(f"{name}: {len(files)} files ({lines} lines); the prefilter keeps {len(prefiltered)} ({pre_lines} lines), "
        f"stage 1 {len(kept)} ({kept_lines} lines)")
    cache = root / ".torchfix_device_cache"

    def clear_cache() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    tfd = torchfix_device_executable()
    rows = []

    def row(label: str, n_files: int, result: dict) -> None:
        result.update(label=label, files=n_files)
        rows.append(result)
        log(f"  {label}: median {result['median']:.2f} s of {[round(w, 2) for w in result['walls']]}, peak {result['peak_mb']:.0f} MB")

    row(f"torchfix-device check, cold, --jobs {jobs} (default)", len(files),
        measure([*tfd, "check", "--jobs", str(jobs), str(root)], args.runs, before=clear_cache))
    if args.jobs1_runs:
        row("torchfix-device check, cold, --jobs 1", len(files),
            measure([*tfd, "check", "--jobs", "1", "--no-cache", str(root)], args.jobs1_runs))
    clear_cache()
    measure([*tfd, "check", "--jobs", str(jobs), str(root)], 1)  # fill the cache
    row(f"torchfix-device check, warm cache, --jobs {jobs}", len(files),
        measure([*tfd, "check", "--jobs", str(jobs), str(root)], args.runs))
    if not args.skip_torchfix and (args.torchfix_on_synthetic or not name.startswith("synthetic")):
        exe = torchfix_executable(workdir)
        row(f"TorchFix 0.7 `--select ALL`, --jobs {jobs}", len(files),
            measure([str(exe), "--select", "ALL", "--jobs", str(jobs), str(root)], args.torchfix_runs))
    floor = [sys.executable, "-c", _FLOOR]
    row(f"libcst.parse_module, every file ({jobs} processes)", len(files), measure([*floor, "libcst", str(all_list), str(jobs)], args.runs))
    row(f"libcst.parse_module, files the substring prefilter keeps ({jobs} processes)", len(prefiltered),
        measure([*floor, "libcst", str(pre_list), str(jobs)], args.runs))
    row(f"libcst.parse_module, files stage 1 keeps ({jobs} processes)", len(kept), measure([*floor, "libcst", str(kept_list), str(jobs)], args.runs))
    row(f"ast.parse, every file ({jobs} processes)", len(files), measure([*floor, "ast", str(all_list), str(jobs)], args.runs))
    for r in rows:
        r.update(corpus=name, corpus_files=len(files), corpus_lines=lines, kept=len(kept), kept_lines=kept_lines,
                 prefiltered=len(prefiltered), prefiltered_lines=pre_lines)
    return rows


# -- report ----------------------------------------------------------------------------------
def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}×" if b > 0 else "n/a"


def markdown(all_rows: dict[str, list[dict]], args, jobs: int) -> str:
    out = [
        "# Benchmark results",
        "",
        f"Produced by `python benchmarks/run.py {' '.join(sys.argv[1:])}` on "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores "
        f"(default `--jobs` {jobs}). {args.note}",
        "",
        f"Wall seconds are the median of {args.runs} runs ({args.torchfix_runs} for TorchFix, "
        f"{f'{args.jobs1_runs} for `--jobs 1`' if args.jobs1_runs else '`--jobs 1` not run'}); peak memory is the "
        "largest resident set of any one process of the run (for a pool: the biggest worker).",
        "",
    ]
    for name, rows in all_rows.items():
        first = rows[0]
        out += [
            f"## {name}: {first['corpus_files']} files, {first['corpus_lines']:,} lines "
            f"(the substring prefilter keeps {first['prefiltered']} files, {first['prefiltered_lines']:,} lines; "
            f"stage 1 sends {first['kept']} files, {first['kept_lines']:,} lines, to libcst)",
            "",
            "| measurement | files | wall s (median) | runs | files/s | peak MB |",
            "|---|---:|---:|---|---:|---:|",
        ]
        for r in rows:
            runs = ", ".join(f"{w:.2f}" for w in r["walls"])
            out.append(f"| {r['label']} | {r['files']} | {r['median']:.2f} | {runs} | {r['files'] / r['median']:.0f} | {r['peak_mb']:.0f} |")
        cold = next(r["median"] for r in rows if "cold" in r["label"] and "(default)" in r["label"])
        warm = next(r["median"] for r in rows if "warm" in r["label"])
        kept = next(r["median"] for r in rows if "stage 1 keeps" in r["label"])
        pre = next(r["median"] for r in rows if "prefilter keeps" in r["label"])
        tf = next((r["median"] for r in rows if r["label"].startswith("TorchFix")), None)
        out += ["", "Same-run ratios:", ""]
        if tf is not None:
            out.append(f"- TorchFix / torchfix-device cold: **{_ratio(tf, cold)}** (target ≥ 10×)")
        out.append(f"- torchfix-device cold / libcst parse of the files the substring prefilter keeps: "
                   f"**{_ratio(cold, pre)}** (target ≤ 1.3×)")
        out.append(f"- torchfix-device cold / libcst parse of only the files stage 1 keeps (stricter): **{_ratio(cold, kept)}**")
        out.append(f"- torchfix-device cold / warm: **{_ratio(cold, warm)}** (target ≥ 20×)")
        out.append("")
    synthetic = sorted((rows[0]["corpus_files"], rows[0]["median"], rows[0]["peak_mb"]) for n, rows in all_rows.items() if n.startswith("synthetic-"))
    if len(synthetic) >= 2:
        (n1, t1, m1), (n2, t2, m2) = synthetic[0], synthetic[-1]
        out += [f"Synthetic monorepo, cold check: {(t2 - t1) / (n2 - n1) * 1000:.2f} s per 1,000 extra files "
                f"({n1:,} files {t1:.1f} s = {n1 / t1:.0f} files/s, {n2:,} files {t2:.1f} s = {n2 / t2:.0f} files/s; "
                f"linear growth from the smaller predicts {t1 * n2 / n1:.1f} s). Peak memory of the biggest process: "
                f"{m1:.0f} MB and {m2:.0f} MB.", ""]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", choices=["torch", "torch-nn-optim", "legacy", "synthetic"],
                        help="corpora to run (repeatable; default: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median reported)")
    parser.add_argument("--torchfix-runs", type=int, default=None, help="runs for TorchFix (default: --runs)")
    parser.add_argument("--jobs1-runs", type=int, default=None,
                        help="runs for the --jobs 1 check (default: --runs; 0 leaves that row out)")
    parser.add_argument("--skip-torchfix", action="store_true", help="do not install or run TorchFix")
    parser.add_argument("--torchfix-on-synthetic", action="store_true",
                        help="also run TorchFix on the synthetic monorepos (hours at 40k files; off by default)")
    parser.add_argument("--synthetic-files", default="10000,40000", help="sizes of the synthetic monorepos")
    parser.add_argument("--jobs", type=int, default=None, help="processes for the default runs (default: cores)")
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "torchfix-device-bench")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--note", default="", help="a sentence about the conditions (shared machine, load)")
    args = parser.parse_args()
    args.torchfix_runs = args.torchfix_runs or args.runs
    args.jobs1_runs = args.runs if args.jobs1_runs is None else args.jobs1_runs
    sys.path.insert(0, str(HERE.parent / "src"))
    from torchfix_device.run.parallel import default_jobs

    jobs = args.jobs or default_jobs()
    args.workdir.mkdir(parents=True, exist_ok=True)
    chosen = args.corpus or ["legacy", "torch-nn-optim", "torch", "synthetic"]
    all_rows: dict[str, list[dict]] = {}
    for corpus in chosen:
        if corpus == "synthetic":
            for size in (int(s) for s in args.synthetic_files.split(",") if s):
                all_rows[f"synthetic-{size}"] = bench_corpus(f"synthetic-{size}", build_synthetic(args.workdir, size), args, jobs, args.workdir)
        else:
            root = {"torch": lambda: build_torch(args.workdir), "torch-nn-optim": lambda: build_torch(args.workdir, ("nn", "optim")),
                    "legacy": lambda: build_legacy(args.workdir)}[corpus]()
            all_rows[corpus] = bench_corpus(corpus, root, args, jobs, args.workdir)
        args.output.write_text(markdown(all_rows, args, jobs))  # after each corpus: a partial table survives a stop
    (args.workdir / "results.json").write_text(json.dumps(all_rows, indent=1))
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
