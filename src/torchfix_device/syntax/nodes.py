"""The shapes of single libcst nodes: a call's arguments (find, add), a dotted name, a function's
parameters and decorators, ``None``, a node's code."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    """The ``name=...`` argument of ``call``, if any."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None

def positional_args(call: cst.Call) -> list[cst.Arg]:
    """Plain positional arguments (no keyword, no ``*``/``**``)."""
    return [a for a in call.args if a.keyword is None and a.star == ""]

def argument(call: cst.Call, position: int, keyword: str) -> cst.Arg | None:
    """The argument ``call`` passes a parameter at ``position`` named ``keyword``: by keyword or by position."""
    found = keyword_arg(call, keyword)
    positional = positional_args(call)
    return found if found is not None else positional[position] if position < len(positional) else None

def has_star_args(call: cst.Call) -> bool:
    """True when ``call`` passes ``*args`` or ``**kwargs`` (which may hide any argument)."""
    return any(a.star for a in call.args)

def add_keyword_arg(call: cst.Call, name: str, value: str | cst.BaseExpression) -> cst.Call:
    """``f(a)`` → ``f(a, name=value)``, keeping a trailing comma and multi-line layout."""
    expr = cst.parse_expression(value) if isinstance(value, str) else value
    template = cst.ensure_type(cst.parse_expression(f"f({name}=x)"), cst.Call).args[0]
    new_arg = template.with_changes(value=expr)
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Multi-line call with a trailing comma: the new argument takes the old trailing comma
        # (and so the line break before ``)``); the old last argument gets a separator shaped like
        # the whitespace before the first argument.
        separator = call.whitespace_before_args
        if isinstance(separator, cst.SimpleWhitespace) and separator.value == "":
            separator = cst.SimpleWhitespace(" ")
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=separator))
        args.append(new_arg.with_changes(comma=last.comma))
    else:
        # What followed the old last argument (a line break before ``)``) follows the new one.
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                                     whitespace_after_arg=cst.SimpleWhitespace(""))
        args.append(new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)

def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None

def is_none(node: cst.CSTNode | None) -> bool:
    """Is ``node`` the literal ``None``?"""
    return isinstance(node, cst.Name) and node.value == "None"

def raises_if_none(node: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """Evaluating ``parent`` raises where ``node``, its child, is ``None``: an operand of
    arithmetic (``total / n``), the object of a subscript or of a plain attribute
    (``total.sum()``), the function of a call."""
    if isinstance(parent, cst.BinaryOperation):
        return node is parent.left or node is parent.right
    if isinstance(parent, cst.Attribute):
        return node is parent.value and not parent.attr.value.startswith("__")
    return isinstance(parent, (cst.Subscript, cst.Call)) and node is (parent.value if isinstance(parent, cst.Subscript) else parent.func)


def code_of(node: cst.CSTNode) -> str:
    """Source text of a node, as libcst would print it."""
    return cst.Module(body=[]).code_for_node(node)

def decorator_names(func: cst.FunctionDef) -> set[str]:
    return {dotted_name(d.decorator) or "" for d in func.decorators}

def first_positional_param(func: cst.FunctionDef, skip_self: bool = True) -> cst.Param | None:
    params = [*func.params.posonly_params, *func.params.params]
    if skip_self:
        params = params[1:]
    return params[0] if params else None

def all_params(func: cst.FunctionDef) -> list[cst.Param]:
    p = func.params
    extra = [s for s in (p.star_arg, p.star_kwarg) if isinstance(s, cst.Param)]
    return [*p.posonly_params, *p.params, *p.kwonly_params, *extra]


def short_text(code: str, limit: int = 40) -> str:
    """``code`` on one line, cut to ``limit`` characters (with ``...``) for a message."""
    text = " ".join(code.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class NodeSet:
    """Nodes marked during a transform, by identity. The nodes are kept: a mark by ``id`` alone
    outlives a node that is dropped (a line removed, a subtree rebuilt), and a node made later
    may be given the same ``id`` and read as marked (TFD009 once dropped such a statement)."""

    def __init__(self) -> None:
        self._nodes: dict[int, cst.CSTNode] = {}

    def add(self, node: cst.CSTNode) -> None:
        self._nodes[id(node)] = node

    def __contains__(self, node: cst.CSTNode) -> bool:
        return self._nodes.get(id(node)) is node

    def __bool__(self) -> bool:
        return bool(self._nodes)


def has_comment(line: cst.SimpleStatementLine) -> bool:
    """A comment on ``line`` itself or on the lines above it that belong to it: removing the
    line would take the comment with it."""
    return line.trailing_whitespace.comment is not None or any(
        empty.comment is not None for empty in line.leading_lines
    )


def without_statements(body: Sequence[cst.BaseStatement], removed: list[cst.CSTNode]) -> list[cst.BaseStatement]:
    """``body`` less the statements in ``removed``, whose lines above (and a comment after one, on
    a line of its own) go to the next statement, less blank lines it has of its own."""
    kept: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []
    for statement in body:
        if any(statement is r for r in removed):
            after = cst.ensure_type(statement, cst.SimpleStatementLine).trailing_whitespace.comment
            carried += [*statement.leading_lines, *([cst.EmptyLine(comment=after)] if after else [])]
            continue
        if carried:
            own, spare = list(statement.leading_lines), len(statement.leading_lines)
            while spare and carried and carried[-1].comment is None:  # blank lines do not double up
                carried, spare = carried[:-1], spare - 1
            statement = statement.with_changes(leading_lines=carried + own)
            carried = []
        kept.append(statement)
    return kept


def zero_index(node: cst.Subscript) -> bool:
    """``x[0]``: one index, the integer ``0``."""
    if len(node.slice) != 1:
        return False
    index = node.slice[0].slice
    return isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"


HOST_METHODS = frozenset({"numpy", "tolist"})
"""What reads a tensor's values out to the host: ``.numpy()`` (an array), ``.tolist()`` (lists of
Python numbers; a 0-dim tensor gives the number itself)."""


def numpy_subject(node: cst.Subscript) -> cst.BaseExpression | None:
    """``x`` of ``x.data.numpy()[0]``, ``x.data.cpu().numpy()[0]``, ``x.cpu().data.numpy()[0]``,
    and of the same with ``.tolist()`` in place of ``.numpy()``."""
    call = node.value
    if not (isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute) and call.func.attr.value in HOST_METHODS):
        return None
    receiver, seen_data = cst.ensure_type(call.func, cst.Attribute).value, False
    while True:
        if isinstance(receiver, cst.Call) and not receiver.args and m.matches(receiver.func, m.Attribute(attr=m.Name("cpu"))):
            receiver = cst.ensure_type(receiver.func, cst.Attribute).value
        elif isinstance(receiver, cst.Attribute) and receiver.attr.value == "data" and not seen_data:
            receiver, seen_data = receiver.value, True
        else:
            return receiver if seen_data else None


ELEMENT_BASES = (cst.Name, cst.Call, cst.Subscript)
ELEMENT_INDICES = (cst.Integer, cst.Name, cst.UnaryOperation, cst.BinaryOperation, cst.Call, cst.Subscript)
"""What an element's tensor and an integer index can be spelt as (:func:`element_form`)."""


def element_form(node: cst.Subscript) -> bool:
    """``node`` is spelt as an element of a tensor by an integer index: one index of a form
    :func:`torchfix_device.facts.counts.is_count` may accept (not a string, a slice, a tuple), of a name, a call, an
    element, or the ``.data``/``.values``/``.indices`` of one (``self.items[i]`` or
    ``args.files[0]`` is no tensor the code shows). A cheap test before any name is resolved;
    stage 1 of TFD019 mirrors it."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index) or node.slice[0].slice.star is not None:
        return False
    if not isinstance(node.slice[0].slice.value, ELEMENT_INDICES):
        return False
    base = node.value
    if isinstance(base, cst.Attribute) and base.attr.value in ("data", "values", "indices"):
        base = base.value if base.attr.value == "data" else base
        return isinstance(base, ELEMENT_BASES) or isinstance(base, cst.Attribute) and base.attr.value in ("values", "indices")
    return isinstance(base, ELEMENT_BASES)
