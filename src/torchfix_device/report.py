"""Everything the user reads: diffs, findings, summaries, the rules table and rule docs."""

from __future__ import annotations

import difflib
import sys
from collections import Counter
from typing import IO, Sequence

from rich.console import Console
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.table import Table

from torchfix_device.codemod import DOC_SECTIONS, Codemod
from torchfix_device.runner import FileResult

NO_NEWLINE = "\\ No newline at end of file\n"


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def unified_diff(result: FileResult) -> bytes:
    """A ``git apply``-able unified diff of one changed file, in the file's own encoding."""
    assert result.source is not None and result.new_text is not None
    prefix = "\ufeff" if result.source.bom else ""
    old = (prefix + result.source.text).splitlines(keepends=True)
    new = (prefix + result.new_text).splitlines(keepends=True)
    out: list[str] = []
    for index, line in enumerate(difflib.unified_diff(old, new, f"a/{result.display}", f"b/{result.display}")):
        if index >= 2 and not line.startswith("@@") and not line.endswith("\n"):
            line += "\n" + NO_NEWLINE
        out.append(line)
    headers = "".join(out[:2]).encode("utf-8", "surrogateescape")
    body = "".join(out[2:]).encode(result.source.encoding, "replace")
    return headers + body


def write_diffs(results: Sequence[FileResult], stream: IO[str] | None = None) -> None:
    """Diffs of the changed files on stdout: plain bytes to a pipe, coloured on a terminal."""
    stream = stream or sys.stdout
    changed = [r for r in results if r.status == "changed"]
    if stream.isatty():
        console = Console(file=stream)
        for result in changed:
            text = unified_diff(result).decode(result.source.encoding if result.source else "utf-8", "replace")
            console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
        return
    stream.flush()
    buffer = getattr(stream, "buffer", None)
    for result in changed:
        data = unified_diff(result)
        if buffer is not None:
            buffer.write(data)
        else:
            stream.write(data.decode("utf-8", "replace"))
    if buffer is not None:
        buffer.flush()


def finding_lines(results: Sequence[FileResult]) -> list[str]:
    """``path:line:col CODE message`` per finding, ordered by file and position."""
    lines = []
    for result in results:
        for f in result.findings:
            suffix = ""
            if f.held_back:
                suffix = " [unsafe fix: rerun with --unsafe-fixes]"
            elif not f.fixed:
                suffix = " [manual review]"
            lines.append(f"{result.display}:{f.line}:{f.column} {f.code} {f.message}{suffix}")
    return lines


def print_problems(results: Sequence[FileResult], console: Console) -> None:
    """One line per file that failed or was skipped, naming it (and the line, where known)."""
    for result in results:
        if result.status in ("failed", "skipped") and result.error:
            style = "red" if result.status == "failed" else "yellow"
            where = result.display
            message = result.error
            if message.startswith("line "):
                location, _, message = message[5:].partition(": ")
                where = f"{where}:{location}"
            console.print(f"[{style}]{result.status}[/]: {where}: {message}", soft_wrap=True)


def print_manual_review(results: Sequence[FileResult], console: Console) -> None:
    """For ``apply``: the places left for a person, and the checkpoint notes."""
    for result in results:
        for f in result.findings:
            if not f.fixed:
                tag = "unsafe fix held back" if f.held_back else "manual review"
                console.print(f"{tag}: {result.display}:{f.line}:{f.column} {f.code} {f.message}", soft_wrap=True)
        for note in result.notes:
            console.print(f"[yellow]checkpoint[/]: {result.display}: {note}", soft_wrap=True)


def summary_line(results: Sequence[FileResult], *, wrote: bool, checking: bool = False) -> str:
    scanned = sum(1 for r in results if r.source is not None or r.status in ("changed", "unchanged"))
    changed = sum(1 for r in results if r.status == "changed")
    failed = sum(1 for r in results if r.status == "failed")
    skipped = sum(1 for r in results if r.status == "skipped")
    fixes = Counter(f.code for r in results for f in r.findings if f.fixed)
    manual = Counter(f.code for r in results for f in r.findings if not f.fixed)
    verb = "would change" if checking or not wrote else "changed"
    parts = [f"{scanned} file{'s' if scanned != 1 else ''} scanned", f"{changed} {verb}", f"{failed} failed"]
    if skipped:
        parts.append(f"{skipped} skipped")
    line = ", ".join(parts)
    if fixes:
        line += "; fixes: " + ", ".join(f"{c} ×{n}" for c, n in sorted(fixes.items()))
    if manual:
        line += "; left for review: " + ", ".join(f"{c} ×{n}" for c, n in sorted(manual.items()))
    return line


def rules_table(codemods: Sequence[type[Codemod]]) -> Table:
    table = Table(title="torchfix-device codemods")
    table.add_column("code", style="bold")
    table.add_column("name")
    table.add_column("safe?")
    table.add_column("summary")
    for c in codemods:
        table.add_row(c.code, c.name, "safe" if c.safe else "unsafe", c.summary)
    return table


def explain_markdown(codemod: type[Codemod]) -> str:
    sections = codemod.documentation()
    parts = [f"# {codemod.code} {codemod.name}", "", codemod.summary, "", f"Fix: {'safe' if codemod.safe else 'unsafe'}", ""]
    for heading in DOC_SECTIONS:
        parts += [f"## {heading}", "", sections.get(heading, "(missing)"), ""]
    return "\n".join(parts)


def print_explain(codemod: type[Codemod], console: Console) -> None:
    text = explain_markdown(codemod)
    if console.is_terminal:
        console.print(Markdown(text))
    else:
        console.file.write(text + "\n")
