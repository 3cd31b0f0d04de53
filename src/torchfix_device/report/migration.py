"""``apply --report FILE``: a record of a migration, in Markdown (or JSON for ``*.json``).

It lists every change with its place and codemod, every place left for manual review with the
reason, the unsafe fixes held back, the checkpoint-compatibility warnings (new ``state_dict``
keys), the files not processed, and counts per codemod and per file. The model is
``tf_upgrade_v2 --reportfile``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from torchfix_device import __version__
from torchfix_device.finding import Finding
from torchfix_device.files.sources import atomic_write
from torchfix_device.results import FileResult

if TYPE_CHECKING:
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod


class ReportError(Exception):
    pass


def report_path_problem(path: Path) -> str | None:
    """Why a report cannot be written at ``path``, found out before any file is rewritten: its
    folder refuses a new file (the report is written through a temp file next to it), or it
    names something that is not a regular file. None when it can be written."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return "exists and is not a regular file"
    folder = path.parent
    try:
        probe = folder / f".{path.name}.{os.getpid()}.probe.torchfix-device"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write in {folder.as_posix()}: {exc.strerror or exc}"
    if path.exists() and not os.access(path, os.W_OK):
        return "exists and is not writable"
    return None


def _record(result: FileResult, f: Finding) -> dict:
    record = {"file": result.display, "line": f.line, "column": f.column, "code": f.code, "message": f.message}
    if f.cell is not None:  # a notebook: the line and column are within this cell
        record["cell"] = f.cell
    return record


def _counts(findings: Sequence[Finding], suppressed: Sequence[Finding], changed: bool) -> dict[str, int]:
    return {
        "fixed": sum(1 for f in findings if f.fixed and changed),
        "held_back": sum(1 for f in findings if f.held_back),
        "manual_review": sum(1 for f in findings if f.kind == "manual"),
        "suppressed": len(suppressed),
    }


def report_data(results: Sequence[FileResult], codemods: Sequence["CodemodRef | type[Codemod]"], *, mode: str) -> dict:
    """Everything the report says, as plain data (the JSON report is exactly this)."""
    changed = [r for r in results if r.status == "changed"]
    skipped_by = Counter(r.skip_kind or "other" for r in results if r.status == "skipped")
    per_codemod = []
    for codemod in codemods:
        counts: Counter = Counter()
        for r in results:
            mine = [f for f in r.findings if f.code == codemod.code]
            hidden = [f for f in r.suppressed if f.code == codemod.code]
            counts.update(_counts(mine, hidden, r.status == "changed"))
        per_codemod.append({"code": codemod.code, "name": codemod.name, **{k: counts[k] for k in ("fixed", "held_back", "manual_review", "suppressed")}})
    per_file = [
        {"file": r.display, "status": r.status, **_counts(r.findings, r.suppressed, r.status == "changed")}
        for r in results if r.findings or r.suppressed or r.status != "unchanged"
    ]
    return {
        "tool": {"name": "torchfix-device", "version": __version__},
        "command": shlex.join(["torchfix-device", *sys.argv[1:]]),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "mode": mode,
        "summary": {
            "files_scanned": sum(1 for r in results if r.status in ("changed", "unchanged", "refused") or (r.status == "failed" and r.source is not None)),
            "files_changed": len(changed),
            "files_failed": sum(1 for r in results if r.status == "failed"),
            "files_refused": sum(1 for r in results if r.status == "refused"),
            "files_skipped": sum(skipped_by.values()),
            "skipped_by_reason": dict(sorted(skipped_by.items())),
            "changes": sum(1 for r in changed for f in r.findings if f.fixed),
            "manual_review": sum(1 for r in results for f in r.findings if f.kind == "manual"),
            "held_back": sum(1 for r in results for f in r.findings if f.held_back),
            "suppressed": sum(len(r.suppressed) for r in results),
        },
        "per_codemod": per_codemod,
        "per_file": per_file,
        "changes": [_record(r, f) for r in changed for f in r.findings if f.fixed],
        "manual_review": [_record(r, f) for r in results for f in r.findings if f.kind == "manual"],
        "held_back": [_record(r, f) for r in results for f in r.findings if f.held_back],
        "checkpoint_warnings": [{"file": r.display, "message": n} for r in results for n in r.notes],
        "not_processed": [
            {"file": r.display, "status": r.status, "reason": r.error}
            for r in results if r.status in ("failed", "skipped", "refused") and r.error
        ] + [{"file": r.display, "status": "not read", "reason": p} for r in results for p in r.problems],
    }


# -- Markdown -----------------------------------------------------------------------------------
MARKDOWN_SPECIALS = "\\`*_[]<>#|"


def _prose(text: object) -> str:
    """A message as Markdown: its `code spans` kept, Markdown characters elsewhere escaped
    (``__init__`` must not turn bold), on one line."""
    parts = str(text).replace("\n", " ").split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans at all
        parts = ["`".join(parts)]
    out = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(_code(part))
        else:
            out.append("".join("\\" + ch if ch in MARKDOWN_SPECIALS else ch for ch in part))
    return "".join(out)


def _cell(text: object) -> str:
    """A table cell (a file name, a count): every Markdown character escaped."""
    return "".join("\\" + ch if ch in MARKDOWN_SPECIALS else ch for ch in str(text).replace("\n", " "))


def _code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds."""
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _place(item: dict) -> str:
    cell = f"cell {item['cell']}:" if item.get("cell") is not None else ""
    return _code(f"{item['file']}:{cell}{item['line']}:{item['column']}")


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _finding_list(items: Sequence[dict], empty: str) -> list[str]:
    if not items:
        return [empty, ""]
    return [f"- {_place(i)} **{i['code']}** {_prose(i['message'])}" for i in items] + [""]


def report_markdown(data: dict) -> str:
    s = data["summary"]
    out = [
        "# torchfix-device migration report",
        "",
        f"- Command: {_code(data['command'])}",
        f"- Tool: torchfix-device {data['tool']['version']}",
        f"- Generated: {data['generated']}",
        f"- Mode: {data['mode']}",
        "",
        "## Summary",
        "",
    ]
    skipped = s["files_skipped"]
    reasons = ", ".join(f"{n} {k}" for k, n in s["skipped_by_reason"].items())
    out += _table(["", "count"], [
        ["files scanned", s["files_scanned"]],
        ["files that would change" if data["mode"].startswith("dry run") else "files changed", s["files_changed"]],
        ["files that failed", s["files_failed"]],
        *([["files refused (uncommitted changes; not rewritten)", s["files_refused"]]] if s["files_refused"] else []),
        ["files skipped" + (f" ({reasons})" if skipped else ""), skipped],
        ["changes", s["changes"]],
        ["left for manual review", s["manual_review"]],
        ["unsafe fixes held back", s["held_back"]],
        ["suppressed by noqa comments", s["suppressed"]],
    ])
    out += ["## Per codemod", ""]
    used = [c for c in data["per_codemod"] if any(c[k] for k in ("fixed", "held_back", "manual_review", "suppressed"))]
    out += _table(["code", "name", "changes", "manual review", "held back", "suppressed"], [
        [c["code"], c["name"], c["fixed"], c["manual_review"], c["held_back"], c["suppressed"]] for c in used
    ]) if used else ["No codemod matched.", ""]
    out += ["## Per file", ""]
    out += _table(["file", "status", "changes", "manual review", "held back", "suppressed"], [
        [f["file"], f["status"], f["fixed"], f["manual_review"], f["held_back"], f["suppressed"]] for f in data["per_file"]
    ]) if data["per_file"] else ["No file had anything to report.", ""]
    out += ["## Changes", ""] + _finding_list(data["changes"], "No change.")
    out += ["## Left for manual review", "", "Each place with the reason it was not rewritten.", ""]
    out += _finding_list(data["manual_review"], "Nothing.")
    if data["held_back"]:
        out += ["## Unsafe fixes held back", "", "Applied with `--unsafe-fixes`; see `torchfix-device explain CODE`.", ""]
        out += _finding_list(data["held_back"], "")
    out += ["## Checkpoint compatibility", ""]
    if data["checkpoint_warnings"]:
        out += [f"- {_code(w['file'])}: {_prose(w['message'])}" for w in data["checkpoint_warnings"]] + [""]
    else:
        out += ["No rewrite changes the keys of a `state_dict`.", ""]
    if data["not_processed"]:
        out += ["## Files not processed", ""]
        out += [f"- {_code(p['file'])} ({p['status']}): {_prose(p['reason'])}" for p in data["not_processed"]] + [""]
    return "\n".join(out)


def write_report(path: Path, results: Sequence[FileResult], codemods: Sequence["CodemodRef | type[Codemod]"], *, mode: str) -> None:
    """Write the report atomically: JSON when ``path`` ends in ``.json``, else Markdown."""
    data = report_data(results, codemods, mode=mode)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n" if path.suffix.lower() == ".json" else report_markdown(data)
    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as exc:
        raise ReportError(f"cannot write report {path}: {exc.strerror or exc}") from None
