"""Score torchfix-device on a development corpus of real legacy PyTorch repos (issue 20).

The corpus is rebuilt from local bare clones (``fetch`` mirrors under ``--mirror-root``): each
repo of ``benchmarks/real_corpus/repos.csv`` is extracted at its chosen commit (``git archive``,
only ``*.py`` and ``*.ipynb``), then ``python -m torchfix_device`` runs ``check``, ``apply``
(safe) and ``apply --unsafe-fixes`` on fresh copies (PYTHONPATH picks the tree under test).

Each labelled site of ``benchmarks/real_corpus/manifest.csv`` (``repo,commit,path,line,idiom,
expected,note``) is then scored against the output:

* ``fix`` sites count as fixed when their line was changed and the legacy token of the idiom
  (``.cuda(``, ``Variable(``, ``.data[0]``, ...) no longer appears in the text that replaced it;
* ``keep`` sites count as kept when their line is unchanged.

Lines of a notebook are lines of its *view*: the code cells joined in order, each preceded by
one line ``# %% cell N`` (N counts every cell from 1, as the tool's messages do).

Also reported: every output that fails to ``compile()`` (and whether the input already failed),
and crashes (exit status other than 0/1, tracebacks, "internal error" lines).

    python benchmarks/real_repos.py                      # scores main's code via PYTHONPATH
    python benchmarks/real_repos.py --views /tmp/views   # only write the labelling views
"""

from __future__ import annotations

import argparse
import csv
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MANIFEST = HERE / "real_corpus" / "manifest.csv"
DEFAULT_REPOS = HERE / "real_corpus" / "repos.csv"

IDIOMS = {
    "1 device from guard": r"\.cuda\(|is_cuda|get_device\(",
    "2 tensor-type aliases": r"torch\.cuda\.\w*Tensor\b",
    "3 .data[0] scalars": r"\.data\[0\]|\.numpy\(\)\[0\]",
    "4 async= keyword": r"\basync\s*=",
    "5 Variable/volatile": r"\bVariable\b|\bvolatile\b",
    "6 accumulated scalars": r"\.data\b|\[0\]",
    "7 notebooks": None,
    "cuda moves": r"\.cuda\(",
    "dropped moves": None,
    "layer lists": None,
    "factories without device": None,
    "torch.load map_location": None,
    "loss args": r"\bsize_average\b|\breduce\s*=",
    "other": None,
}
"""Idiom name → regex of the legacy token that must be gone from a fixed line (None: any change)."""

NOTEBOOK_TOKEN = re.compile(
    r"\.cuda\(|\bVariable\(|volatile|\.data\[0\]|torch\.cuda\.\w*Tensor\b|\basync\s*=|size_average"
)

MANIFEST_COLUMNS = ["repo", "commit", "path", "line", "idiom", "expected", "note"]


# ----------------------------------------------------------------------------- corpus


def repo_dir_name(repo: str) -> str:
    return repo.replace("/", "+")


def extract(mirror_root: Path, repo: str, commit: str, dest: Path) -> int:
    """Write the ``*.py`` / ``*.ipynb`` files of ``repo`` at ``commit`` under ``dest``."""
    git_dir = mirror_root / repo_dir_name(repo) / "repo"
    if not git_dir.is_dir():
        raise SystemExit(f"no mirror for {repo} at {git_dir}: bring it with the fetch tool first")
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "--name-only", commit],
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8", errors="surrogateescape")
    wanted = [name for name in listing.split("\0") if name.endswith((".py", ".ipynb"))]
    if not wanted:
        return 0
    tar_bytes = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", commit, "--", *wanted],
        check=True,
        capture_output=True,
    ).stdout
    count = 0
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith((".py", ".ipynb")):
                tar.extract(member, dest, filter="data")
                count += 1
    return count


def notebook_view(text: str) -> str | None:
    """The code cells of a notebook joined as one text (``# %% cell N`` before each)."""
    try:
        nb = json.loads(text)
    except json.JSONDecodeError:
        return None
    if "cells" in nb:
        cells = nb["cells"]
        key = "source"
    else:  # nbformat 3
        cells = [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])]
        key = "input"
    out: list[str] = []
    for index, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get(key, "")
        if isinstance(source, list):
            source = "".join(source)
        out.append(f"# %% cell {index}\n")
        out.append(source if source.endswith("\n") or not source else source + "\n")
    return "".join(out)


def view_of(path: Path) -> str | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    text = raw.decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        return notebook_view(text)
    return text


def compile_error(path: Path) -> str | None:
    """Why the file (a notebook: its code cells, IPython lines blanked) does not compile."""
    text = view_of(path)
    if text is None:
        return "unreadable"
    if path.suffix == ".ipynb":
        text = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) or line.rstrip().endswith("?") else line
            for line in text.split("\n")
        )
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return str(exc)
    return None


# ----------------------------------------------------------------------------- tool runs


@dataclass
class Run:
    name: str
    returncode: int
    stdout: str
    stderr: str
    crash_lines: list[str] = field(default_factory=list)


CRASH_PATTERN = re.compile(r"internal error|Traceback \(most recent call last\)", re.IGNORECASE)


def run_tool(args: list[str], cwd: Path, env: dict[str, str], name: str) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "torchfix_device", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    run = Run(name, proc.returncode, proc.stdout, proc.stderr)
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        if CRASH_PATTERN.search(line):
            run.crash_lines.append(line.strip())
    if proc.returncode not in (0, 1):
        run.crash_lines.insert(0, f"exit status {proc.returncode}")
    return run


def tool_env(pythonpath: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    env.setdefault("NO_COLOR", "1")
    env["COLUMNS"] = "200"
    return env


# ----------------------------------------------------------------------------- scoring


def changed_regions(before: str, after: str, *, fine: bool = False) -> dict[int, str]:
    """Line number (1-based, in ``before``) → the text that replaced its region, for changed lines.

    ``fine``: within a region of several lines, each line is matched again with indentation
    aside, so that a line only re-indented (a loop put under ``with torch.no_grad():``) maps to
    itself and an edited line to its own replacement, not to the whole region's text (where an
    unfixed neighbour's legacy token would count against it). Which lines changed stays the
    coarse answer: a site is changed when its region is, re-indentation included."""
    a = before.splitlines()
    b = after.splitlines()
    result: dict[int, str] = {}
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("replace", "delete"):
            continue
        if not fine or tag == "delete" or (i2 - i1 == 1 and j2 - j1 == 1):
            replacement = "\n".join(b[j1:j2])
            for i in range(i1, i2):
                result[i + 1] = replacement
            continue
        inner = difflib.SequenceMatcher(None, [x.strip() for x in a[i1:i2]], [y.strip() for y in b[j1:j2]], autojunk=False)
        for itag, k1, k2, l1, l2 in inner.get_opcodes():
            if itag == "insert":
                continue
            for k in range(k1, k2):
                # equal: the line itself, re-indented; replace/delete: what took its place
                result[i1 + k + 1] = b[j1 + l1 + (k - k1)] if itag == "equal" else "\n".join(b[j1 + l1:j1 + l2])
    return result


def read_manifest(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(line for line in handle if not line.startswith("#"))]
    return rows


def score_site(row: dict[str, str], region: str | None, before_line: str, replacement: str | None = None) -> bool:
    """True when the site ended as the manifest expects. ``region``: what replaced the site's
    region (None: unchanged); ``replacement``: what replaced the line itself (the fine mapping
    of :func:`changed_regions`; default ``region``), where the legacy tokens must be gone."""
    changed = region is not None
    region = region if replacement is None else replacement
    if row["expected"] == "keep":
        return not changed
    if not changed:
        return False
    pattern = IDIOMS.get(row["idiom"])
    if row["idiom"] == "7 notebooks":
        pattern = NOTEBOOK_TOKEN.pattern
    if pattern is None:
        return True
    regex = re.compile(pattern)
    # only the tokens that were on the site's own line must be gone
    tokens = {m.group(0) for m in regex.finditer(before_line)}
    return not any(token in region for token in tokens)


# ----------------------------------------------------------------------------- human oracle


def git_show(git_dir: Path, commit: str, path: str) -> str | None:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True)
    return proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else None


def oracle_report(mirror_root: Path, repo: dict[str, str], workdir: Path, env: dict[str, str]) -> list[str]:
    """Compare ``apply --unsafe-fixes`` on the parent of the maintainers' port-to-0.4 commit with it.

    Shares are over lines of the parent's ``*.py`` files: "theirs we change too" = of the lines the
    maintainers changed, how many we change; "ours they made too" = of the lines we change, how
    many they changed. Line level only: whether both changed a line *the same way* is not checked.
    """
    git_dir = mirror_root / repo_dir_name(repo["repo"]) / "repo"
    full = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", repo["oracle_commit"]], capture_output=True, text=True, check=True
    ).stdout.strip()
    parent = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", f"{full}^"], capture_output=True, text=True, check=True
    ).stdout.strip()
    before_root = workdir / "oracle" / repo_dir_name(repo["repo"])
    if before_root.exists():
        shutil.rmtree(before_root)
    extract(mirror_root, repo["repo"], parent, before_root / "before")
    shutil.copytree(before_root / "before", before_root / "ours")
    run = run_tool(["apply", "--no-cache", "--unsafe-fixes", "ours"], before_root, env, "oracle apply")
    changed = subprocess.run(
        ["git", "--git-dir", str(git_dir), "diff", "--name-only", parent, full, "--", "*.py"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    theirs_total = theirs_hit = ours_total = ours_hit = 0
    per_file: list[str] = []
    for path in sorted(p.relative_to(before_root / "before") for p in (before_root / "before").rglob("*.py")):
        before = (before_root / "before" / path).read_text(encoding="utf-8", errors="replace")
        ours_after = (before_root / "ours" / path).read_text(encoding="utf-8", errors="replace")
        theirs_after = git_show(git_dir, full, str(path)) if str(path) in changed else before
        if theirs_after is None:  # deleted by the maintainers
            continue
        ours = set(changed_regions(before, ours_after))
        theirs = set(changed_regions(before, theirs_after))
        if not ours and not theirs:
            continue
        theirs_total += len(theirs)
        theirs_hit += len(theirs & ours)
        ours_total += len(ours)
        ours_hit += len(ours & theirs)
        per_file.append(f"| `{path}` | {len(theirs)} | {len(ours)} | {len(theirs & ours)} |")
    share = lambda a, b: f"{100 * a / b:.0f}%" if b else "–"
    out = [
        f"### {repo['repo']}: maintainers' {full[:10]} ({repo['oracle_note']}) vs the tool on its parent {parent[:10]}",
        "",
        f"- their changed lines we change too: {theirs_hit} / {theirs_total} ({share(theirs_hit, theirs_total)})",
        f"- our changed lines they changed too: {ours_hit} / {ours_total} ({share(ours_hit, ours_total)})",
        f"- tool run: exit {run.returncode}" + (f", crash: {run.crash_lines}" if run.crash_lines else ""),
        "",
        "| file | lines they changed | lines we changed | both |",
        "|---|---:|---:|---:|",
        *per_file,
    ]
    return out


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--repos", type=Path, default=DEFAULT_REPOS)
    parser.add_argument("--workdir", type=Path, help="keep the corpus and outputs here (default: a temp folder)")
    parser.add_argument("--pythonpath", help="PYTHONPATH for the tool (default: inherited)")
    parser.add_argument("--views", type=Path, help="only write the labelling views here and stop")
    parser.add_argument("--only", action="append", help="only this repo (owner/name), repeatable")
    parser.add_argument("--markdown", type=Path, help="also write the report as Markdown here")
    parser.add_argument("--oracle", action="append", default=[],
                        help="also compare with this repo's own port-to-0.4 commit (owner/name), repeatable")
    args = parser.parse_args(argv)

    with args.repos.open(newline="", encoding="utf-8") as handle:
        repos = list(csv.DictReader(handle))
    if args.only:
        repos = [r for r in repos if r["repo"] in args.only]

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="real-corpus-"))
    orig_root = workdir / "orig"
    if orig_root.exists():
        shutil.rmtree(orig_root)
    file_counts: dict[str, int] = {}
    for repo in repos:
        file_counts[repo["repo"]] = extract(
            args.mirror_root, repo["repo"], repo["commit"], orig_root / repo_dir_name(repo["repo"])
        )

    if args.views:
        for path in sorted(orig_root.rglob("*")):
            if path.is_file():
                target = args.views / path.relative_to(orig_root)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(view_of(path) or "", encoding="utf-8")
        print(f"views of {sum(file_counts.values())} files written under {args.views}")
        return 0

    env = tool_env(args.pythonpath)
    outputs: dict[str, Path] = {}
    runs: list[Run] = []
    for mode, extra in (("safe", []), ("unsafe", ["--unsafe-fixes"])):
        root = workdir / mode
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(orig_root, root)
        outputs[mode] = root
        for repo in repos:
            name = repo_dir_name(repo["repo"])
            runs.append(run_tool(["apply", "--no-cache", *extra, name], root, env, f"apply {mode} {repo['repo']}"))
    for repo in repos:
        name = repo_dir_name(repo["repo"])
        runs.append(run_tool(["check", "--no-cache", "--unsafe-fixes", name], orig_root, env, f"check {repo['repo']}"))

    manifest = read_manifest(args.manifest)
    wanted = {r["repo"] for r in repos}
    manifest = [row for row in manifest if row["repo"] in wanted]
    report = build_report(args, repos, file_counts, manifest, orig_root, outputs, runs)
    by_name = {r["repo"]: r for r in repos}
    oracle_lines: list[str] = []
    for name in args.oracle:
        if name in by_name and by_name[name]["oracle_commit"]:
            oracle_lines += ["", *oracle_report(args.mirror_root, by_name[name], workdir, env)]
    if oracle_lines:
        report += "\n## Human oracle (maintainers' port-to-0.4 commits)\n" + "\n".join(oracle_lines) + "\n"
    print(report)
    if args.markdown:
        args.markdown.write_text(report, encoding="utf-8")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def build_report(args, repos, file_counts, manifest, orig_root, outputs, runs) -> str:
    lines: list[str] = []
    add = lines.append
    add(f"Corpus: {len(repos)} repos, {sum(file_counts.values())} files (*.py, *.ipynb), {len(manifest)} labelled sites "
        f"({sum(r['expected'] == 'fix' for r in manifest)} fix, {sum(r['expected'] == 'keep' for r in manifest)} keep).")
    add("")
    add("| repo | commit | files | labelled sites (fix / keep) |")
    add("|---|---|---:|---:|")
    for repo in repos:
        rows = [r for r in manifest if r["repo"] == repo["repo"]]
        add(f"| {repo['repo']} | {repo['commit'][:10]} | {file_counts[repo['repo']]} | "
            f"{len(rows)} ({sum(r['expected'] == 'fix' for r in rows)} / {sum(r['expected'] == 'keep' for r in rows)}) |")

    regions_cache: dict[tuple[str, str], tuple[dict[int, str], dict[int, str]]] = {}
    before_cache: dict[str, list[str]] = {}

    def regions(mode: str, rel: str) -> tuple[dict[int, str], dict[int, str]]:
        """The coarse and the fine :func:`changed_regions` of one file."""
        key = (mode, rel)
        if key not in regions_cache:
            before = view_of(orig_root / rel) or ""
            after = view_of(outputs[mode] / rel) or ""
            regions_cache[key] = changed_regions(before, after), changed_regions(before, after, fine=True)
            before_cache[rel] = before.splitlines()
        return regions_cache[key]

    headline: dict[str, str] = {}
    missing_rows: list[str] = []
    for mode in ("safe", "unsafe"):
        per: dict[str, Counter] = defaultdict(Counter)
        broken_keeps: list[str] = []
        missed: Counter = Counter()
        missed_rows: list[str] = []
        for row in manifest:
            rel = f"{repo_dir_name(row['repo'])}/{row['path']}"
            if not (orig_root / rel).is_file():
                if mode == "safe":
                    missing_rows.append(f"{row['repo']} {row['path']}:{row['line']}")
                continue
            reg, fine = regions(mode, rel)
            line_no = int(row["line"])
            before_lines = before_cache[rel]
            before_line = before_lines[line_no - 1] if line_no <= len(before_lines) else ""
            region = reg.get(line_no)
            ok = score_site(row, region, before_line, fine.get(line_no))
            c = per[row["idiom"]]
            c[row["expected"]] += 1
            if ok:
                c[row["expected"] + "_ok"] += 1
            elif row["expected"] == "fix":
                missed[row["idiom"]] += 1
                missed_rows.append(
                    f"- {row['repo']} `{row['path']}:{line_no}` ({row['idiom']}): `{before_line.strip()[:120]}`"
                    + (f" → `{region.strip()[:120]}`" if region is not None else " (unchanged)")
                )
            else:
                broken_keeps.append(
                    f"- {row['repo']} `{row['path']}:{line_no}` ({row['idiom']}; {row['note']}): "
                    f"`{before_line.strip()}` → `{(region or '').strip()[:160]}`"
                )
        add("")
        add(f"## {'apply (safe)' if mode == 'safe' else 'apply --unsafe-fixes'}")
        add("")
        add("| idiom | fix sites fixed / total | % | keep sites unchanged / total |")
        add("|---|---:|---:|---:|")
        tot = Counter()
        for idiom in IDIOMS:
            c = per.get(idiom)
            if not c:
                continue
            tot.update(c)
            pct = f"{100 * c['fix_ok'] / c['fix']:.0f}%" if c["fix"] else "–"
            add(f"| {idiom} | {c['fix_ok']} / {c['fix']} | {pct} | {c['keep_ok']} / {c['keep']} |")
        pct = f"{100 * tot['fix_ok'] / tot['fix']:.1f}%" if tot["fix"] else "–"
        add(f"| **all** | **{tot['fix_ok']} / {tot['fix']}** | **{pct}** | **{tot['keep_ok']} / {tot['keep']}** |")
        headline[mode] = (f"{mode}: {tot['fix_ok']}/{tot['fix']} fix sites fixed ({pct}), "
                          f"{tot['keep'] - tot['keep_ok']} keep sites changed")
        add("")
        add("Missed fix sites by idiom: " + (", ".join(f"{k} {v}" for k, v in missed.most_common()) or "none"))
        add("")
        add(f"<details><summary>Missed fix sites ({sum(missed.values())})</summary>")
        add("")
        lines.extend(missed_rows)
        add("")
        add("</details>")
        add("")
        add(f"Keep sites that were changed ({len(broken_keeps)}):" if broken_keeps else "Keep sites that were changed: none")
        lines.extend(broken_keeps)

        failures: list[str] = []
        for path in sorted(outputs[mode].rglob("*")):
            if not path.is_file() or path.suffix not in (".py", ".ipynb"):
                continue
            rel = path.relative_to(outputs[mode])
            err = compile_error(path)
            if err:
                before_err = compile_error(orig_root / rel)
                failures.append(f"- `{rel}`: {err}" + (f" (input fails too: {before_err})" if before_err else " (**new**)"))
        new = sum("(**new**)" in f for f in failures)
        headline[mode] += f", {new} outputs fail to compile that compiled before ({len(failures)} fail in all)"
        add("")
        add(f"Outputs that fail to compile: {len(failures)} ({new} new; the rest failed as input too)")
        lines.extend(failures)

    add("")
    add("## Tool runs")
    add("")
    crashes = 0
    over_budget = 0
    for run in runs:
        summary = [l for l in run.stderr.splitlines() if "scanned" in l][-1:] or [f"exit {run.returncode}"]
        add(f"- {run.name}: exit {run.returncode}; {summary[0].strip()}")
        for failed in (l for l in run.stderr.splitlines() if l.startswith("failed:")):
            add(f"  - {failed.strip()[:200]}")
        for skipped in (l for l in run.stderr.splitlines() if l.startswith("skipped:") and "limit" in l):
            over_budget += 1  # a file over the per-file time or memory budget: left unmigrated
            add(f"  - OVER BUDGET: {skipped.strip()[:200]}")
        for c in run.crash_lines:
            crashes += 1
            add(f"  - CRASH: {c}")
    add("")
    add(f"Crash lines (exit status other than 0/1, tracebacks, internal errors): {crashes}")
    add(f"Files left unmigrated for going over the per-file time or memory budget (all runs): {over_budget}")
    if missing_rows:
        add("")
        add("Manifest rows whose file is missing from the corpus: " + ", ".join(missing_rows))
    add("")
    add("Headline: " + "; ".join(headline.values()) + f"; {crashes} crash lines; {over_budget} files over budget.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
