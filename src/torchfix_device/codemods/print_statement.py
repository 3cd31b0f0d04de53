from typing import Iterator

from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import print_statements
from torchfix_device.syntax.token_fixes import TokenFix


class PrintStatement(Codemod):
    """
    ## What it does
    Turns the Python 2 print statements of a file Python 3 cannot parse into calls of the print
    function: `print x` → `print(x)`, `print a, b` → `print(a, b)`, a bare `print` → `print()`,
    `print x,` (no newline) → `print(x, end=" ")`, `print >>f, x` →
    `print(x, file=f)`. The file is then migrated as usual.

    Legacy PyTorch code of the 0.2–0.3 era was often written for Python 2, and a single print
    statement makes the whole file a syntax error on Python 3: nothing in it can be migrated.
    Like TFD016, this fix is made on the file's tokens (the stdlib `tokenize`) before it is
    parsed, only on a file CPython cannot parse: the word `print` gains its parenthesis and the
    last token of the statement its closing one; every other character stays as it was.

    ## Why is this bad?
    `print x` is a syntax error since Python 3.0 (`SyntaxError: Missing parentheses in call to
    'print'`), and the tool, which reads Python 3, refuses the file.

    ## Example
    ```python
    print netG
    print 'iteration', it, 'loss', loss.data[0]
    ```

    ## Use instead
    ```python
    print(netG)
    print('iteration', it, 'loss', loss.item())
    ```

    ## Not rewritten
    `print (x)` and `print (a, b)` (a call in Python 3 too: left as they are, though Python 2
    printed the tuple `(a, b)` where Python 3 prints two values); `print >>f, x` with a line break
    before its first comma; any print statement of a file that parses as Python 3 (`print >>f, x`
    alone does: the file is never given to the token pass). Python 2 that is not syntax
    (`xrange`, `dict.iteritems()`, `gen.next()`, integer `/`) is for `2to3` (Python ≤ 3.12) or
    `pyupgrade`. A file that still does not parse after the fix (`exec code`, backticks,
    `except E, e:`) is refused as before, naming the line.

    ## Fix safety
    Safe: `print(a, b)` writes what `print a, b` wrote, a space between the values and a newline.
    `print x,` becomes `print(x, end=" ")`, unsafe: Python 2 wrote that space only before what
    came next on the line (its "soft space"), so the last character of a line may differ.
    `print (a), b` becomes `print((a), b)`, unsafe: it is a Python 2 statement in a Python 2
    file, but the same line in a Python 3 file that fails to parse elsewhere prints only `a`.
    """

    code = "TFD020"
    name = "print-statement"
    summary = "`print x` is Python 2 syntax that makes the whole file unreadable: use `print(x)`"
    safe = True
    triggers = ("print",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        return False  # in code CPython parses there is nothing to fix

    @classmethod
    def token_fixes(cls, text: str) -> Iterator[TokenFix]:
        """A fix of ``print`` and one of the statement's last token, per print statement."""
        return print_statements.fixes(text)
