"""``torchfix-device verify --run COMMAND [PATH]``: does the user's own command run after the
migration?

1. **Two copies** of the project folder PATH (default: the current folder) go to a temp folder
   (:mod:`~torchfix_device.verify.project_copy`); the user's tree is only read.
2. **The migration**: ``torchfix-device apply`` runs on the user's tree with ``--output-dir``
   set to the second copy and ``--no-cache`` (so the same files are chosen as by ``apply``:
   configuration, ``.gitignore``, exclusions; nothing is written into the tree), in a process
   of its own; ``--unsafe-fixes`` passes through.
3. **The command** runs in each copy (:mod:`~torchfix_device.verify.user_run`), in the folder
   that corresponds to the current one (the copy's top folder when the current folder is
   outside the project), on what the machine has: CUDA if the command's torch sees it, else the
   CPU.
4. **On a machine without CUDA**, when the program asked for a GPU (or ``--stand-in``), both
   copies run once more with ``meta`` standing in for a GPU under the device checker
   (:mod:`~torchfix_device.verify.child_hook`): device mismatches the program would meet on a GPU
   raise there, with their place.

:class:`SessionReport` holds the runs and gives the verdict in plain words.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from torchfix_device.verify import project_copy
from torchfix_device.verify.user_run import RunResult, child_environment, run_command, write_hook

TERMINAL_STYLE = re.compile(r"\x1b\[[0-9;]*m")
"""A terminal's colour and bold codes, which some messages carry (torch's ``Weights only load
failed``): the one-line report shows the words only."""

BEFORE, AFTER = "before", "after"


class RunUsageError(Exception):
    """Bad input (no command, no such project folder): exit 2."""


@dataclass
class Migration:
    """What ``apply`` did to the second copy (from its JSON report)."""

    exit_code: int | None = None
    seconds: float = 0.0
    files_changed: int = 0
    changes: int = 0
    fixes: dict[str, int] = field(default_factory=dict)
    manual_review: list[dict] = field(default_factory=list)
    held_back: list[dict] = field(default_factory=list)
    not_processed: list[dict] = field(default_factory=list)
    error: str | None = None


@dataclass
class SessionReport:
    command: str
    project: str
    workdir: str
    """The folder the command ran in, relative to the project's top folder."""
    unsafe_fixes: bool
    migration: Migration
    runs: list[RunResult] = field(default_factory=list)
    timeout: float | None = None
    copied: dict = field(default_factory=dict)
    stand_in_skipped: str | None = None
    """Why the stand-in runs did not happen (None when they did, or on CUDA)."""
    project_root: str = ""
    user_cwd: str = ""

    # -- what happened ------------------------------------------------------------------------
    def run(self, copy: str, stand_in: bool = False) -> RunResult | None:
        return next((r for r in self.runs if r.copy == copy and r.stand_in == stand_in), None)

    @property
    def machine(self) -> str:
        """``cuda`` when the command's torch saw a GPU, else ``cpu``."""
        return "cuda" if any(r.cuda_available for r in self.runs if not r.stand_in) else "cpu"

    @property
    def ok(self) -> bool:
        """The migrated run succeeded (and mixed no devices with meta standing in for a GPU)."""
        after, stand_in = self.run(AFTER), self.run(AFTER, stand_in=True)
        return after is not None and after.ok and not (stand_in is not None and stand_in.device_mismatch)

    def place(self, record: dict | None, copy: str = BEFORE) -> str:
        """``file:line`` of an exception record, as the user's path (from the current folder);
        a place in the migrated copy says so (its lines may have moved)."""
        if not record or not record.get("file"):
            return ""
        file = record["file"]
        if record.get("in_project") and self.project_root:
            absolute = os.path.join(self.project_root, file)
            relative = os.path.relpath(absolute, self.user_cwd or os.getcwd())
            file = relative if not relative.startswith("..") else absolute
        text = f"{file}:{record['line']}" if record.get("line") else file
        return text + (" of the migrated code" if copy == AFTER and record.get("in_project") else "")

    def failure(self, run: RunResult) -> str:
        """Why a run failed, in one line."""
        if run.timed_out:
            return f"it did not finish within {self.timeout:g} s (--timeout)"
        record = run.exception
        if record is None:
            return f"the command exited with status {run.exit_code}"
        message = " ".join(TERMINAL_STYLE.sub("", record.get("message") or "").split())
        message = message if len(message) <= 200 else message[:199] + "…"
        where = self.place(record, run.copy)
        return f"{record.get('type', 'Error')}: {message}" + (f" ({where})" if where else "")

    def verdict(self) -> str:
        before, after = self.run(BEFORE), self.run(AFTER)
        if before is None or after is None:
            return "not run"
        if after.ok:
            text = "it ran before and still runs" if before.ok else "the migration made it run"
        elif before.ok:
            text = f"the migration broke it: {self.failure(after)}"
        else:
            text = f"it still fails: {self.failure(after)}"
        stand_before, stand_after = self.run(BEFORE, True), self.run(AFTER, True)
        if stand_after is not None and stand_after.device_mismatch:
            text += f"; but on a GPU (meta standing in) it mixes devices at {self.place(stand_after.device_mismatch, AFTER)}"
        elif stand_before is not None and stand_before.device_mismatch and stand_after is not None:
            text += f"; on a GPU (meta standing in) the original mixed devices at {self.place(stand_before.device_mismatch)}, the migrated code does not"
        return text

    def notes(self) -> list[str]:
        """What the runs can and cannot show, in plain words."""
        notes = []
        if self.machine == "cpu":
            notes.append(
                "no GPU here: the runs were on the CPU. They show whether the command runs, not that it runs on a GPU."
            )
            if self.stand_in_skipped:
                notes.append(f"no device checks: {self.stand_in_skipped}")
            elif self.run(AFTER, True) is not None:
                notes.append(
                    "device checks: both copies ran again with meta standing in for a GPU (torch.cuda.is_available() "
                    "true, \"cuda\" meaning meta, a checker raising on mixed devices as CUDA does). Meta holds no data: "
                    "numbers, and code that reads them, are not checked there; a mismatch is reported only where it ran."
                )
                for run in (self.run(BEFORE, True), self.run(AFTER, True)):
                    if run is not None and not run.ok and not run.device_mismatch:
                        notes.append(
                            f"the stand-in run of the {'original' if run.copy == BEFORE else 'migrated'} copy stopped early "
                            f"({self.failure(run)}): not a device error; its device checks cover what ran before that"
                        )
        else:
            notes.append("the runs were on this machine's GPU: a device mismatch would have raised there")
        for run in self.runs:
            if run.from_origin:
                label = "original" if run.copy == BEFORE else "migrated"
                notes.append(
                    f"the {label} run imported {len(run.from_origin)} module(s) from your own tree, not the copy "
                    f"(an editable install?): {', '.join(run.from_origin[:3])}; they ran unmigrated"
                )
                break
        if self.runs and not any(r.hooked for r in self.runs):
            notes.append(
                "no Python process of the command loaded the start-up hook (python -I or -S?): the exceptions come "
                "from stderr, and there were no device checks"
            )
        errors = sorted({e for r in self.runs for e in r.hook_errors})
        if errors:
            notes.append("the start-up hook failed: " + "; ".join(errors[:3]))
        return notes

    def to_json(self) -> dict:
        data = asdict(self)
        data["runs"] = [r.to_json() for r in self.runs]
        for run in data["runs"]:
            for key in ("exception", "device_mismatch"):
                if run[key]:
                    run[key] = {**run[key], "where": self.place(run[key], run["copy"])}
        return {**data, "machine": self.machine, "ok": self.ok, "verdict": self.verdict(), "notes": self.notes()}


def check_input(command: str | None, project: Path) -> Path:
    """The project's real folder; :class:`RunUsageError` naming what is wrong."""
    if command is None or not command.strip():
        raise RunUsageError('--run needs the command to run, e.g. --run "python train.py --epochs 1"')
    if not os.path.lexists(project):
        raise RunUsageError(f"no such folder: {project} (the project to copy and run the command in)")
    if not project.is_dir():
        raise RunUsageError(f"{project} is not a folder: give the project's folder (the command runs in a copy of it)")
    root = Path(os.path.realpath(project))
    for spelling in {str(root), str(project.absolute())}:
        if spelling != os.sep and spelling in command:
            raise RunUsageError(
                f"the command names the project's own folder ({spelling}): it would run (and could write) the "
                "original files, not the copies; use paths relative to the current folder"
            )
    return root


def verify_command(
    command: str, project: Path, *, timeout: float | None = None, unsafe_fixes: bool = False,
    stand_in: bool | None = None, progress: Callable[[str], None] = lambda text: None,
) -> SessionReport:
    """Copy, migrate, run, compare (see the module docstring)."""
    root = check_input(command, project)
    user_cwd = Path(os.path.realpath(os.getcwd()))
    temp = Path(tempfile.mkdtemp(prefix="tfd-verify-run-"))
    try:
        return _session(command, project, root, user_cwd, temp, timeout, unsafe_fixes, stand_in, progress)
    finally:
        project_copy.remove_tree(temp)


def _session(command, project, root, user_cwd, temp, timeout, unsafe_fixes, stand_in, progress) -> SessionReport:  # noqa: ANN001
    copies = {BEFORE: temp / BEFORE / root.name, AFTER: temp / AFTER / root.name}
    progress(f"copying {project} twice…")
    stats = None
    for folder in copies.values():
        stats = project_copy.copy_project(root, folder, avoid=(temp,))
    progress("migrating the second copy (torchfix-device apply)…")
    migration = migrate(root, copies[AFTER], unsafe_fixes=unsafe_fixes, scratch=temp)
    inside = project_copy.place_in_copy(user_cwd, root, Path("."))
    workdir = inside if inside is not None else Path(".")
    report = SessionReport(
        command=command, project=str(project), workdir=workdir.as_posix(), unsafe_fixes=unsafe_fixes,
        migration=migration, timeout=timeout, project_root=str(root), user_cwd=str(user_cwd),
        copied={"files": stats.files, "bytes": stats.bytes, "linked": stats.linked, "skipped": stats.skipped},
    )
    if migration.error is not None:
        return report
    hook = write_hook(temp / "hook")

    def leg(copy: str, with_stand_in: bool) -> RunResult:
        label = ("the original" if copy == BEFORE else "the migrated copy") + (" (meta standing in for a GPU)" if with_stand_in else "")
        progress(f"running the command in {label}…")
        tag = f"{copy}{'-stand-in' if with_stand_in else ''}"
        cwd = copies[copy] / workdir
        env = child_environment(
            hook=hook, records=temp / "records" / tag, copy_root=copies[copy], origin=root,
            stand_in=with_stand_in, cwd=cwd,
        )
        result = run_command(
            command, copy=copy, stand_in=with_stand_in, cwd=cwd if cwd.is_dir() else copies[copy], env=env,
            records=temp / "records" / tag, logs=temp / "logs" / tag, timeout=timeout,
        )
        report.runs.append(result)
        return result

    leg(BEFORE, False)
    leg(AFTER, False)
    report.stand_in_skipped = _why_no_stand_in(report, stand_in)
    if report.stand_in_skipped is None and report.machine == "cpu":
        leg(BEFORE, True)
        leg(AFTER, True)
    return report


def _why_no_stand_in(report: SessionReport, wanted: bool | None) -> str | None:
    """None when the stand-in runs should happen (or the machine has CUDA), else why not."""
    primary = [r for r in report.runs if not r.stand_in]
    if report.machine == "cuda":
        return None
    if wanted is False:
        return "--no-stand-in"
    if not any(r.hooked for r in primary):
        return "no Python process of the command loaded the start-up hook"
    if not any(r.torch for r in primary):
        return "the command never imported torch"
    if wanted is None and not any(r.gpu_asked for r in primary):
        return (
            "the program never asked for a GPU (torch.cuda.is_available(), .cuda(), a \"cuda\" device): on a machine "
            "with one it takes the same path as here (--stand-in runs the checks anyway)"
        )
    return None


def migrate(root: Path, destination: Path, *, unsafe_fixes: bool, scratch: Path) -> Migration:
    """``torchfix-device apply`` on the user's tree, its rewritten files written over the copy
    at ``destination``; nothing is written into the tree (``--output-dir``, ``--no-cache``)."""
    report_file = scratch / "migration.json"
    argv = [
        sys.executable, "-m", "torchfix_device", "apply", ".", "--output-dir", str(destination), "--no-cache",
        "--report", str(report_file),
    ]
    if unsafe_fixes:
        argv.append("--unsafe-fixes")
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=root, capture_output=True, stdin=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"})
    migration = Migration(exit_code=done.returncode, seconds=round(time.perf_counter() - started, 3))
    if done.returncode == 2 or not report_file.is_file():
        errors = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        migration.error = "; ".join(errors[-3:]) or f"apply exited with status {done.returncode}"
        return migration
    data = json.loads(report_file.read_text(encoding="utf-8"))
    summary = data.get("summary", {})
    migration.files_changed = summary.get("files_changed", 0)
    migration.changes = summary.get("changes", 0)
    migration.fixes = {c["code"]: c["fixed"] for c in data.get("per_codemod", []) if c.get("fixed")}
    migration.manual_review = data.get("manual_review", [])
    migration.held_back = data.get("held_back", [])
    migration.not_processed = data.get("not_processed", [])
    return migration
