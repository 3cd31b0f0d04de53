"""``check --output-format concise|full|grouped`` (``text``, the default, is ``concise``), as ruff
writes them.

* ``concise``: one line per finding, ``path:line:col: CODE [*] message``; ``[*]`` when ``apply``
  would fix it with the run's ``--unsafe-fixes`` setting. A place left for a person ends in
  ``[manual review]``, a fix held back for ``--unsafe-fixes`` in ``[unsafe fix: rerun with
  --unsafe-fixes]``. In a notebook the place is ``cell N:line:col`` (as ruff writes it).
* ``grouped``: the file's path on a line of its own, then ``  line:col CODE [*] message`` for each
  of its findings, and an empty line.
* ``full``: ruff's current layout: ``CODE [*] message``, `` --> path:line:col``, the source lines
  around it with a caret under the column, and a ``help:`` line for what is not fixed.
"""

from __future__ import annotations

import json
import re
from typing import Callable, Sequence

from torchfix_device.finding import Finding
from torchfix_device.report.termout import STYLES
from torchfix_device.results import FileResult

Paint = Callable[[str, str], str]
"""``paint(text, style)``: ``text`` in a style of :data:`~torchfix_device.report.termout.STYLES`."""


def painter(colour: bool) -> Paint:
    """Colour as ruff's: the path bold, the code red and bold, ``[*]`` cyan; nothing without ``colour``."""
    if not colour:
        return lambda text, style: text
    return lambda text, style: f"\x1b[{STYLES[style]}m{text}\x1b[0m"


PLAIN = painter(False)

HELD_BACK = "unsafe fix: rerun with --unsafe-fixes"
TAGS = {"unsafe-fix": HELD_BACK, "manual": "manual review", "declined": "declined"}
"""What a finding that ``apply`` would not fix is marked with."""
CONTEXT_LINES = 1
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _head(finding: Finding, paint: Paint = PLAIN, *, tagged: bool = True) -> str:
    """``CODE [*] message``, with the tag of a finding that is not fixed (``tagged``)."""
    tag = TAGS.get(finding.kind) if tagged else None
    fixable = paint("[*]", "cyan") + " " if finding.fixed else ""
    return f"{paint(finding.code, 'bold red')} {fixable}{finding.message}{f' [{tag}]' if tag else ''}"


def concise_lines(results: Sequence[FileResult], *, unused: bool, paint: Paint = PLAIN) -> list[str]:
    lines = []
    for result in results:
        lines += [f"{paint(result.display, 'bold')}:{f.where}: {_head(f, paint)}" for f in result.findings]
        if unused:
            lines += [f"{result.display}:{u.line}:{u.column}: {_unused(u)}" for u in result.unused_suppressions]
    return lines


def _unused(unused) -> str:
    return f"unused suppression `{unused.directive}`: {unused.reason}"


def grouped_lines(results: Sequence[FileResult], *, unused: bool, paint: Paint = PLAIN) -> list[str]:
    lines: list[str] = []
    for result in results:
        entries = [f"  {f.where} {_head(f, paint)}" for f in result.findings]
        if unused:
            entries += [f"  {u.line}:{u.column} {_unused(u)}" for u in result.unused_suppressions]
        if entries:
            lines += [f"{paint(result.display, 'bold')}:", *entries, ""]
    return lines


def full_lines(results: Sequence[FileResult], *, unused: bool, paint: Paint = PLAIN) -> list[str]:
    lines: list[str] = []
    for result in results:
        sources: dict[int | None, list[str] | None] = {}
        for finding in result.findings:
            if finding.cell not in sources:
                sources[finding.cell] = _source_lines(result, finding.cell)
            lines += [_head(finding, paint, tagged=False), f" --> {paint(result.display, 'bold')}:{finding.where}"]
            lines += _frame(sources[finding.cell], finding.line, finding.column)
            tag = TAGS.get(finding.kind)
            if tag:
                lines.append(f"help: {tag}")
            lines.append("")
        if unused:
            source = sources.get(None) if None in sources else _source_lines(result, None)
            for u in result.unused_suppressions:
                lines += [_unused(u), f" --> {result.display}:{u.line}:{u.column}", *_frame(source, u.line, u.column), ""]
    return lines


def _source_lines(result: FileResult, cell: int | None) -> list[str] | None:
    """The lines of the file (or of a notebook's cell) as read, None where they are not known."""
    if result.source is None:
        return None
    text = result.source.text
    if cell is not None:
        try:
            source = json.loads(text)["cells"][cell - 1]["source"]
        except (ValueError, LookupError, TypeError):
            return None
        text = "".join(source) if isinstance(source, list) else source if isinstance(source, str) else None
        if text is None:
            return None
    return _LINE_BREAK.split(text)


def _frame(lines: list[str] | None, line: int, column: int) -> list[str]:
    """The source around ``line`` with a caret under ``column``, as ruff draws it."""
    if lines is None or not 0 < line <= len(lines):
        return []
    first, last = max(1, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES)
    width = len(str(last))
    out = [f"{' ' * width} |"]
    for number in range(first, last + 1):
        text = lines[number - 1].expandtabs(1)
        out.append(f"{number:>{width}} | {text}".rstrip())
        if number == line:
            out.append(f"{' ' * width} | {' ' * (column - 1)}^")
    out.append(f"{' ' * width} |")
    return out
