import keyword
import tokenize
from typing import Iterator

from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.codemods.base import Codemod
from torchfix_device.syntax.token_fixes import TokenFix, tokens

TORCH_COPY_METHODS = frozenset({"cuda", "to", "type", "copy_"})
"""Tensor (and Variable) methods whose copy flag PyTorch 0.3 called ``async`` and 0.4 renamed
``non_blocking`` (same meaning; ``to`` came with 0.4 and took either for a while)."""
_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)


class AsyncKeywordArgument(Codemod):
    """
    ## What it does
    Renames the keyword argument `async=` of a call to `non_blocking=`:
    `x.cuda(async=True)`, `x.cuda(device=0, async=True)`, `x.to(device, async=True)`,
    `x.type(t, async=True)`, `x.copy_(src, async=True)`. The file is then migrated as usual (the
    `.cuda(non_blocking=True)` becomes `.to(device, non_blocking=True)`, and so on).

    Such a file cannot be parsed by Python 3 at all, so this fix is made on the file's tokens
    (the stdlib `tokenize`) before it is parsed: only the word `async` changes, every other
    character of the file (encoding, BOM, line endings, tabs, comments) stays as it was. It runs
    only on a file CPython cannot parse, and only on an `async` that is a keyword argument
    directly in the argument list of a call.

    ## Why is this bad?
    `async` is a reserved word since Python 3.7. One `.cuda(async=True)` makes the whole file a
    syntax error (`SyntaxError: invalid syntax`): nothing in it runs, and no tool that parses
    Python 3 can migrate anything else in it. PyTorch 0.4 renamed the argument `non_blocking`.

    ## Example
    ```python
    for inputs, targets in loader:
        inputs, targets = inputs.cuda(), targets.cuda(async=True)
    ```

    ## Use instead
    ```python
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device, non_blocking=True)
    ```

    ## Not rewritten
    `async` anywhere else: in a string or a comment, `async def`/`async with`/`async for` in
    valid code (a file that parses is never touched), a parameter `def cuda(self, async=False)`,
    an assignment `async = True`, an attribute `opts.async`, a `lambda async=...:` parameter, a
    class keyword `class C(Base, async=True)`. A file that still does not parse after the fix
    (another `async` of those, or Python 2 syntax) is refused as before, with a message naming the
    line and what to do. A `# noqa: TFD016` on the line keeps its `async=`, so that file too is
    refused.

    ## Fix safety
    Safe on calls of the tensor methods `.cuda`, `.to`, `.type` and `.copy_`, where `async` and
    `non_blocking` are the same flag (the copy may overlap with computation; values are the same).
    Unsafe on any other call (`send(msg, async=True)`, `pool.apply(f, async=True)`): whether that
    function takes `non_blocking` is not known, so the rename waits for `--unsafe-fixes` and the
    file stays refused until then. A project class of its own with `def cuda(self, async=False)`
    is itself a syntax error: rename its parameter to `non_blocking` by hand.
    """

    code = "TFD016"
    name = "async-keyword-argument"
    summary = "`.cuda(async=True)` is a syntax error since Python 3.7: use `non_blocking=`"
    safe = True
    triggers = ("async",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """Never in a file CPython parses: there, no call passes ``async=`` (a syntax error since
        Python 3.7). The fix is made before parsing (:meth:`token_fixes`)."""
        return False

    @classmethod
    def token_fixes(cls, text: str) -> Iterator[TokenFix]:
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
