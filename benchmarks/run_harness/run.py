#!/usr/bin/env python3
"""Run harness: does a legacy script run after the migration?

For each entry of the manifest (``manifest.toml`` beside this file) the repository is extracted
at its commit from the local bare mirror into a temporary folder, three copies are made
(``original``; ``safe``: after ``python -m torchfix_device apply PATH``; ``unsafe``: after
``apply --unsafe-fixes PATH``, each run on the whole extracted repository, outside git), and the
entry is executed in each with the stand-ins (``standins/``, loaded through ``sitecustomize``),
a step limit and a timeout. A run counts as a success when it finished (exit status 0) or reached
its step limit (exit status 86 and the stand-in's marker); with ``--device cuda`` it must also
have allocated on the GPU and raised no device-mismatch error.

    python benchmarks/run_harness/run.py --make-venv /tmp/harness-venv     # once
    python benchmarks/run_harness/run.py --python /tmp/harness-venv/bin/python --jobs 2 --json runs.json

Nothing is written into the mirrors or into this repository: extraction reads blobs with
``git cat-file``, every copy, stand-in and output lives under a temporary folder (``--keep DIR``
keeps them there).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DEFAULT_MANIFEST = HERE / "manifest.toml"
STANDINS = HERE / "standins"
REQUIREMENTS = HERE / "requirements.txt"
DEFAULT_MIRROR_ROOT = Path("/work/.mirror")

VARIANTS = ("original", "safe", "unsafe")
APPLY_FLAGS = {"safe": [], "unsafe": ["--unsafe-fixes"]}
LIMIT_STATUS = 86
LIMIT_MARKER = "[run-harness] step limit reached"

DEVICE_MISMATCH = re.compile(
    r"Expected all tensors to be on the same device"
    r"|Expected object of (device|backend) type"
    r"|Input type \(.*\) and weight type \(.*\) should be the same"
    r"|should be the same or input should be a MKLDNN tensor"
    r"|is on (CPU|cuda|CUDA).* but .* is on"
    r"|Expected .* to be on .* device"
    r"|can't convert cuda.* device type tensor to numpy"
    r"|device-side assert|tensors? (is|are) on different devices"
    r"|indices should be either on cpu or on the same device"
)


# ----------------------------------------------------------------------------- manifest


@dataclasses.dataclass
class Entry:
    """One script or notebook to run (a row of the manifest)."""

    id: str
    repo: str
    commit: str
    entry: str
    cwd: str = ""
    argv: list[str] = dataclasses.field(default_factory=list)
    cpu_argv: list[str] = dataclasses.field(default_factory=list)  # the script's own CPU switch, --device cpu only
    standins: list[str] = dataclasses.field(default_factory=list)
    prepare: list[str] = dataclasses.field(default_factory=list)
    steps: int = 3
    forwards: int = 0
    timeout: int = 120
    dataset_size: int = 64
    note: str = ""
    expect: dict[str, str] = dataclasses.field(default_factory=dict)  # CI subset: today's outcome per variant
    known: dict[str, str] = dataclasses.field(default_factory=dict)  # CI subset: variant -> known class (a/b/c)
    local: str = ""  # a folder of this repository instead of a mirror (the CI subset)

    @property
    def notebook(self) -> bool:
        return self.entry.endswith(".ipynb")

    @property
    def source_key(self) -> str:
        return self.local or f"{self.repo}@{self.commit}"


def load_manifest(path: Path) -> list[Entry]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    defaults = data.get("defaults", {})
    entries = []
    for row in data.get("script", []):
        merged = {**defaults, **row}
        if "local" in merged:
            merged["local"] = str((path.parent / merged["local"]).resolve())
        unknown = set(merged) - {f.name for f in dataclasses.fields(Entry)}
        if unknown:
            raise SystemExit(f"{path}: entry {row.get('id')!r}: unknown keys {sorted(unknown)}")
        entries.append(Entry(**merged))
    ids = [e.id for e in entries]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise SystemExit(f"{path}: duplicate ids {sorted(duplicates)}")
    return entries


# ----------------------------------------------------------------------------- sources


def git_dir(mirror_root: Path, repo: str) -> Path:
    base = mirror_root / repo.replace("/", "+") / "repo"
    return base / ".git" if (base / ".git").is_dir() else base


def extract(mirror_root: Path, repo: str, commit: str, dest: Path) -> dict[str, int]:
    """Write the files of ``repo`` at ``commit`` under ``dest``, reading the bare mirror only.

    ``git archive`` stops at the first blob a partial mirror lacks (large data files were not
    fetched), so blobs are read one by one with ``git cat-file --batch``; missing ones are
    counted and skipped, symbolic links and submodules too."""
    gd = git_dir(mirror_root, repo)
    if not gd.is_dir():
        raise FileNotFoundError(f"no mirror for {repo} at {gd}")
    listing = subprocess.run(["git", "--git-dir", str(gd), "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout
    blobs = []
    for item in listing.split(b"\0"):
        if not item:
            continue
        meta, path = item.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000":
            blobs.append((mode, sha, os.fsdecode(path)))
    counts = {"files": 0, "missing": 0}
    dest.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(["git", "--git-dir", str(gd), "cat-file", "--batch"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for mode, sha, path in blobs:
            proc.stdin.write(sha + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline()
            if header.endswith(b" missing\n"):
                counts["missing"] += 1
                continue
            size = int(header.split()[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)
            target = (dest / path).resolve()
            if dest.resolve() not in target.parents:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if mode == b"100755":
                target.chmod(0o755)
            counts["files"] += 1
        proc.stdin.close()
    return counts


def make_pristine(entry: Entry, mirror_root: Path, dest: Path) -> dict:
    if entry.local:
        shutil.copytree(entry.local, dest, ignore=shutil.ignore_patterns("__pycache__"))
        return {"files": sum(1 for p in dest.rglob("*") if p.is_file()), "missing": 0}
    return extract(mirror_root, entry.repo, entry.commit, dest)


def apply_tool(tree: Path, variant: str, tool_python: str, tool_pythonpath: str | None) -> dict:
    """``python -m torchfix_device apply [--unsafe-fixes] tree`` on a copy, outside git."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("RUN_HARNESS", None)
    if tool_pythonpath:
        env["PYTHONPATH"] = tool_pythonpath
    command = [tool_python, "-m", "torchfix_device", "apply", "--no-cache", *APPLY_FLAGS[variant], str(tree)]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, errors="replace")
    summary = [line for line in proc.stderr.splitlines() if line.strip()][-3:]
    return {"returncode": proc.returncode, "seconds": round(time.monotonic() - started, 2),
            "summary": summary, "stderr": proc.stderr[-20000:]}


# ----------------------------------------------------------------------------- notebooks

CELL_MAGICS_WITH_PYTHON = ("%%time", "%%timeit", "%%capture", "%%prun")
FUTURE = re.compile(r"^from\s+__future__\s+import\b")


def _scan(line: str, depth: int, quote: str | None) -> tuple[int, str | None]:
    """Bracket depth and open triple-quoted string after ``line`` (enough to tell whether the
    next line starts a statement: a ``%`` there is a magic, inside brackets it is an operator)."""
    i = 0
    while i < len(line):
        if quote:
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
            i += 2 if line[i] == "\\" else 1
            continue
        char = line[i]
        if char == "#":
            break
        if char in "\"'":
            triple = line[i:i + 3]
            if triple in ('"""', "'''"):
                quote, i = triple, i + 3
                continue
            end = i + 1
            while end < len(line) and line[end] != char:
                end += 2 if line[end] == "\\" else 1
            i = end + 1
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        i += 1
    return depth, quote


def notebook_script(notebook: Path) -> str:
    """The code cells of a notebook joined as one script, IPython magics and ``!`` lines dropped
    (a ``%%time``-like cell magic keeps its Python body; other cell magics drop the cell)."""
    nb = json.loads(notebook.read_text(encoding="utf-8"), strict=False)
    if "cells" in nb:
        cells, key = nb["cells"], "source"
    else:  # nbformat 3
        cells, key = [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])], "input"
    out: list[str] = []
    futures: list[str] = []
    for index, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get(key, "")
        if isinstance(source, list):
            source = "".join(source)
        lines = source.splitlines()
        first = next((line for line in lines if line.strip()), "")
        prefix = first[: len(first) - len(first.lstrip())]
        if prefix:  # IPython's leading_indent: the first line's indentation goes from every line
            lines = [line[len(prefix):] if line.startswith(prefix) else line for line in lines]
        if lines and lines[0].lstrip().startswith("%%"):
            if not lines[0].lstrip().startswith(CELL_MAGICS_WITH_PYTHON):
                continue
            lines = lines[1:]
        kept = []
        depth, quote = 0, None
        for line in lines:
            stripped = line.lstrip()
            at_statement = depth == 0 and quote is None and not (kept and kept[-1].rstrip().endswith("\\"))
            if at_statement and (stripped.startswith(("%", "!")) or stripped.startswith("get_ipython()")):
                indent = line[: len(line) - len(stripped)]
                kept.append(f"{indent}pass  # [run-harness] dropped: {stripped}")
                continue
            if at_statement and FUTURE.match(line):  # each cell compiles alone in IPython
                futures.append(line.strip())
                kept.append(f"pass  # [run-harness] moved to the top: {line.strip()}")
                continue
            kept.append(line)
            depth, quote = _scan(line, depth, quote)
        out.append(f"# %% cell {index}\n" + "\n".join(kept) + "\n")
    return "".join(f"{line}\n" for line in dict.fromkeys(futures)) + "".join(out)


# ----------------------------------------------------------------------------- one run


@dataclasses.dataclass
class Result:
    id: str
    variant: str
    outcome: str  # finished | step-limit | error | timeout | setup-error
    ok: bool
    returncode: int | None
    exception_type: str | None = None
    exception_name: str | None = None
    exception_message: str | None = None
    steps: int = 0
    forwards: int = 0
    cuda_max_memory_allocated: int | None = None
    device_mismatch: bool = False
    why_not_ok: str | None = None
    seconds: float = 0.0
    stderr_tail: str = ""


TRACEBACK_LAST = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Iteration|error))(?:: (?P<message>.*))?$")


def last_exception(stderr: str) -> tuple[str, str] | None:
    """The last exception a traceback in ``stderr`` shows: (type, message)."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    found = None
    for line in lines[starts[-1] + 1:]:
        if line.startswith((" ", "\t")) or not line.strip():
            continue
        match = TRACEBACK_LAST.match(line.strip())
        if match:
            found = (match.group("type"), match.group("message") or "")
    return found


def _records(folder: Path) -> list[dict]:
    records = []
    for path in sorted(folder.glob("record.*.json")):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            pass
    return records


def script_env(entry: Entry, standins: Path, record_dir: Path, device: str, extra_pythonpath: str = "") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "PYTHON"))}
    env.update({
        "RUN_HARNESS": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(standins), extra_pythonpath) if p),
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "HARNESS_STANDINS": ",".join(entry.standins),
        "HARNESS_STEPS": str(entry.steps),
        "HARNESS_FORWARDS": str(entry.forwards),
        "HARNESS_DATASET_SIZE": str(entry.dataset_size),
        "HARNESS_RECORD_DIR": str(record_dir),
        "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),
        "MKL_NUM_THREADS": env.get("MKL_NUM_THREADS", "1"),
    })
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _run(command: list[str], cwd: Path, env: dict, timeout: float) -> tuple[int | None, str, str, bool]:
    with subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            timed_out = True
        # a child left behind (multiprocessing, DataLoader workers) must not outlive the run
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return (None if timed_out else proc.returncode), out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out


def _run_forked(script: list[str], cwd: Path, env: dict, timeout: float, python: str,
                record_dir: Path) -> tuple[int | None, str, str, bool] | None:
    """``python script...`` forked from an interpreter that has imported torch (``--warm``; the
    tool's ``verify.warm``, whose text says what such a run shares with a new interpreter):
    what :func:`_run` returns, or None where no such interpreter can start (then run cold)."""
    from torchfix_device.verify import warm

    # the server starts without the harness's own variables: its sitecustomize installs nothing,
    # each run's child runs it again under the run's environment
    server_env = {k: v for k, v in env.items() if k != "RUN_HARNESS" and not k.startswith("HARNESS_")}
    found = warm.run_script(script, cwd, env, timeout, python=python, server_env=server_env, scratch=record_dir)
    if found is None:
        return None
    status, out, err = found
    return status, out, err, status is None


def run_entry(entry: Entry, tree: Path, variant: str, workdir: Path, python: str, device: str = "cpu",
              standins: Path = STANDINS, warm: bool = False) -> Result:
    """Copy ``tree`` (one variant of the repository) to ``workdir``, prepare the stand-in data,
    and execute the entry there. ``workdir`` must not exist yet. ``warm``: on the CPU, the run is
    forked from an interpreter that has imported torch (:func:`_run_forked`) instead of a new one."""
    started = time.monotonic()
    shutil.copytree(tree, workdir, symlinks=True)
    record_dir = workdir.parent / f"{workdir.name}.records"
    record_dir.mkdir()
    cwd = workdir / entry.cwd
    env = script_env(entry, standins, record_dir, device)
    for step in entry.prepare:
        rc, out, err, timed_out = _run([python, "-m", "run_harness_standins.prepare", step], cwd, env, 120)
        if rc != 0:
            return Result(entry.id, variant, "setup-error", False, rc, "PrepareError", "PrepareError",
                          f"prepare {step!r} failed: {(err or out).strip().splitlines()[-1:]}",
                          seconds=round(time.monotonic() - started, 2), stderr_tail=err[-4000:])
    for stale in record_dir.glob("record.*.json"):
        stale.unlink()
    script = workdir / entry.entry
    if entry.notebook:
        runnable = script.with_name(script.stem.replace(" ", "_") + ".harness_nb.py")
        runnable.write_text(notebook_script(script), encoding="utf-8")
        script = runnable
    argv = [*entry.argv, *(entry.cpu_argv if device == "cpu" else [])]
    forked = _run_forked([str(script), *argv], cwd, env, entry.timeout, python, record_dir) \
        if warm and device == "cpu" else None
    rc, out, err, timed_out = forked or _run([python, str(script), *argv], cwd, env, entry.timeout)
    (record_dir / "stdout.txt").write_text(out, encoding="utf-8")
    (record_dir / "stderr.txt").write_text(err, encoding="utf-8")
    seconds = round(time.monotonic() - started, 2)
    records = _records(record_dir)
    top = next((r for r in records if r.get("top")), None)
    limit_hit = any(r.get("ended") == "limit" for r in records) or LIMIT_MARKER in err
    exception = last_exception(err)
    exc_type = exc_name = exc_message = None
    if top and top.get("exception"):
        exc_type, exc_name, exc_message = top["exception"]["type"], top["exception"]["name"], top["exception"]["message"]
    elif exception:
        exc_type, exc_message = exception
        exc_name = exc_type.rsplit(".", 1)[-1]
    if timed_out:
        outcome = "timeout"
    elif rc == LIMIT_STATUS and limit_hit:
        outcome = "step-limit"
    elif rc == 0:
        outcome = "step-limit" if limit_hit else "finished"
    else:
        outcome = "error"
    if outcome in ("finished", "step-limit") and rc == 0 and exception and not limit_hit:
        # an exception caught and printed by the script (a worker's traceback): keep it on record
        exc_type, exc_message = exception
        exc_name = exc_type.rsplit(".", 1)[-1]
    mismatch = bool(DEVICE_MISMATCH.search(err))
    memory = max((r.get("cuda_max_memory_allocated") or 0 for r in records), default=0)
    ok = outcome in ("finished", "step-limit")
    why = None
    if not ok:
        why = outcome
    elif device == "cuda" and mismatch:
        ok, why = False, "device-mismatch error on stderr"
    elif device == "cuda" and not memory:
        ok, why = False, "never allocated on the GPU"
    return Result(entry.id, variant, outcome, ok, rc, exc_type, exc_name, exc_message,
                  steps=sum(r.get("steps", 0) for r in records), forwards=sum(r.get("forwards", 0) for r in records),
                  cuda_max_memory_allocated=memory if device == "cuda" else None, device_mismatch=mismatch,
                  why_not_ok=why, seconds=seconds, stderr_tail=err[-4000:])


# ----------------------------------------------------------------------------- the whole set


@dataclasses.dataclass
class Options:
    python: str
    device: str = "cpu"
    jobs: int = 1
    warm: bool = False
    tool_python: str = sys.executable
    tool_pythonpath: str | None = str(ROOT / "src")
    mirror_root: Path = DEFAULT_MIRROR_ROOT
    variants: tuple[str, ...] = VARIANTS
    log: object = None


def run_all(entries: list[Entry], work: Path, options: Options) -> dict:
    """Extract and migrate each source once, then run every entry in every variant."""
    log = options.log or (lambda message: None)
    standins = work / "standins"
    shutil.copytree(STANDINS, standins, ignore=shutil.ignore_patterns("__pycache__"))
    sources: dict[str, dict] = {}
    by_source: dict[str, list[Entry]] = {}
    for entry in entries:
        by_source.setdefault(entry.source_key, []).append(entry)

    def prepare_source(key: str) -> None:
        first = by_source[key][0]
        base = work / "trees" / re.sub(r"[^\w.@+-]", "_", key.replace("/", "+"))
        info: dict = {"trees": {}, "apply": {}}
        try:
            info["extract"] = make_pristine(first, options.mirror_root, base / "original")
        except (OSError, subprocess.CalledProcessError) as error:
            info["error"] = f"{type(error).__name__}: {error}"
            sources[key] = info
            log(f"{key}: cannot extract: {info['error']}")
            return
        info["trees"]["original"] = base / "original"
        for variant in options.variants:
            if variant == "original":
                continue
            tree = base / variant
            shutil.copytree(base / "original", tree, symlinks=True)
            info["apply"][variant] = apply_tool(tree, variant, options.tool_python, options.tool_pythonpath)
            info["trees"][variant] = tree
        sources[key] = info
        log(f"{key}: {info['extract']['files']} files ({info['extract']['missing']} blobs missing); "
            + ", ".join(f"{v}: apply exit {a['returncode']}" for v, a in info["apply"].items()))

    with concurrent.futures.ThreadPoolExecutor(max(1, options.jobs)) as pool:
        list(pool.map(prepare_source, by_source))

    results: list[Result] = []
    lock = threading.Lock()

    def one(job: tuple[Entry, str]) -> Result:
        entry, variant = job
        info = sources[entry.source_key]
        if "error" in info:
            result = Result(entry.id, variant, "setup-error", False, None, "ExtractError", "ExtractError", info["error"])
        else:
            workdir = work / "runs" / entry.id / variant
            workdir.parent.mkdir(parents=True, exist_ok=True)
            result = run_entry(entry, info["trees"][variant], variant, workdir, options.python, options.device, standins,
                               options.warm)
        with lock:
            results.append(result)
            log(f"{entry.id:<34} {variant:<8} {cell(result)}  ({result.seconds:.0f} s)")
        return result

    jobs = [(entry, variant) for entry in entries for variant in options.variants]
    with concurrent.futures.ThreadPoolExecutor(max(1, options.jobs)) as pool:
        list(pool.map(one, jobs))
    order = {(e.id, v): i for i, (e, v) in enumerate(jobs)}
    results.sort(key=lambda r: order[(r.id, r.variant)])
    return {
        "device": options.device,
        "sources": {k: {kk: vv for kk, vv in v.items() if kk != "trees"} for k, v in sources.items()},
        "results": results,
    }


def cell(result: Result) -> str:
    if result.outcome == "step-limit":
        text = f"ok: limit ({result.steps} steps)" if result.steps else "ok: limit"
    elif result.outcome == "finished":
        text = "ok: finished"
    elif result.outcome == "timeout":
        text = "TIMEOUT"
    else:
        text = result.exception_type or f"exit {result.returncode}"
    if result.outcome in ("finished", "step-limit") and not result.ok:
        text += f" ✗ {result.why_not_ok}"
    return text


def summary_line(results: list[Result], variants=VARIANTS) -> str:
    counts = []
    for variant in variants:
        rows = [r for r in results if r.variant == variant]
        counts.append(f"{variant} {sum(r.ok for r in rows)}/{len(rows)}")
    return "runs: " + ", ".join(counts)


def table(entries: list[Entry], results: list[Result], variants=VARIANTS) -> str:
    by_key = {(r.id, r.variant): r for r in results}
    width = max([len(e.id) for e in entries] + [6])
    lines = [f"{'script':<{width}}  " + "  ".join(f"{v:<28}" for v in variants)]
    for entry in entries:
        cells = [cell(by_key[(entry.id, v)]) if (entry.id, v) in by_key else "-" for v in variants]
        lines.append(f"{entry.id:<{width}}  " + "  ".join(f"{c[:28]:<28}" for c in cells))
    return "\n".join(lines)


def failures(entries: list[Entry], results: list[Result]) -> str:
    lines = []
    for r in results:
        if not r.ok:
            lines.append(f"{r.id} [{r.variant}] {r.exception_type or r.outcome}: {(r.exception_message or '')[:200]}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command line


def make_venv(folder: Path) -> int:
    """A virtual environment with the scripts' own dependencies (``requirements.txt``)."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = folder / "bin" / "pip"
    # torch first, alone, so that pip takes the CPU build found on local disk and not a CUDA one
    subprocess.run([str(pip), "install", "torch==2.13.0"], check=True)
    subprocess.run([str(pip), "install", "-r", str(REQUIREMENTS)], check=True)
    print(f"made {folder}: run with --python {folder / 'bin' / 'python'}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--python", help="interpreter that runs the scripts (torch, torchvision, numpy... : see --make-venv); default: this one")
    parser.add_argument("--make-venv", type=Path, metavar="DIR", help="make a venv with requirements.txt in DIR and exit")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--only", action="append", default=[], metavar="ID", help="run only these entries (repeatable, or comma separated)")
    parser.add_argument("--jobs", "-j", type=int, default=1)
    parser.add_argument("--warm", action="store_true",
                        help="on the CPU, fork each run from an interpreter that has imported torch (--python must "
                             "import this package too; the CI subset runs so): faster, a run still starts clean")
    parser.add_argument("--tool-pythonpath", default=str(ROOT / "src"), metavar="SRC",
                        help="PYTHONPATH of the tool under test (default: this checkout's src)")
    parser.add_argument("--tool-python", default=sys.executable, help="interpreter that runs the tool (libcst...)")
    parser.add_argument("--mirror-root", type=Path, default=DEFAULT_MIRROR_ROOT)
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every result as JSON")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR (must not exist) and keep it")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="which of original,safe,unsafe to run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.make_venv:
        return make_venv(args.make_venv)
    entries = load_manifest(args.manifest)
    only = {i for item in args.only for i in item.split(",") if i}
    if only:
        unknown = only - {e.id for e in entries}
        if unknown:
            print(f"unknown ids: {sorted(unknown)}", file=sys.stderr)
            return 2
        entries = [e for e in entries if e.id in only]
    variants = tuple(v for v in args.variants.split(",") if v)
    if set(variants) - set(VARIANTS):
        print(f"--variants: choose among {VARIANTS}", file=sys.stderr)
        return 2
    options = Options(python=args.python or sys.executable, device=args.device, jobs=args.jobs, warm=args.warm,
                      tool_python=args.tool_python, tool_pythonpath=args.tool_pythonpath or None,
                      mirror_root=args.mirror_root, variants=variants,
                      log=lambda message: print(message, file=sys.stderr, flush=True))
    if args.keep:
        args.keep.mkdir(parents=True)
        work_context = None
        work = args.keep.resolve()
    else:
        work_context = tempfile.TemporaryDirectory(prefix="run-harness-")
        work = Path(work_context.name)
    try:
        started = time.monotonic()
        report = run_all(entries, work, options)
        results = report["results"]
        print(table(entries, results, variants))
        print()
        print(failures(entries, results))
        print()
        print(summary_line(results, variants))
        if args.json:
            payload = {
                "command": " ".join([sys.executable, *(sys.argv if argv is None else ["run.py", *argv])]),
                "device": args.device,
                "python": options.python,
                "tool_pythonpath": options.tool_pythonpath,
                "seconds": round(time.monotonic() - started, 1),
                "summary": summary_line(results, variants),
                "entries": [dataclasses.asdict(e) for e in entries],
                "sources": report["sources"],
                "results": [dataclasses.asdict(r) for r in results],
            }
            args.json.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    finally:
        if work_context is not None:
            work_context.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
