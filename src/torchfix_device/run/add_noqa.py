"""``check --add-noqa``: a ``# noqa: TFD...`` comment for every finding, the way a team adopts a
checker on a large code base (new code is checked, old code is marked).

The comment goes where :mod:`torchfix_device.syntax.suppressions` reads it for the finding's line: at
the end of the statement holding it (the last line of a statement written over several lines,
the ``:`` line of a compound statement's header, a decorator's line). An existing ``# noqa:
CODES`` there gains the new codes; another comment keeps its text and is followed by the
directive, as ruff writes it. The rewrite is made with libcst (only trailing comments change),
checked to suppress every finding it was made for, and written atomically. Notebooks are not
edited: their findings are listed instead.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchfix_device.files.sources import WriteError, atomic_replace
from torchfix_device.results import FileResult
from torchfix_device.syntax.suppressions import NOQA_RE, parse_suppressions


def add_noqa(results: Sequence[FileResult]) -> tuple[int, list[str]]:
    """Add the directives to the files of ``results``; (directives added, problems)."""
    added = 0
    problems: list[str] = []
    for result in results:
        findings = list(result.findings)
        if not findings or result.status not in ("changed", "unchanged") or result.source is None:
            continue
        if result.path.suffix == ".ipynb":
            places = ", ".join(f"{f.where} {f.code}" for f in findings)
            problems.append(f"{result.display}: notebooks are not edited by --add-noqa; add the comments by hand: {places}")
            continue
        wanted: dict[int, set[str]] = defaultdict(set)
        for f in findings:
            wanted[f.line].add(f.code)
        try:
            new_text, count = with_noqa(result.source.text, wanted)
        except cst.ParserSyntaxError as exc:
            problems.append(f"{result.display}: cannot place noqa comments: {exc.message}")
            continue
        suppressions = parse_suppressions(new_text)
        missed = sorted({(f.line, f.code) for f in findings if not suppressions.suppresses(f.line, f.code)})
        if missed:
            where = ", ".join(f"line {line} {code}" for line, code in missed)
            problems.append(f"{result.display}: no place for a noqa comment that covers {where}; file left unchanged")
            continue
        if count == 0:
            continue
        try:
            atomic_replace(result.path, result.source.encode(new_text), result.source.raw)
        except (WriteError, OSError, UnicodeEncodeError) as exc:
            problems.append(f"{result.display}: cannot write: {exc}")
            continue
        added += count
    return added, problems


class _Ends(cst.CSTVisitor):
    """The trailing whitespace that ends each logical line (where a ``noqa`` comment counts)."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.ends: dict[int, cst.TrailingWhitespace] = {}

    def _add(self, node: cst.TrailingWhitespace) -> None:
        self.ends[self.get_metadata(PositionProvider, node).start.line] = node

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._add(node.trailing_whitespace)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._add(node.trailing_whitespace)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._add(node.header)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._add(node.trailing_whitespace)


def _with_codes(comment: cst.Comment | None, codes: set[str]) -> cst.Comment | None:
    """The comment ending a line, now suppressing ``codes`` too (None: it already does)."""
    directive = "# noqa: " + ", ".join(sorted(codes))
    if comment is None:
        return cst.Comment(directive)
    match = NOQA_RE.search(comment.value)
    if match is None:
        return cst.Comment(f"{comment.value}  {directive}")
    if match.group("codes") is None:
        return None  # a bare noqa comment suppresses every code already
    present = {c.upper() for c in match.group("codes").replace(",", " ").split()}
    new = sorted(codes - present)
    if not new:
        return None
    end = match.end("codes")
    return cst.Comment(comment.value[:end] + ", " + ", ".join(new) + comment.value[end:])


class _AddComments(cst.CSTTransformer):
    def __init__(self, edits: dict[int, set[str]]) -> None:
        self.edits = edits
        self.count = 0

    def leave_TrailingWhitespace(self, original: cst.TrailingWhitespace, updated: cst.TrailingWhitespace) -> cst.TrailingWhitespace:
        codes = self.edits.get(id(original))
        if codes is None:
            return updated
        comment = _with_codes(updated.comment, codes)
        if comment is None:
            return updated
        self.count += 1
        whitespace = updated.whitespace if updated.comment is not None else cst.SimpleWhitespace("  ")
        return updated.with_changes(whitespace=whitespace, comment=comment)


def with_noqa(text: str, wanted: dict[int, set[str]]) -> tuple[str, int]:
    """``text`` with the codes of ``wanted`` (line → codes) suppressed where each line's
    statement ends; and the number of comments added or extended."""
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    ends = _Ends()
    wrapper.visit(ends)
    lines = sorted(ends.ends)
    edits: dict[int, set[str]] = {}
    for line, codes in wanted.items():
        end = next((e for e in lines if e >= line), None)
        if end is None:
            continue
        node = ends.ends[end]
        edits.setdefault(id(node), set()).update(codes)
    adder = _AddComments(edits)
    new = module.visit(adder)
    return new.code, adder.count
