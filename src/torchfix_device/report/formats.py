"""``check --output-format``: the findings as ruff writes them (``concise``, the default, also
spelt ``text``; ``full``; ``grouped``; ``json``; ``json-lines``), GitHub annotations or SARIF 2.1.0.

Every format carries the same things: each finding (fix, unsafe fix held back, or manual
review) with its place, the files that could not be processed, and, when asked for, the
suppressions that suppressed nothing. The text formats are in
:mod:`~torchfix_device.report.text_formats`, ruff's JSON in :mod:`~torchfix_device.report.ruff_json`.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from torchfix_device import __version__
from torchfix_device.finding import Finding
from torchfix_device.report import ruff_json, text_formats
from torchfix_device.results import FileResult

if TYPE_CHECKING:
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod

SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
KIND_LABEL = {"fix": "fix", "unsafe-fix": "unsafe fix: rerun with --unsafe-fixes", "manual": "manual review", "declined": "declined"}


class OutputFormat(str, Enum):
    text = "text"
    """``concise``, by its old name (the default)."""
    concise = "concise"
    full = "full"
    grouped = "grouped"
    json = "json"
    json_lines = "json-lines"
    github = "github"
    sarif = "sarif"


def render(fmt: OutputFormat, results: Sequence[FileResult], codemods: Sequence["CodemodRef | type[Codemod]"], *, unused: bool,
           colour: bool = False) -> str:
    """The whole stdout of ``check`` in format ``fmt`` ("" for text with nothing to say);
    ``colour``: the text formats in ruff's colours (for a terminal, or ``FORCE_COLOR``)."""
    if fmt in (OutputFormat.json, OutputFormat.json_lines):
        records = ruff_json.records(results, {c.code: c.name for c in codemods}, unused=unused)
        if fmt is OutputFormat.json:
            return json.dumps(records, indent=2, ensure_ascii=False) + "\n"
        return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    if fmt is OutputFormat.sarif:
        return json.dumps(sarif_document(results, codemods, unused=unused), indent=2, ensure_ascii=False) + "\n"
    if fmt is OutputFormat.github:
        lines = github_lines(results, unused=unused)
    else:
        paint = text_formats.painter(colour)
        layout = {OutputFormat.full: text_formats.full_lines, OutputFormat.grouped: text_formats.grouped_lines}
        lines = layout.get(fmt, text_formats.concise_lines)(results, unused=unused, paint=paint)
    return "".join(line + "\n" for line in lines)


def _in_cell(finding: Finding, message: str) -> str:
    """A notebook finding's message, prefixed with its place in the cell (the annotation's and
    SARIF's lines count the lines of the file, which in a notebook is JSON)."""
    return message if finding.cell is None else f"cell {finding.cell}, line {finding.line}, column {finding.column}: {message}"


# -- GitHub workflow commands ----------------------------------------------------------------
def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation(level: str, file: str, message: str, *, line: int | None = None, col: int | None = None, title: str = "") -> str:
    props = [f"file={_escape_property(file)}"]
    if line is not None:
        props.append(f"line={line}")
    if col is not None:
        props.append(f"col={col}")
    if title:
        props.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def github_lines(results: Sequence[FileResult], *, unused: bool) -> list[str]:
    """``::warning file=...,line=...,col=...,title=...::message`` per finding; ``::error`` per
    file that could not be processed."""
    lines = []
    for result in results:
        for f in result.findings:
            level = "warning" if f.kind != "manual" else "notice"
            title = f"{f.code} ({KIND_LABEL[f.kind]})"
            if f.cell is None:
                lines.append(_annotation(level, result.display, f.message, line=f.line, col=f.column, title=title))
            else:
                lines.append(_annotation(level, result.display, _in_cell(f, f.message), title=f"{title} in cell {f.cell}"))
        if result.status == "failed" and result.error:
            line, message = _split_line(result.error)
            lines.append(_annotation("error", result.display, message, line=line, title="not processed by torchfix-device"))
        for problem in result.problems:  # a notebook cell left as it is (it does not parse)
            lines.append(_annotation("error", result.display, problem, title="not read by torchfix-device"))
        if unused:
            for u in result.unused_suppressions:
                lines.append(_annotation(
                    "warning", result.display, f"unused suppression `{u.directive}`: {u.reason}",
                    line=u.line, col=u.column, title="unused suppression",
                ))
    return lines


def _split_line(error: str) -> tuple[int | None, str]:
    """``line 3:5: syntax error`` → (3, ``syntax error``)."""
    if error.startswith("line "):
        location, _, message = error[5:].partition(": ")
        number = location.split(":")[0]
        if number.isdigit():
            return int(number), message
    return None, error


# -- SARIF 2.1.0 --------------------------------------------------------------------------------
def _artifact_uri(result: FileResult) -> dict:
    """A relative URI against %SRCROOT% (the current directory) where the file is below it."""
    display = result.display
    if Path(display).is_absolute():
        return {"uri": Path(display).as_uri()}
    return {"uri": urllib.parse.quote(display), "uriBaseId": "%SRCROOT%"}


def _sarif_rule(codemod: "CodemodRef | type[Codemod]") -> dict:
    sections = codemod.documentation()
    return {
        "id": codemod.code,
        "name": codemod.name,
        "shortDescription": {"text": codemod.summary},
        "fullDescription": {"text": sections.get("What it does", codemod.summary)},
        "help": {"text": f"torchfix-device explain {codemod.code}"},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"fixSafety": codemod.fix_tier()},
    }


def _sarif_result(result: FileResult, finding: Finding, rule_index: dict[str, int], *, suppressed: bool) -> dict:
    location: dict = {"artifactLocation": _artifact_uri(result)}
    properties: dict = {"kind": finding.kind}
    if finding.cell is None:
        location["region"] = {"startLine": finding.line, "startColumn": finding.column}
    else:  # the region would count the notebook's JSON lines: the cell goes in the message and properties
        properties.update(cell=finding.cell, cellLine=finding.line, cellColumn=finding.column)
    record: dict = {
        "ruleId": finding.code,
        "level": "note" if finding.kind == "manual" else "warning",
        "message": {"text": _in_cell(finding, finding.message)},
        "locations": [{"physicalLocation": location}],
        "properties": properties,
    }
    if finding.code in rule_index:
        record["ruleIndex"] = rule_index[finding.code]
    if suppressed:
        record["suppressions"] = [{"kind": "inSource", "justification": "# noqa comment"}]
    return record


def sarif_document(results: Sequence[FileResult], codemods: Sequence["CodemodRef | type[Codemod]"], *, unused: bool) -> dict:
    """One SARIF 2.1.0 run. Suppressed findings are included, marked with an in-source
    suppression (SARIF viewers hide them); columns count Unicode code points."""
    rules = [_sarif_rule(c) for c in codemods]
    rule_index = {c.code: i for i, c in enumerate(codemods)}
    sarif_results = []
    for result in results:
        sarif_results += [_sarif_result(result, f, rule_index, suppressed=False) for f in result.findings]
        sarif_results += [_sarif_result(result, f, rule_index, suppressed=True) for f in result.suppressed]
    notifications = []
    for result in results:
        if result.status == "failed" and result.error:
            line, message = _split_line(result.error)
            location: dict = {"physicalLocation": {"artifactLocation": _artifact_uri(result)}}
            if line is not None:
                location["physicalLocation"]["region"] = {"startLine": line}
            notifications.append({"level": "error", "message": {"text": message}, "locations": [location]})
        for problem in result.problems:  # a notebook cell left as it is (it does not parse)
            notifications.append({
                "level": "error", "message": {"text": f"not read: {problem}"},
                "locations": [{"physicalLocation": {"artifactLocation": _artifact_uri(result)}}],
            })
        if unused:
            for u in result.unused_suppressions:
                notifications.append({
                    "level": "warning",
                    "message": {"text": f"unused suppression `{u.directive}`: {u.reason}"},
                    "locations": [{"physicalLocation": {
                        "artifactLocation": _artifact_uri(result),
                        "region": {"startLine": u.line, "startColumn": u.column},
                    }}],
                })
    failed = any(r.status == "failed" for r in results)
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "torchfix-device",
                "version": __version__,
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(os.getcwd()).as_uri().rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": not failed,
                "toolExecutionNotifications": notifications,
            }],
            "results": sarif_results,
        }],
    }


# -- --statistics -------------------------------------------------------------------------------
def statistics(results: Sequence[FileResult], fmt: str) -> str:
    """``--statistics``: one row per code with findings, most frequent first, as ruff prints it
    (``count<TAB>code<TAB>[*] name``; ``[*]``: fixable, ``[ ]``: not), or a JSON list for ``json``."""
    from torchfix_device.codemods.catalog import refs

    names = {ref.code: ref.name for ref in refs()}
    counts: dict[str, list[int]] = {}
    for result in results:
        for f in result.findings:
            entry = counts.setdefault(f.code, [0, 0])
            entry[0] += 1
            entry[1] += f.fixed
    rows = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    if fmt == OutputFormat.json.value:
        records = [
            {"code": code, "name": names.get(code, ""), "count": n, "fixable": fixable > 0, "fixable_count": fixable}
            for code, (n, fixable) in rows
        ]
        return json.dumps(records, indent=2) + "\n"
    width = max((len(str(n)) for _, (n, _) in rows), default=1)
    return "".join(f"{n:>{width}}\t{code}\t{'[*]' if fixable else '[ ]'} {names.get(code, '')}\n" for code, (n, fixable) in rows)
