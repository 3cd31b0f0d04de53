"""``check --output-format json`` (and ``json-lines``): ruff's JSON, so that tools that read
ruff's read ours.

One record per finding, with ruff's fields: ``filename`` (absolute, as ruff gives it; ``-`` for
stdin without ``--stdin-filename``), ``location`` and ``end_location`` (``row``, ``column``, from
1; in a notebook within the cell named by ``cell``, counted from 1, else ``cell`` is null),
``code``, ``message``, ``fix`` and ``url`` (the rule's page). ``fix`` is null for a place left
for a person; otherwise ``applicability`` is ``safe`` or ``unsafe`` (an unsafe fix is listed
even when ``--unsafe-fixes`` was not given, as ruff lists it), and ``edits`` is what the fix
changes where that can be told exactly: a file with one fix to make, whose rewrite is one edit
replacing the lines that change with their new text; null for a fix held back (its rewrite was
not made), for a file with several fixes (they are made together, in one pass: ``apply`` makes
them) and in a notebook (rows of a cell are not rows of the file). Our own ``kind`` (``fix``,
``unsafe-fix``, ``manual``, ``declined``) is kept beside them.

A file that could not be processed, a notebook cell not read, a file skipped or refused, and
(with ``--show-unused-suppressions``) a suppression that suppresses nothing, are records with
``code`` null, as ruff gives a syntax error, and a ``kind`` saying which.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from torchfix_device.finding import Finding
from torchfix_device.results import FileResult

DOCS = Path(__file__).resolve().parents[3] / "docs" / "rules"
"""The rule pages, in a checkout of the project (an installed wheel has none)."""
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
QUIET_SKIPS = frozenset({".gitignore", "@generated", "skip-file", "excluded", "interrupted", "no Python files"})


def rule_url(code: str, name: str) -> str | None:
    """The rule's page as a ``file:`` URL where this checkout holds it, else None."""
    page = DOCS / f"{code}-{name}.md"
    return page.as_uri() if page.is_file() else None


def _filename(result: FileResult) -> str:
    return result.display if result.display == "-" else str(result.path.absolute())


def _location(row: int, column: int) -> dict:
    return {"row": row, "column": column}


def records(results: Sequence[FileResult], names: dict[str, str], *, unused: bool) -> list[dict]:
    """Every record of the run, file by file, in the order of the text output."""
    out: list[dict] = []
    for result in results:
        edits = _single_edit(result)
        for finding in result.findings:
            out.append(_finding_record(result, finding, names, edits if finding.fixed else None))
        out += _problem_records(result)
        if unused:
            out += [
                _plain(result, f"unused suppression `{u.directive}`: {u.reason}", "unused-suppression", u.line, u.column)
                for u in result.unused_suppressions
            ]
    return out


def _finding_record(result: FileResult, finding: Finding, names: dict[str, str], edits: list[dict] | None) -> dict:
    fix = None
    if finding.fixed or finding.held_back:
        fix = {"applicability": "unsafe" if finding.unsafe else "safe", "edits": edits, "message": None}
    where = _location(finding.line, finding.column)
    return {
        "cell": finding.cell,
        "code": finding.code,
        "end_location": where,
        "filename": _filename(result),
        "fix": fix,
        "location": where,
        "message": finding.message,
        "noqa_row": None,
        "url": rule_url(finding.code, names[finding.code]) if finding.code in names else None,
        "kind": finding.kind,
    }


def _plain(result: FileResult, message: str, kind: str, row: int = 1, column: int = 1, cell: int | None = None) -> dict:
    """A record with no rule: a file not processed, a cell not read, an unused suppression."""
    where = _location(row, column)
    return {
        "cell": cell, "code": None, "end_location": where, "filename": _filename(result), "fix": None,
        "location": where, "message": message, "noqa_row": None, "url": None, "kind": kind,
    }


def _problem_records(result: FileResult) -> list[dict]:
    out = []
    quiet = result.status == "skipped" and result.skip_kind in QUIET_SKIPS
    if result.status in ("failed", "skipped", "refused") and result.error and not quiet:
        row, column, message = _position(result.error)
        out.append(_plain(result, message, result.status, row, column))
    for problem in result.problems:  # ``cell 3: line 2:5: syntax error ...``
        cell_text, _, rest = problem.partition(": ")
        cell = int(cell_text[5:]) if cell_text.startswith("cell ") and cell_text[5:].isdigit() else None
        row, column, message = _position(rest)
        out.append(_plain(result, f"not read: {message}", "not read", row, column, cell))
    return out


def _position(error: str) -> tuple[int, int, str]:
    """``line 3:5: syntax error`` -> (3, 5, ``syntax error``); (1, 1, error) without a place."""
    match = re.match(r"line (\d+)(?::(\d+))?: (.*)", error, re.S)
    if match is None:
        return 1, 1, error
    return int(match.group(1)), int(match.group(2) or 1), match.group(3)


def _single_edit(result: FileResult) -> list[dict] | None:
    """The rewrite of a changed ``.py`` file with exactly one fix, as one edit (see the module
    docstring); None otherwise."""
    if result.status != "changed" or result.source is None or result.new_text is None or result.path.suffix == ".ipynb":
        return None
    if sum(1 for f in result.findings if f.fixed) != 1:
        return None
    return [edit_between(result.source.text, result.new_text)]


def edit_between(old: str, new: str) -> dict:
    """One edit that turns ``old`` into ``new``: the lines from the first that differs to the
    last that differs, replaced by their new text (rows and columns from 1, as ruff counts them;
    an end at the end of a file that ends in a line break is the row after its last line)."""
    old_lines, new_lines = _LINE.findall(old), _LINE.findall(new)
    start = 0
    while start < min(len(old_lines), len(new_lines)) and old_lines[start] == new_lines[start]:
        start += 1
    tail = 0
    while (tail < min(len(old_lines), len(new_lines)) - start
           and old_lines[len(old_lines) - 1 - tail] == new_lines[len(new_lines) - 1 - tail]):
        tail += 1
    old_end, new_end = len(old_lines) - tail, len(new_lines) - tail
    return {
        "content": "".join(new_lines[start:new_end]),
        "end_location": _end_of(old_lines, old_end),
        "location": _end_of(old_lines, start),
    }


def _end_of(lines: list[str], count: int) -> dict:
    """Where the first ``count`` lines end: the start of line ``count + 1``, or, past a last
    line with no line break, the column after it."""
    if count and count == len(lines) and not lines[-1].endswith(("\n", "\r")):
        return _location(count, len(lines[-1]) + 1)
    return _location(count + 1, 1)
