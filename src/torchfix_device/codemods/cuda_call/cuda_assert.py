"""TFD001's ``assert torch.cuda.is_available()``: a program that asks for a GPU in so many words.

Once the program's moves take a device that may be the CPU, that line is what still stops it on
a machine without CUDA, before anything has run. It goes as an unsafe fix: it states that the
program needs a GPU, which only its author can take back (a program may need one for reasons
the moves do not show: its speed, a CUDA kernel of another file). It stays, reported, where the
file imports a CUDA-only library (cupy, pycuda, pynvrtc, numba's ``cuda``: the program does need
a GPU), and where removing the line would take a comment with it or empty its block.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.codemods.cuda_call.cuda_only import cuda_only_library
from torchfix_device.facts import values as facts_values
from torchfix_device.syntax import nodes

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod

IS_AVAILABLE = frozenset({"is_available"})


def asks_cuda_available(codemod: "Codemod", expr: cst.BaseExpression) -> bool:
    """``expr`` is ``torch.cuda.is_available()``, however it was imported (``from torch.cuda
    import is_available`` too)."""
    if not (isinstance(expr, cst.Call) and not expr.args):
        return False
    name = (nodes.dotted_name(expr.func) or "").rpartition(".")[2]
    return name == "is_available" and "torch.cuda.is_available" in codemod.qualified_names(expr.func, ending_in=IS_AVAILABLE)


def may_ask_cuda_available(test: ast.expr) -> bool:
    """Stage 1's form of :func:`asks_cuda_available` on the stdlib ``ast``: ``<...>.is_available()``
    or ``is_available()`` with no argument."""
    if type(test) is not ast.Call or test.args or test.keywords:
        return False
    func = test.func
    return (func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None) == "is_available"


def asserted_line(codemod: "Codemod", line: cst.SimpleStatementLine) -> cst.Assert | None:
    """The ``assert torch.cuda.is_available()`` (with a message or not) that is ``line``'s one
    statement; None otherwise."""
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assert):
        return None
    return line.body[0] if asks_cuda_available(codemod, line.body[0].test) else None


def leave_line(
    codemod: "Codemod", original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
) -> cst.SimpleStatementLine | cst.RemovalSentinel:
    if asserted_line(codemod, original) is None:
        return updated
    values = facts_values.of(codemod)
    if "cuda-only library" not in values.facets:  # one walk of the file for all its asserts
        values.facets["cuda-only library"] = cuda_only_library(values.module)
    library = values.facets["cuda-only library"]
    if library is not None:
        why = f"the file imports `{library}`, a CUDA-only library: the program needs a GPU (left as it is)"
        codemod.report(original, f"`assert torch.cuda.is_available()`: {why}", fixable=False)
        return updated
    message = (
        "`assert torch.cuda.is_available()` stops the program on a machine without CUDA, where"
        " device-agnostic code runs on the CPU"
    )
    block = values.parent(original)
    commented = nodes.has_comment(original)
    if commented or (isinstance(block, cst.IndentedBlock) and len(block.body) == 1):
        where = "a comment goes with it" if commented else "it is the only statement of its block"
        codemod.report(original, f"{message}: remove it by hand ({where})", fixable=False)
        return updated
    unsafe = "unsafe: it says the program needs a GPU, which only its author can take back"
    if codemod.report(original, f"{message}: remove it ({unsafe})", safe=False):
        return cst.RemoveFromParent()
    return updated
