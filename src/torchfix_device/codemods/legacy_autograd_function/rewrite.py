"""The libcst side of TFD017: a legacy Function class made new-style, and a call made
``apply``. What may be rewritten is decided on the stdlib ``ast``
(:mod:`torchfix_device.facts.legacy_functions`); these functions only carry it out."""

from __future__ import annotations

import libcst as cst

from torchfix_device.facts.legacy_functions import LegacyClass


def migrate_class(node: cst.ClassDef, legacy: LegacyClass) -> cst.ClassDef:
    """``forward`` and ``backward`` become static methods whose first parameter (and every
    read of it) is renamed as :attr:`LegacyClass.renames` says; an ``__init__`` that only
    called the base's is removed (nothing makes an instance any more)."""
    renames = {method: (old, new) for method, old, new in legacy.renames}
    body: list[cst.BaseStatement] = []
    lines_of_removed: list[cst.EmptyLine] | None = None
    for statement in node.body.body:
        if isinstance(statement, cst.FunctionDef):
            method = statement.name.value
            if method == "__init__" and legacy.drop_init:
                lines_of_removed = [line for line in statement.leading_lines if line.comment is None]
                continue
            if method in renames:
                statement = _static(statement, *renames[method])
        if lines_of_removed is not None and isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            own = list(statement.leading_lines)
            while own and own[0].comment is None:
                own.pop(0)  # the blank lines that parted it from the removed one
            statement = statement.with_changes(leading_lines=[*lines_of_removed, *own])
            lines_of_removed = None
        body.append(statement)
    return node.with_changes(body=node.body.with_changes(body=body))


def _static(method: cst.FunctionDef, old: str, new: str) -> cst.FunctionDef:
    decorated = method.with_changes(decorators=[cst.Decorator(decorator=cst.Name("staticmethod")), *method.decorators])
    if old == new:
        return decorated
    renamed = decorated.with_changes(params=decorated.params.visit(_Rename(old, new)), body=decorated.body.visit(_Rename(old, new)))
    assert isinstance(renamed, cst.FunctionDef)
    return renamed


class _Rename(cst.CSTTransformer):
    """Every name ``old`` becomes ``new`` (attribute names and keywords of calls are not names
    of variables: they stay). The analysis has made sure nothing binds ``old`` again inside."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=self.new) if updated_node.value == self.old else updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)


def apply_call(call: cst.Call) -> cst.Call:
    """``F()(args)`` → ``F.apply(args)`` (``call`` is the outer call)."""
    inner = call.func
    assert isinstance(inner, cst.Call)
    return call.with_changes(func=cst.Attribute(value=inner.func, attr=cst.Name("apply")))
