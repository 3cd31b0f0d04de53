"""What a syntax error means for a legacy file: Python 2, ``async`` as a name, or neither.

A file written for PyTorch 0.2–0.3 may not be Python 3 at all. The message for a file that
cannot be parsed names the line, and, when the tokens of that line show a Python 2 construct
(a ``print`` statement, ``except X, e:``, backticks, ``0777``, ``ur''``, ``<>``, ``exec "..."``,
``raise E, "msg"``, ``10L``, tuple parameters, tabs mixed with spaces), says so and what to do
first; when they show ``async`` used as a name (a reserved word since Python 3.7, PyTorch 0.3's
``async=`` keyword), says that. Anything else is the plain syntax error. Free of libcst.

Another file of the run is read as it means, not only as it is written (:func:`python_tree`):
where CPython cannot parse it, every token fix of TFD020 (print statements) and TFD016
(``async=``) is made on a copy first, safe or not, so that what it imports, defines and calls
is known to the facts of the files that import it. The file itself is rewritten only by its
own run, with the fixes the options allow.
"""

from __future__ import annotations

import ast
import io
import tokenize
import warnings

from torchfix_device.syntax import async_arguments, print_statements
from torchfix_device.syntax.token_fixes import apply_fixes, outside_brackets, tokens

CONVERT = "convert it to Python 3 first, e.g. with 2to3 or python-modernize, then run torchfix-device again"
_BY_MESSAGE = (
    ("Missing parentheses in call to 'print'", "print statement"),
    ("Missing parentheses in call to 'exec'", "exec statement"),
    ("multiple exception types must be parenthesized", "`except X, e:`"),
    ("leading zeros in decimal integer literals", "octal literal without `0o`"),
    ("Function parameters cannot be parenthesized", "tuple parameter"),
    ("Lambda expression parameters cannot be parenthesized", "tuple parameter"),
    ("inconsistent use of tabs and spaces in indentation", "tabs and spaces mixed in the indentation"),
)
TABS = _BY_MESSAGE[-1][1]


def describe(text: str, line: int, column: int, message: str, hint: str = "") -> str:
    """``line L:C: syntax error: ...`` for CPython's ``message`` at ``line``:``column`` of
    ``text``; ``hint``: why a fix that would have helped was not made."""
    construct = python2_construct(text, line, message)
    if construct == TABS:
        text_out = (
            f"looks like Python 2 ({construct} at line {line}; Python 2 counted a tab as 8 spaces): indent "
            f"with spaces only (e.g. `expand -i -t 8`), then run torchfix-device again (Python 3 says: {message})"
        )
    elif construct is not None:
        text_out = f"looks like Python 2 ({construct} at line {line}): {CONVERT} (Python 3 says: {message})"
    elif _async_as_name(text, line):
        if _async_use(text, line) == "argument":
            text_out = (
                f"`async=` at line {line}: `async` is a reserved word since Python 3.7 (PyTorch 0.4 renamed "
                "the argument `non_blocking=`): rename it, then run torchfix-device again"
            )
        else:
            text_out = (
                f"`async` used as a name at line {line}, a reserved word since Python 3.7: rename it, "
                "then run torchfix-device again"
            )
    else:
        text_out = message
    return f"line {line}:{column}: syntax error: {text_out}" + (f" ({hint})" if hint else "")


def _line_tokens(text: str, line: int) -> list[tokenize.TokenInfo]:
    return [t for t in tokens(text) if t.start[0] == line and t.type not in (tokenize.NL, tokenize.COMMENT)]


def python2_construct(text: str, line: int, message: str) -> str | None:
    """The Python 2 construct the tokens of ``line`` show (``print statement``), or None."""
    for start, construct in _BY_MESSAGE:
        if message.startswith(start):
            return construct
    on_line = [t for t in _line_tokens(text, line) if t.type not in (tokenize.INDENT, tokenize.DEDENT)]
    if not on_line:
        return None
    first = on_line[0]
    if first.type == tokenize.NAME and first.string in ("print", "exec") and len(on_line) > 1:
        following = on_line[1]
        if following.type in (tokenize.STRING, tokenize.NAME, tokenize.NUMBER):
            return f"{first.string} statement"
    if first.type == tokenize.NAME and first.string == "raise" and _top_level_comma(on_line[1:]):
        return "`raise E, value`"
    for before, after in zip(on_line, on_line[1:]):
        adjacent = before.end == after.start
        if after.type == tokenize.ERRORTOKEN and after.string == "`":
            return "backtick repr"
        if adjacent and before.type == tokenize.NAME and before.string.lower() == "ur" and after.type == tokenize.STRING:
            return "`ur''` string"
        if adjacent and before.string == "<" and after.string == ">":
            return "`<>` operator"
        if adjacent and before.type == tokenize.NUMBER and after.type == tokenize.NAME and after.string in ("l", "L"):
            return "long integer literal"
    return None


def _top_level_comma(line_tokens: list[tokenize.TokenInfo]) -> bool:
    return next(outside_brackets(line_tokens, (",",)), None) is not None


def _async_names(text: str, line: int) -> list[tuple[tokenize.TokenInfo, tokenize.TokenInfo | None]]:
    """The ``async`` tokens of ``line`` that are not ``async def/for/with``, each with the token
    after it."""
    on_line = _line_tokens(text, line)
    found = []
    for i, token in enumerate(on_line):
        if token.type == tokenize.NAME and token.string == "async":
            after = on_line[i + 1] if i + 1 < len(on_line) else None
            if after is None or after.string not in ("def", "for", "with"):
                found.append((token, after))
    return found


def _async_as_name(text: str, line: int) -> bool:
    return bool(_async_names(text, line))


def _async_use(text: str, line: int) -> str:
    after = _async_names(text, line)[0][1]
    return "argument" if after is not None and after.string == "=" else "name"


def readable(text: str) -> str | None:
    """``text`` with every print statement and ``async=`` argument fixed (the token fixes of
    TFD020 and TFD016, safe or not); None where there is none or they do not fit together.
    A fix never adds or removes a line, so every line keeps its number."""
    found = [*print_statements.fixes(text), *async_arguments.fixes(text)]
    if not found:
        return None
    try:
        return apply_fixes(text, found)
    except ValueError:
        return None


def python_tree(source: str | bytes) -> ast.Module | None:
    """CPython's tree of a file's code (bytes: decoded as CPython would, coding cookie and BOM
    included); for a file CPython cannot parse, the tree of :func:`readable`'s copy; None where
    neither parses."""
    try:
        return _parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    if isinstance(source, bytes):
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
            source = source.decode(encoding)
        except (SyntaxError, LookupError, UnicodeDecodeError):
            return None
        source = source.removeprefix("\ufeff")
    fixed = readable(source)
    if fixed is None:
        return None
    try:
        return _parse(fixed)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _parse(source: str | bytes) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)
