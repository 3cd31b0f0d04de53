"""Which statements inside a statement hold a site, for a codemod whose hooks need nothing but
its sites' statements (:attr:`~torchfix_device.codemods.base.Codemod.skips_within_statements`).

Stage 1 already tells which top-level statements (and class members) hold a site; the engine
skips the others. In a long function or a ``if __name__ == "__main__":`` block holding one
``.cuda()``, every other statement of it is still visited by such a codemod, node by node. Here
stage 1's ``ast`` gives, for a statement holding a site, the same answer for the statements of
each of its blocks, down to the simple statements: an :data:`Outline`.

A statement holds a site where some line of a site node (from its first line to its last: a
site that is a whole function covers every statement in it) is a line of the statement (from
its first decorator). The engine matches an outline's blocks with libcst's
(:func:`torchfix_device.engine.statements.statements_within_without_sites`) and skips nothing
in a block whose statements the two parsers count differently.
"""

from __future__ import annotations

import ast
from typing import Iterable, Union

Outline = tuple[tuple["Entry", ...], ...]
"""The blocks of a compound statement (``body``, then ``orelse``; a ``try``'s handlers between
its body and its ``else``), each a tuple with an :data:`Entry` per ``ast`` statement."""
Entry = Union[bool, Outline]
"""False: no site in the statement; True: a site, visit all of it; an :data:`Outline`: a site
in some of the statements of its blocks."""


def outline(statement: ast.stmt, sites: Iterable[tuple[int, int]]) -> Entry:
    """Where the sites (first and last line of each) within ``statement`` are."""
    first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
    last = statement.end_lineno or statement.lineno
    inside = [(a, b) for a, b in sites if a <= last and b >= first]
    if not inside:
        return False
    blocks = _blocks(statement)
    if blocks is None or any(a <= first and b >= last for a, b in inside):
        return True  # a statement with no blocks of its own, or a site covering it all
    return tuple(tuple(outline(child, inside) for child in block) for block in blocks)


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]] | None:
    """The blocks of ``statement``, in the order libcst gives them; None for a simple statement
    or one whose blocks are not matched (``match``)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.AsyncWith)):
        return [statement.body]
    if isinstance(statement, (ast.For, ast.AsyncFor, ast.While, ast.If)):
        return [statement.body, *([statement.orelse] if statement.orelse else [])]
    if isinstance(statement, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return [
            statement.body, *(h.body for h in statement.handlers),
            *([statement.orelse] if statement.orelse else []), *([statement.finalbody] if statement.finalbody else []),
        ]
    return None
