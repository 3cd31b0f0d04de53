from typing import Iterator

from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.codemods.base import Codemod
from torchfix_device.syntax import async_arguments
from torchfix_device.syntax.token_fixes import TokenFix


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
        return async_arguments.fixes(text)
