"""Python 2 print statements as token fixes: ``print x`` → ``print(x)``, ``print >>f, x`` →
``print(x, file=f)``, found with the stdlib :mod:`tokenize` in a file CPython cannot parse.

TFD020 (:mod:`torchfix_device.codemods.print_statement`) reports and makes them; the run-level
facts read a Python 2 file through them (:func:`torchfix_device.syntax.legacy.readable`). Free of
libcst.
"""

from __future__ import annotations

import tokenize
from typing import Iterator

from torchfix_device.syntax.token_fixes import TokenFix, outside_brackets, tokens

_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
_NOT_A_STATEMENT = frozenset({"(", "=", ".", ",", ")", "[", "]", ":", ">>", "+=", "-=", "*=", "/=", "%=", "**=", "//="})
"""What may follow the name ``print`` when it is not a Python 2 print statement: a call (or a
parenthesised tuple, left alone), an assignment, an attribute, an argument, a slice."""


def fixes(text: str) -> Iterator[TokenFix]:
    """A fix of ``print`` and one of the statement's last token, per print statement."""
    if "print" not in text:
        return
    statement: list[tokenize.TokenInfo] = []
    for token in tokens(text):
        if token.type in _SKIPPED:
            continue
        if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            yield from _fixes(statement)
            statement = []
        else:
            statement.append(token)


def _fixes(statement: list[tokenize.TokenInfo]) -> Iterator[TokenFix]:
    for start in _statement_starts(statement):
        first = statement[start]
        if not (first.type == tokenize.NAME and first.string == "print"):
            continue
        end = _statement_end(statement, start)
        rest = statement[start + 1:end]
        line, column = first.start
        if not rest:
            yield TokenFix(line, column + 1, "print", "print()", "`print` is a Python 2 statement: use `print()`")
            continue
        if rest[0].type == tokenize.OP and rest[0].string == ">>":
            yield from _print_to_file(first, rest)
            continue
        parenthesised = rest[0].type == tokenize.OP and rest[0].string == "("
        if parenthesised and _closing(rest) == len(rest) - 1:
            continue  # `print (x)`: a call in Python 3 too
        if not parenthesised and rest[0].type == tokenize.OP and rest[0].string in _NOT_A_STATEMENT:
            continue
        last = rest[-1]
        trailing = last.type == tokenize.OP and last.string == ","
        safe = not trailing and not parenthesised
        message = f"`print {_shown(rest)}` is a Python 2 statement: use `print({_shown(rest)})`"
        if trailing:
            message = f"`print {_shown(rest)}` is a Python 2 statement: use `print({_shown(rest[:-1])}, end=\" \")`"
        gap = _gap(first, rest[0])
        yield TokenFix(line, column + 1, "print" + gap, "print(", message, safe=safe)
        new = ', end=" ")' if trailing else f"{last.string})"
        yield TokenFix(last.start[0], last.start[1] + 1, last.string, new, "", safe=safe, follows=True)


def _print_to_file(first: tokenize.TokenInfo, rest: list[tokenize.TokenInfo]) -> Iterator[TokenFix]:
    """``print >>f, a, b`` → ``print(a, b, file=f)`` when ``print >>f,`` is on one line."""
    comma = _top_level_comma(rest)
    target = rest[1:comma]
    if not target or any(t.start[0] != first.start[0] or t.end[0] != first.start[0] for t in rest[:comma + 1]):
        return
    line, column = first.start
    stream = first.line[target[0].start[1]:target[-1].end[1]]
    if comma == len(rest):  # `print >>f`: a newline
        old = first.line[column:target[-1].end[1]]
        yield TokenFix(line, column + 1, old, f"print(file={stream})", f"`{old}` is a Python 2 statement: use `print(file={stream})`")
        return
    values = rest[comma + 1:]
    if not values:
        return  # `print >>f,`: nothing to print and no newline, a no-op Python 3 has no call for
    last = values[-1]
    trailing = last.type == tokenize.OP and last.string == ","
    old = first.line[column:values[0].start[1]] if values[0].start[0] == line else first.line[column:rest[comma].end[1]]
    shown = _shown(values[:-1] if trailing else values)
    end = ', end=" "' if trailing else ""
    message = f"`print >>{stream}, ...` is a Python 2 statement: use `print({shown}{end}, file={stream})`"
    yield TokenFix(line, column + 1, old, "print(", message, safe=not trailing)
    new = f', end=" ", file={stream})' if trailing else f"{last.string}, file={stream})"
    yield TokenFix(last.start[0], last.start[1] + 1, last.string, new, "", safe=not trailing, follows=True)


def _top_level_comma(rest: list[tokenize.TokenInfo]) -> int:
    """The index of the first ``,`` outside brackets, or ``len(rest)``."""
    return next(outside_brackets(rest, (",",)), len(rest))


def _closing(rest: list[tokenize.TokenInfo]) -> int:
    """The index of the bracket that closes ``rest[0]``."""
    return next(outside_brackets(rest, (")", "]", "}")), len(rest))


def _gap(first: tokenize.TokenInfo, second: tokenize.TokenInfo) -> str:
    """The blanks between ``print`` and what it prints, when both are on one line (they go:
    ``print  x`` → ``print(x)``); else none."""
    if first.end[0] != second.start[0]:
        return ""
    return first.line[first.end[1]:second.start[1]]


def _statement_starts(statement: list[tokenize.TokenInfo]) -> Iterator[int]:
    """Where each simple statement of a logical line starts: its first token, and the token
    after each ``;`` or compound-statement ``:`` at bracket depth 0 (``if x: print y``)."""
    if not statement:
        return
    yield 0
    for index in outside_brackets(statement[:-1], (";", ":")):
        if not _in_lambda(statement, index):
            yield index + 1


def _in_lambda(statement: list[tokenize.TokenInfo], index: int) -> bool:
    return any(t.type == tokenize.NAME and t.string == "lambda" for t in statement[:index])


def _statement_end(statement: list[tokenize.TokenInfo], start: int) -> int:
    """The index just past the last token of the simple statement starting at ``start``."""
    return next((start + i for i in outside_brackets(statement[start:], (";",))), len(statement))


def _shown(rest: list[tokenize.TokenInfo], limit: int = 40) -> str:
    text = " ".join(t.string for t in rest)
    return text if len(text) <= limit else text[: limit - 3] + "..."
