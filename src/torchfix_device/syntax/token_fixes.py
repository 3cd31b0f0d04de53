"""Fixes made on tokens, before parsing: for code that Python 3 cannot parse at all.

A legacy idiom that makes a whole file a syntax error on Python 3 (PyTorch 0.3's
``.cuda(async=True)``: ``async`` is a reserved word since Python 3.7) cannot be rewritten by a
libcst transform, since neither libcst nor CPython can read the file. A codemod for such an
idiom states its fix as :class:`TokenFix` edits of single tokens, found with the stdlib
:mod:`tokenize` (which reads such files: tokenizing is not parsing); the engine applies them to
a file CPython cannot parse, before parsing it, and every other character of the file stays as
it was (encoding, BOM, line endings, tabs and comments included).

Free of libcst: plain data and text edits.
"""

from __future__ import annotations

import io
import tokenize
from bisect import bisect_left
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence


@dataclass(frozen=True)
class TokenFix:
    """Replace the token ``old`` that starts at ``line``:``column`` (1-based, in characters)
    by ``new``; ``message`` is the finding reported there."""

    line: int
    column: int
    old: str
    new: str
    message: str
    safe: bool = True
    """False: applied only with ``--unsafe-fixes`` (the evidence that it keeps meaning is weaker)."""
    follows: bool = False
    """True: the second half of the fix before it (of the same codemod), made exactly when that one
    is made and reported by its finding (``print x`` → ``print(x)``: the closing parenthesis)."""


def tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of ``text`` up to the first place :mod:`tokenize` cannot go past (an unclosed
    bracket at the end of the file, an indentation it cannot match): what it read until then."""
    found: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            found.append(token)
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
        pass
    return found



def outside_brackets(found: Sequence[tokenize.TokenInfo], strings: tuple[str, ...]) -> Iterator[int]:
    """The indexes of the operators of ``found`` spelt one of ``strings`` outside brackets (a
    closing bracket: where it closes the outermost one), in order."""
    depth = 0
    for index, token in enumerate(found):
        if token.type != tokenize.OP:
            continue
        if token.string in ("(", "[", "{"):
            depth += 1
            continue
        if token.string in (")", "]", "}"):
            depth -= 1
        if depth == 0 and token.string in strings:
            yield index

def _lines(text: str) -> list[str]:
    """The lines as :func:`tokens` numbers them (ended by ``\\n`` only, endings kept)."""
    return io.StringIO(text).readlines()


def apply_fixes(text: str, fixes: Iterable[TokenFix]) -> str:
    """``text`` with each fix's token replaced; nothing else changes."""
    lines = _lines(text)
    for fix in sorted(fixes, key=lambda f: (f.line, f.column), reverse=True):
        line = lines[fix.line - 1]
        start = fix.column - 1
        if line[start:start + len(fix.old)] != fix.old:
            raise ValueError(f"line {fix.line}:{fix.column}: expected {fix.old!r}, found {line[start:start + len(fix.old)]!r}")
        lines[fix.line - 1] = line[:start] + fix.new + line[start + len(fix.old):]
    return "".join(lines)


class ColumnMap:
    """Positions in the fixed text → positions in the text as it was. Fixes never add or
    remove a line, so only columns on a line holding a fix move."""

    def __init__(self, fixes: Sequence[TokenFix]) -> None:
        self._shifts: dict[int, tuple[list[int], list[int]]] = {}
        """Line → (the fixed text's columns just after each fixed token, the total shift there)."""
        by_line: dict[int, list[TokenFix]] = {}
        for fix in fixes:
            by_line.setdefault(fix.line, []).append(fix)
        for line, on_line in by_line.items():
            ends, totals, shift = [], [], 0
            for fix in sorted(on_line, key=lambda f: f.column):
                shift += len(fix.new) - len(fix.old)
                ends.append(fix.column + len(fix.old) + shift)
                totals.append(shift)
            self._shifts[line] = (ends, totals)

    def original_column(self, line: int, column: int) -> int:
        """The column (1-based) in the original text of ``line``:``column`` of the fixed text."""
        if line not in self._shifts:
            return column
        ends, totals = self._shifts[line]
        passed = bisect_left(ends, column + 1)  # fixed tokens ending at or before ``column``
        return column - (totals[passed - 1] if passed else 0)
