"""The shape of a CUDA guard and of the moves it holds (TFD001): ``if t.is_cuda: v = v.cuda()``,
``if args.cuda: model.cuda()``, ``x.cuda() if use_cuda else x``. Plain functions of the syntax;
what the names are is the codemod's question."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal


def guard_kind(test: cst.BaseExpression) -> str | None:
    """``tensor`` for ``t.is_cuda``, ``flag`` for a user flag such as ``args.cuda``/``use_gpu``."""
    dotted = nodes.dotted_name(test)
    if dotted is None:
        return None
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda":
        return "tensor"
    return "flag" if any(w in dotted.lower() for w in ("cuda", "gpu")) else None


def rebinds(body: cst.CSTNode, tensor: cst.BaseExpression) -> bool:
    """``body`` assigns to ``tensor`` (or to a name it is read through), other than by
    ``t = t.cuda()``, which keeps the device ``t.is_cuda`` tested."""
    name = nodes.dotted_name(tensor)
    if name is None:
        return True
    for n in traversal.walk(body):
        targets: list[cst.BaseExpression] = []
        if isinstance(n, cst.Assign):
            targets = [t.target for t in n.targets]
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign)):
            targets = [n.target]
        for target in targets:
            for t in (target.elements if isinstance(target, (cst.Tuple, cst.List)) else [target]):
                bound = nodes.dotted_name(t.value if isinstance(t, cst.BaseElement) else t)
                if bound is None or not (name == bound or name.startswith(bound + ".")):
                    continue
                if isinstance(n, cst.Assign) and len(targets) == 1 and moves_onto(target, n.value) \
                        and m.matches(n.value, m.Call(func=m.Attribute(attr=m.Name("cuda")), args=[])):
                    continue
                return True
    return False


def is_move_call(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and m.matches(node.func, m.Attribute(attr=m.Name("cuda") | m.Name("to")))


def moved_value(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The receiver of ``r.cuda()``/``r.to(...)`` when it is a plain name or attribute chain."""
    if not is_move_call(node):
        return None
    receiver = cst.ensure_type(cst.ensure_type(node, cst.Call).func, cst.Attribute).value
    return receiver if nodes.dotted_name(receiver) is not None else None


def moves_onto(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """``x = x.cuda()``: the value moved is the one assigned to."""
    moved = moved_value(value)
    return moved is not None and nodes.dotted_name(moved) == nodes.dotted_name(target)


def contains_move(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Call) and is_move_call(n) for n in traversal.walk(node))


def small_statements(body: cst.BaseSuite) -> list[cst.BaseSmallStatement] | None:
    if isinstance(body, cst.SimpleStatementSuite):
        return list(body.body)
    statements: list[cst.BaseSmallStatement] = []
    for stmt in cst.ensure_type(body, cst.IndentedBlock).body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return None
        statements.extend(stmt.body)
    return statements


def header_comment(node: cst.If) -> cst.EmptyLine | None:
    """A comment on the ``if ...:`` line, kept as a comment line above the unguarded body."""
    body = node.body
    if not isinstance(body, cst.IndentedBlock) or body.header.comment is None:
        return None  # a one-line ``if c: stmt  # comment`` keeps its comment on the statement
    return cst.EmptyLine(comment=body.header.comment)

