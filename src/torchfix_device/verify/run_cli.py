"""``torchfix-device verify --run COMMAND [PATH]``: the report of
:mod:`~torchfix_device.verify.run_session` in plain words (``--json``: as JSON), and the exit
code: 0 when the migrated run succeeds, 1 when it does not, 2 for bad input (no command, no such
project folder, a bad ``--timeout``) or a migration that could not run at all.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from torchfix_device.verify.run_session import AFTER, BEFORE, RunUsageError, SessionReport, verify_command
from torchfix_device.verify.user_run import RunResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
STAND_IN = "on a GPU (meta standing in)"


def _error(text: str) -> None:
    sys.stderr.write(f"error: {text}\n")


def run_user_command(
    command: str | None, paths: Sequence[Path], *, timeout: float | None, unsafe_fixes: bool,
    stand_in: bool | None, as_json: bool, quiet: bool = False,
) -> int:
    """The ``verify --run`` command; returns the exit code."""
    if len(paths) > 1:
        _error(f"--run takes one project folder, not {len(paths)} paths: {' '.join(str(p) for p in paths)}")
        return EXIT_USAGE
    if timeout is not None and not timeout > 0:
        _error(f"--timeout {timeout:g}: give a number of seconds above 0")
        return EXIT_USAGE
    project = Path(paths[0]) if paths else Path(".")

    def progress(text: str) -> None:
        if not quiet:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    try:
        report = verify_command(
            command or "", project, timeout=timeout, unsafe_fixes=unsafe_fixes, stand_in=stand_in, progress=progress,
        )
    except RunUsageError as exc:
        _error(str(exc))
        return EXIT_USAGE
    if as_json:
        json.dump(report.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in report_lines(report)))
    sys.stdout.flush()
    if report.migration.error is not None:
        if not as_json:
            _error(f"the migration could not run: {report.migration.error}")
        return EXIT_USAGE
    return EXIT_OK if report.ok else EXIT_FAILED


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def migration_line(report: SessionReport) -> str:
    migration = report.migration
    if migration.error is not None:
        return f"migration: could not run: {migration.error}"
    fixes = ", ".join(f"{code} ×{count}" for code, count in sorted(migration.fixes.items()))
    text = f"migration: {_plural(migration.files_changed, 'file')} changed, {_plural(migration.changes, 'fix', 'fixes')}"
    text += f" ({fixes})" if fixes else ""
    extra = []
    if migration.manual_review:
        extra.append(f"{_plural(len(migration.manual_review), 'place')} left for manual review")
    if migration.held_back:
        extra.append(f"{_plural(len(migration.held_back), 'unsafe fix', 'unsafe fixes')} held back (--unsafe-fixes)")
    if migration.not_processed:
        extra.append(f"{_plural(len(migration.not_processed), 'file')} not processed")
    return text + ("; " + ", ".join(extra) if extra else "") + ("; unsafe fixes applied" if report.unsafe_fixes else "")


def run_line(report: SessionReport, run: RunResult) -> str:
    """One run, in plain words."""
    if run.stand_in:
        label = f"{STAND_IN}, {'before' if run.copy == BEFORE else 'after'}:"
        if run.device_mismatch:
            message = " ".join((run.device_mismatch.get("message") or "").split())
            return f"{label} ✗ device mismatch at {report.place(run.device_mismatch, run.copy)}: {message[:160]}"
        used = "on the stand-in GPU" if run.gpu_uses else "but the GPU was never used"
        state = "ran" if run.ok else "stopped early"
        return f"{label} ✓ no device mismatch ({state} {used}, {run.seconds:.1f} s)"
    label = "before the migration:" if run.copy == BEFORE else "after the migration: "
    if run.ok:
        return f"{label} ✓ runs (exit 0) in {run.seconds:.1f} s"
    return f"{label} ✗ fails after {run.seconds:.1f} s: {report.failure(run)}"


def report_lines(report: SessionReport) -> list[str]:
    lines = [f"verify --run: {report.command}"]
    where = "its top folder" if report.workdir == "." else report.workdir
    lines.append(f"project: {report.project} (copied twice; the command ran in {where}; machine: {report.machine})")
    lines.append(migration_line(report))
    for copy in (BEFORE, AFTER):
        run = report.run(copy)
        if run is not None:
            lines.append(run_line(report, run))
    for copy in (BEFORE, AFTER):
        run = report.run(copy, stand_in=True)
        if run is not None:
            lines.append(run_line(report, run))
    for copy in (BEFORE, AFTER):
        run = report.run(copy)
        if run is not None and not run.ok and run.exception is None and run.stderr_tail.strip():
            tail = run.stderr_tail.strip().splitlines()[-3:]
            lines.append(f"  last lines of stderr ({copy}): " + " | ".join(tail))
    if report.migration.error is None and report.runs:
        lines.append(f"verdict: {report.verdict()}")
    lines += [f"note: {note}" for note in report.notes()]
    return lines
