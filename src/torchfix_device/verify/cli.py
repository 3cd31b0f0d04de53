"""``torchfix-device verify [--device DEV] [--json] [PATH...]``: choose a device, verify, report.

No PATH: the bundled fixture models. PATH: model files (or folders of them) that follow the
contract in :mod:`torchfix_device.verify.contract`.

DEV defaults to the first available of CUDA, MPS and XPU, else ``meta`` — the stand-in second
device, run under the device checker. A rich table goes to stdout (``--json``: a JSON list);
progress and notes go to stderr. Exit 0 when every model behaved as expected, 1 otherwise, 2 for
bad usage (no torch, an unusable device, no model files).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PIPE_WIDTH = 150
"""Table width when stdout is not a terminal (rich would use 80) and COLUMNS is not set."""
INSTALL_HINT = "pip install 'torchfix-device[verify]'"
STAND_IN_NOTE = (
    "DEV is meta, the stand-in for a second device: the runs on it are checked by a dispatch mode "
    "that raises on mixed devices as CUDA does; .cuda() in the originals means .to(meta), and "
    ".item() on a meta tensor returns a placeholder 0. Numbers are compared on the CPU only."
)


class UsageError(Exception):
    pass


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def default_device() -> str:
    """The first available of cuda, mps and xpu; else ``meta``."""
    _import_torch_quietly()
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu"
    return "meta"


def resolve_device(requested: str | None) -> str:
    """The target device as a string torch accepts; :class:`UsageError` when it cannot serve."""
    import torch

    if requested is None:
        return default_device()
    try:
        device = torch.device(requested)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"--device {requested!r} is not a device torch knows: {exc}") from None
    if device.type == "cpu":
        raise UsageError("--device cpu: the CPU is the reference leg; name a second device (cuda, mps, xpu or meta)")
    if device.type == "meta":
        return "meta"
    module = getattr(torch, device.type, None)
    available = getattr(module, "is_available", None)
    if device.type == "mps":
        available = torch.backends.mps.is_available
    if available is None or not available():
        raise UsageError(f"--device {requested}: no {device.type} device is available here (try --device meta)")
    return str(device)


def model_files(paths: Sequence[Path]) -> list[Path]:
    from torchfix_device.files.selection import collect_files
    from torchfix_device.verify.contract import bundled_models

    if not paths:
        return bundled_models()
    files, problems = collect_files(list(paths))
    if problems:
        raise UsageError("; ".join(f"{p.display}: {p.error}" for p in problems))
    return files


def _mark(ok: bool, text: str) -> Text:
    return Text(("✓ " if ok else "✗ ") + text, style="green" if ok else "red")


def cells(report) -> list[Text]:
    """The table row of one :class:`~torchfix_device.verify.verifier.ModelReport`."""
    # codemods applied
    applied = " ".join(report.applied) or "none"
    if report.problems:
        codemods = _mark(False, report.problems[0])
    elif report.missing_codemods:
        codemods = _mark(False, f"{applied}; missing {' '.join(report.missing_codemods)}")
    else:
        codemods = _mark(True, applied)
    # original on DEV
    leg = report.original_dev
    if report.original_ok:
        original = _mark(True, "fails: device error")
    elif leg is None or leg.status == "not run":
        original = _mark(False, "not run")
    elif leg.status == "ran":
        original = _mark(False, "BROKEN FIXTURE: runs")
    elif leg.status == "failed":
        original = _mark(False, f"BROKEN FIXTURE: {leg.short_error(50)}")
    else:
        original = _mark(False, leg.short_error(50))
    # rewrite on DEV
    leg = report.rewrite_dev
    if leg is None or leg.status == "not run":
        rewrite = _mark(False, "not run")
    elif leg.status == "ran" and leg.forbidden_shims:
        uses = ", ".join(f"{k} ×{v}" for k, v in leg.forbidden_shims.items())
        rewrite = _mark(False, f"runs only via legacy shim: {uses}")
    elif leg.status == "ran":
        rewrite = _mark(True, "runs")
    elif leg.device_error:
        rewrite = _mark(False, "FAILS: device error")
    else:
        rewrite = _mark(False, f"FAILS: {leg.short_error(50)}")
    # CPU numbers
    if report.cpu_equal is True:
        cpu = _mark(True, "equal")
    elif report.cpu_equal is False:
        first = report.cpu_differences[0] if report.cpu_differences else "differ"
        extra = f" (+{len(report.cpu_differences) - 1})" if len(report.cpu_differences) > 1 else ""
        if report.intended_change:
            cpu = _mark(True, f"differ, as intended: {first}{extra}")
        else:
            cpu = _mark(False, f"DIFFER: {first}{extra}")
    else:
        failing = [leg for leg in (report.original_cpu, report.rewrite_cpu) if leg is not None and leg.status != "ran"]
        if failing:
            cpu = _mark(False, f"{failing[0].code} fails on CPU: {failing[0].short_error(40)}")
        else:
            cpu = _mark(False, "not compared")
    return [Text(report.name), codemods, original, rewrite, cpu]


def table(reports, device: str) -> Table:
    result = Table(title=f"torchfix-device verify — DEV = {device}", title_justify="left")
    for heading in ("model", "codemods applied", f"original on {device}", f"rewrite on {device}", "CPU numbers equal"):
        result.add_column(heading, overflow="fold")
    for report in reports:
        result.add_row(*cells(report))
    return result


def details(reports) -> list[str]:
    """Lines explaining each model that did not behave as expected."""
    lines: list[str] = []
    for report in reports:
        if report.ok:
            continue
        lines.append(f"{report.name} ({report.path}):")
        for problem in report.problems:
            lines.append(f"  contract: {problem}")
        if report.missing_codemods and not report.problems:
            lines.append(f"  declared codemods that fixed nothing: {' '.join(report.missing_codemods)}")
        for label, leg in (
            ("original on DEV", report.original_dev), ("rewrite on DEV", report.rewrite_dev),
            ("original on CPU", report.original_cpu), ("rewrite on CPU", report.rewrite_cpu),
        ):
            if leg is not None and leg.status not in ("ran", "not run"):
                where = f" at {leg.where}" if leg.where else ""
                lines.append(f"  {label}: {leg.status}{where}: {leg.error_type}: {leg.message}")
        if report.broken_fixture:
            lines.append("  BROKEN FIXTURE: the original must fail on DEV with a device error and run on the CPU")
        if report.cpu_equal is False and not report.intended_change:
            lines.extend(f"  CPU numbers: {d}" for d in report.cpu_differences)
    return lines


def _run_cell(record: dict | None) -> Text:
    """What one run of a user's model did, in a table cell."""
    if record is None:
        return Text("—")
    if record["status"] == "ran":
        return _mark(True, "runs")
    if record["status"] == "built":
        return _mark(True, "built (no inputs to call it with)")
    error = record.get("error") or {}
    if error.get("device_error"):
        return _mark(False, "fails: device error")
    return _mark(False, "fails: " + " ".join(f"{error.get('type', 'Error')}: {error.get('message', '')}".split())[:60])


def user_table(reports, device: str) -> Table:
    """The user's models: what the rewrite changed, each model before and after it on DEV, and
    whether the CPU outputs stayed the same."""
    result = Table(title=f"torchfix-device verify — your models, on {device} and on the CPU", title_justify="left")
    for heading in ("model", "rewrite", f"before the rewrite, on {device}", f"after the rewrite, on {device}", "outputs on the CPU"):
        result.add_column(heading, overflow="fold")
    for report in reports:
        changed = " ".join(report.applied) or "no change"
        if report.skipped is not None or report.problem is not None:
            result.add_row(Text(report.name), Text(changed), Text("—"), Text("—"), Text("—"))
            continue
        if report.cpu_equal is True or (report.cpu_equal is False and not report.output_differences):
            cpu = _mark(True, "same")
        elif report.cpu_equal is False and report.intended_change is not None:
            cpu = _mark(True, "differ, as intended: " + report.output_differences[0])
        elif report.cpu_equal is False:
            cpu = _mark(False, "differ: " + report.output_differences[0])
        else:
            cpu = Text("not compared")
        result.add_row(Text(report.name), Text(changed), _run_cell(report.run("original")), _run_cell(report.run("rewrite")), cpu)
    return result


def user_lines(reports) -> list[str]:
    """One verdict in plain words per model, and its notes."""
    lines = []
    for report in reports:
        mark = "-" if report.ok is None else "✓" if report.ok else "✗"
        lines.append(f"{mark} {report.name}: {report.verdict()}")
        if report.inputs and report.ok is not None:
            lines.append(f"  inputs: {report.inputs}")
        lines += [f"  note: {note}" for note in report.notes]
    return lines


def _import_torch_quietly() -> None:
    """Import torch with its own warnings silenced (a missing numpy is not the user's result)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch  # noqa: F401


def run_verify(paths: list[Path], device: str | None, as_json: bool) -> int:
    """The ``verify`` command; returns the exit code."""
    err = _stderr()
    if importlib.util.find_spec("torch") is None:
        err.print(f"[red]error[/]: `torchfix-device verify` runs models and needs PyTorch: {escape(INSTALL_HINT)}", soft_wrap=True)
        return EXIT_USAGE
    _import_torch_quietly()
    try:
        target = resolve_device(device)
        files = model_files(paths)
    except UsageError as exc:
        err.print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
        return EXIT_USAGE
    if not files:
        err.print("[red]error[/]: no model files to verify", soft_wrap=True)
        return EXIT_USAGE

    from torchfix_device.verify.contract import read_spec
    from torchfix_device.verify.user_verifier import verify_user_file
    from torchfix_device.verify.verifier import verify_model

    reports, user_reports = [], []
    for index, path in enumerate(files, 1):
        spec = read_spec(path)
        with err.status(f"[{index}/{len(files)}] {path.stem} on {target} and cpu…"):
            if spec.kind == "user":
                user_reports += verify_user_file(spec, target)
            else:
                reports.append(verify_model(path, target))
    if as_json:
        records = [{"kind": "fixture", **r.to_json()} for r in reports] + [{"kind": "user", **r.to_json()} for r in user_reports]
        json.dump(records, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        out = Console()
        if not out.is_terminal and "COLUMNS" not in os.environ:
            out = Console(width=PIPE_WIDTH)
        if reports:
            out.print(table(reports, target))
            for line in details(reports):
                out.print(line, soft_wrap=True, highlight=False, markup=False)
        if user_reports:
            out.print(user_table(user_reports, target))
            for line in user_lines(user_reports):
                out.print(line, soft_wrap=True, highlight=False, markup=False)
        if target == "meta":
            err.print(STAND_IN_NOTE, soft_wrap=True)
    judged = [r.ok for r in reports] + [r.ok for r in user_reports if r.ok is not None]
    good = sum(1 for ok in judged if ok)
    skipped = sum(1 for r in user_reports if r.ok is None)
    extra = f" ({skipped} not run)" if skipped else ""
    err.print(f"{good} of {len(judged)} models as expected on {target}{extra}", soft_wrap=True)
    return EXIT_OK if judged and good == len(judged) else EXIT_FAILED
