"""The lines of a rewrite that the codemods did not touch: taken from the file byte for byte,
and the places of the fixes made on them after an earlier fix rewrote the tree."""

from __future__ import annotations

import dataclasses
import difflib

from torchfix_device.finding import Finding
from torchfix_device.results import InternalError


def _lines(text: str) -> list[str]:
    """Lines ended by ``\\n`` only (``\\r\\n`` stays inside a line)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def keep_untouched_lines(text: str, rendered: str, new: str) -> str:
    """``new`` with every line the codemods did not touch taken from ``text`` byte for byte.

    libcst does not render every file exactly as read: a form feed that starts a line of code
    (``\\x0cx = 1``, a page break) is dropped (cf. Instagram/LibCST#446). The rewrite must not
    carry such losses into lines it never meant to change, let alone change a file that has
    nothing to fix.
    """
    text_lines, rendered_lines, new_lines = _lines(text), _lines(rendered), _lines(new)
    if len(text_lines) != len(rendered_lines):
        raise InternalError(
            "libcst cannot reproduce this file byte for byte (its lines come out differently); "
            "file left unchanged — please report this bug"
        )
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, rendered_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out.extend(text_lines[i1:i2] if tag == "equal" else new_lines[j1:j2])
    return "".join(out)


def unchanged_lines(text: str, new: str) -> dict[int, int]:
    """For each line of ``new`` that is a line of ``text`` left as it was (a rewrite's untouched
    line): its number in ``new`` → its number in ``text`` (both from 1)."""
    return _unchanged(_lines(text), _lines(new))


def _unchanged(text_lines: list[str], new_lines: list[str]) -> dict[int, int]:
    matcher = difflib.SequenceMatcher(None, text_lines, new_lines, autojunk=False)
    return {
        j + 1 + k: i + 1 + k
        for tag, i, _, j, j2 in matcher.get_opcodes() if tag == "equal"
        for k in range(j2 - j)
    }


class LateFixes:
    """Fixes a codemod made on a tree that earlier fixes had rewritten, at their places in the
    original ``text``: a fix the original did not allow may become possible there (a tensor
    attribute registered as a buffer gives a factory of another method its device). The run on
    the original listed such a place for review, or not at all; the output has the fix, so the
    finding says so. A fix on a line an earlier fix changed or inserted has no place in ``text``
    and is not listed (nor was it before).

    Most such fixes are ones the run on the original listed already (every codemod after the
    first that changes a file runs on a rewrite): a fix whose codemod, column and line text are
    those of a listed fix (``listed``, the run's findings so far; ``gone``, its resolved items)
    needs no place, and the lines are compared (a diff: seconds on a 20,000-line file) only for
    the others."""

    def __init__(self, text: str, listed: set[Finding], gone: set[tuple[str, int, int]]) -> None:
        self._text_lines = _lines(text)
        self._listed, self._gone = listed, gone
        self.fixes: dict[tuple[str, int, int], Finding] = {}
        self.resolved: set[tuple[str, int, int]] = set()

    def keep(self, fixes: list[Finding], resolved: list[tuple[str, int, int]], code: str) -> None:
        """The ``fixes`` (and review items ``resolved``) of one transform of ``code``."""
        if not (fixes or resolved):
            return
        lines = _lines(code)
        fixed = {self._place(f.code, f.line, f.column, self._text_lines) for f in self._listed if f.fixed}
        gone = {self._place(*item, self._text_lines) for item in self._gone}
        fixes = [f for f in fixes if self._place(f.code, f.line, f.column, lines) not in fixed]
        resolved = [item for item in resolved if self._place(*item, lines) not in gone]
        if not (fixes or resolved):
            return
        where = _unchanged(self._text_lines, lines)  # the file is split into lines once
        for fix in fixes:
            if fix.line in where:
                self.fixes.setdefault((fix.code, where[fix.line], fix.column), dataclasses.replace(fix, line=where[fix.line]))
        self.resolved.update((code_, where[line], column) for code_, line, column in resolved if line in where)

    @staticmethod
    def _place(code: str, line: int, column: int, lines: list[str]) -> tuple[str, int, str | None]:
        return code, column, lines[line - 1] if 0 < line <= len(lines) else None

    def merged(self, findings: set[Finding]) -> set[Finding]:
        """``findings`` of the run on the original with each late fix in place of what that run
        listed at the fix's place (a review item, a held-back fix), unless it listed a fix."""
        if not self.fixes:
            return findings
        listed = {(f.code, f.line, f.column): f for f in findings}
        out = set(findings)
        for key, fix in self.fixes.items():
            known = listed.get(key)
            if known is None or not known.fixed:
                out.discard(known)  # type: ignore[arg-type]
                out.add(fix)
        return out
