"""PyTorch 0.3's ``async=`` keyword argument as token fixes: ``x.cuda(async=True)`` →
``x.cuda(non_blocking=True)``, found with the stdlib :mod:`tokenize` in a file CPython cannot
parse (``async`` is a reserved word since Python 3.7).

TFD016 (:mod:`torchfix_device.codemods.async_keyword_argument`) reports and makes them; the
run-level facts read such a file through them (:func:`torchfix_device.syntax.legacy.readable`).
Free of libcst.
"""

from __future__ import annotations

import keyword
import tokenize
from typing import Iterator

from torchfix_device.syntax.token_fixes import TokenFix, tokens

TORCH_COPY_METHODS = frozenset({"cuda", "to", "type", "copy_"})
"""Tensor (and Variable) methods whose copy flag PyTorch 0.3 called ``async`` and 0.4 renamed
``non_blocking`` (same meaning; ``to`` came with 0.4 and took either for a while)."""
_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)


def fixes(text: str) -> Iterator[TokenFix]:
    """Every ``async`` NAME token directly followed by ``=`` in the argument list of a call."""
    if "async" not in text:
        return
    significant = [t for t in tokens(text) if t.type not in _SKIPPED]
    frames: list[list] = []  # per open bracket: [a call's argument list, a lambda open in it, the called name]
    for i, token in enumerate(significant):
        previous = significant[i - 1] if i else None
        if token.type == tokenize.OP and token.string in "([{":
            callee = _callee(significant, i) if token.string == "(" else None
            frames.append([callee is not None, False, callee])
        elif token.type == tokenize.OP and token.string in ")]}":
            if frames:
                frames.pop()
        elif token.type == tokenize.NEWLINE:
            frames.clear()
        elif frames and token.type == tokenize.NAME and token.string == "lambda":
            frames[-1][1] = True
        elif frames and token.type == tokenize.OP and token.string == ":":
            frames[-1][1] = False
        elif (
            token.type == tokenize.NAME
            and token.string == "async"
            and frames
            and frames[-1][0]
            and not frames[-1][1]
            and previous is not None
            and previous.type == tokenize.OP
            and previous.string in ("(", ",")
            and i + 1 < len(significant)
            and significant[i + 1].type == tokenize.OP
            and significant[i + 1].string == "="
        ):
            yield _fix(token, frames[-1][2], _value(significant, i))


def _callee(significant: list[tokenize.TokenInfo], i: int) -> str | None:
    """For the ``(`` at ``significant[i]``: ``.name`` when it opens the arguments of a method
    call, ``name`` for a call of a plain name, ``()`` for a call of another call's or a
    subscription's result; None when it opens no call's arguments (a tuple, a parenthesised
    expression, the parameters of a ``def``, the bases of a ``class``)."""
    if i == 0:
        return None
    previous = significant[i - 1]
    if previous.type == tokenize.OP and previous.string in (")", "]"):
        return "()"
    if previous.type != tokenize.NAME or keyword.iskeyword(previous.string):
        return None
    before = significant[i - 2] if i >= 2 else None
    if before is not None and before.type == tokenize.NAME and before.string in ("def", "class"):
        return None
    if before is not None and before.type == tokenize.OP and before.string == ".":
        return "." + previous.string
    return previous.string


def _fix(token: tokenize.TokenInfo, callee: str, value: str) -> TokenFix:
    line, column = token.start
    reserved = "`async` is a reserved word since Python 3.7 (the whole file is a syntax error)"
    if callee.startswith(".") and callee[1:] in TORCH_COPY_METHODS:
        message = f"`{callee}(async={value})`: {reserved}: use `non_blocking={value}`"
        return TokenFix(line, column + 1, "async", "non_blocking", message)
    shown = f"`{callee}`" if callee != "()" else "the callee"
    message = (
        f"`async={value}`: {reserved}; {shown} is not a tensor's `.cuda`/`.to`/`.type`/`.copy_`: "
        "use `non_blocking=` only if it takes that name"
    )
    return TokenFix(line, column + 1, "async", "non_blocking", message, safe=False)


def _value(significant: list[tokenize.TokenInfo], i: int) -> str:
    """The argument's value when it is one token (``True``, ``1``), else ``...``."""
    if i + 3 < len(significant) and significant[i + 3].string in (",", ")"):
        if significant[i + 2].type in (tokenize.NAME, tokenize.NUMBER):
            return significant[i + 2].string
    return "..."
