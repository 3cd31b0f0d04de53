"""Values of the command line: an attribute of ``parser.parse_args()``'s result is no tensor.

``opt.img_size``, where ``opt = parser.parse_args()``, holds what ``argparse`` made of a string
of the command line (the ``type=`` called on it) or the argument's default. Where ``type=`` is
``int``, ``float``, ``str`` or ``bool`` (or absent) and the default a literal (or absent), it is
a number, a string, a bool or None: it cannot require grad. :class:`ParsedValueEvidence` (mixed
into :class:`~torchfix_device.facts.grad.GradEvidence`) shows it where this file
shows all of:

- every binding of ``opt`` is ``opt = p.parse_args()`` (no arguments, or a list of strings:
  no ``namespace=``), every binding of ``p`` is ``p = argparse.ArgumentParser(...)`` without
  ``parents=``, ``argument_default=``, ``prefix_chars=`` or ``conflict_handler=``;
- ``p`` is used only to add arguments (``p.add_argument(...)``), parse and print help: no
  ``set_defaults``, argument group, subparser, and it is passed nowhere;
- every argument added has its option strings (and ``dest=``) spelt as literals; those whose
  destination is ``img_size`` (one at least) have a ``type=`` above (``int`` and the others as
  the builtins, not a name of the project's), an ``action=`` of ``store``, ``store_true``,
  ``store_false``, ``store_const`` or ``count``, no ``nargs=`` but ``'?'`` (a list may be
  filled later), and literal ``default=`` / ``const=``;
- ``opt`` is used only as ``opt.<name>`` and printed (``print(opt)``): it is passed nowhere
  (``setattr``, ``vars``, a function of the project's may write it), ``opt.img_size`` is never
  assigned, augmented or deleted, no ``__dict__`` of it is used, and ``globals``, ``exec`` and
  ``eval`` appear nowhere in the file.

Another module writing ``opt.img_size`` (``import train; train.opt.img_size = ...``) is not seen.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.facts.in_place import index_of
from torchfix_device.facts.name_flow import binding_owner

PARSERS = {"argparse.ArgumentParser"}
PARSER_KEYWORDS_WITH_EFFECT = {"parents", "argument_default", "prefix_chars", "conflict_handler", "fromfile_prefix_chars"}
PARSER_USES = {"add_argument", "parse_args", "print_help", "print_usage", "format_help", "format_usage", "error", "exit"}
PLAIN_TYPES = {"builtins.int", "builtins.float", "builtins.str", "builtins.bool"}
PLAIN_ACTIONS = {"store", "store_true", "store_false", "store_const", "count"}
PRINTING = {"builtins.print", "builtins.str", "builtins.repr", "builtins.format"}
RUNNING_ANY_CODE = ("globals", "exec", "eval")


class ParsedValueEvidence:
    """``parsed_value_missing`` of :class:`GradEvidence` (which supplies ``names``, ``bindings``
    and ``parent``)."""

    module: cst.Module

    def names(self, node: cst.CSTNode) -> set[str]:  # pragma: no cover - supplied by GradEvidence
        raise NotImplementedError

    def bindings(self, name: str, node: cst.CSTNode) -> set[Any]:  # pragma: no cover
        raise NotImplementedError

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:  # pragma: no cover
        raise NotImplementedError

    def is_parsed(self, receiver: cst.BaseExpression) -> bool:
        """``receiver`` is a name some binding of which is ``x = p.parse_args(...)``."""
        return isinstance(receiver, cst.Name) and any(_parse_call(v) is not None for v in self._bound_values(receiver))

    def parsed_value_missing(self, expr: cst.Attribute) -> str | None:
        """None when ``expr`` (``opt.img_size``, ``opt`` a ``parse_args()`` result) is shown to
        be a number, a string, a bool or None (see the module docstring); else what is missing."""
        receiver = cst.ensure_type(expr.value, cst.Name)
        shown = f"`{nodes.code_of(expr)}`"
        namespace = self._namespace(receiver)
        if isinstance(namespace, str):
            return f"{shown} is a command-line value, but {namespace}"
        attr = expr.attr.value
        if attr in namespace.written:
            return f"{shown} is a command-line value, but this file sets it"
        added = namespace.arguments.get(attr)
        if not added:
            return f"{shown} is no argument this file shows `{namespace.parser}` to add"
        return _first(_argument_missing(self, call, shown) for call in added)

    # -- what the file shows of one parse_args() result -----------------------------------------
    def _namespace(self, receiver: cst.Name) -> "_Namespace | str":
        values = list(self._bound_values(receiver))
        key = tuple(sorted(id(v) for v in values))
        memo: dict = self.__dict__.setdefault("_parsed_namespaces", {})
        if key not in memo:
            memo[key] = self._scan_namespace(receiver, values)
        return memo[key]

    def _scan_namespace(self, receiver: cst.Name, values: list[cst.BaseExpression | None]) -> "_Namespace | str":
        name = receiver.value
        calls = [_parse_call(v) for v in values]
        if not calls or any(c is None for c in calls):
            return f"`{name}` is also bound to something else"
        parsers = {cst.ensure_type(cst.ensure_type(c.func, cst.Attribute).value, cst.Name).value for c in calls if c is not None}
        if len(parsers) != 1:
            return f"`{name}` is parsed by several parsers"
        (parser,) = parsers
        for call in calls:
            assert call is not None
            if not _plain_parse(call):
                return f"`{nodes.code_of(call)}` is given arguments other than strings"
            for value in self._bound_values(cst.ensure_type(call.func, cst.Attribute).value):
                if not (isinstance(value, cst.Call) and self.names(value.func) and self.names(value.func) <= PARSERS):
                    return f"`{parser}` is not shown to be an `argparse.ArgumentParser`"
                if any(a.star for a in value.args) or len(value.args) > 4 + sum(a.keyword is not None for a in value.args) or any(
                    a.keyword is not None and a.keyword.value in PARSER_KEYWORDS_WITH_EFFECT for a in value.args
                ):
                    return f"`{parser}` is made with arguments that change what it parses"
        names = index_of(self, self.module).names
        if any(names.get(n) for n in RUNNING_ANY_CODE):
            return "this file runs code it does not show (`globals`, `exec`, `eval`)"
        namespace = _Namespace(parser)
        for node in names.get(parser, ()):
            found = self._parser_use(node, namespace)
            if found is not None:
                return found
        for node in names.get(name, ()):
            found = self._namespace_use(node, namespace)
            if found is not None:
                return found
        return namespace

    def _parser_use(self, node: cst.Name, namespace: "_Namespace") -> str | None:
        above = self.parent(node)
        if _not_a_variable(node, above) or isinstance(above, cst.AssignTarget) and above.target is node:
            return None  # a binding: each one that reaches a parse was checked to make a parser
        call = self.parent(above) if isinstance(above, cst.Attribute) and above.value is node else None
        if not isinstance(call, cst.Call):
            return f"`{namespace.parser}` is passed on where this file does not show what it adds"
        if not (call.func is above and above.attr.value in PARSER_USES):
            return f"`{namespace.parser}` is used in a way that may add or change arguments (`{nodes.code_of(above)}`)"
        if above.attr.value == "add_argument":
            dest = _destination(call)
            if dest is None:
                return f"an argument of `{namespace.parser}` has a name this file does not spell out"
            namespace.arguments.setdefault(dest, []).append(call)
        return None

    def _namespace_use(self, node: cst.Name, namespace: "_Namespace") -> str | None:
        above = self.parent(node)
        if _not_a_variable(node, above) or isinstance(above, (cst.AssignTarget, cst.NameItem)):
            return None  # a binding (all checked), `global opt`
        if isinstance(above, cst.Attribute) and above.value is node:
            if above.attr.value.startswith("__"):
                return f"`{nodes.code_of(above)}` is used"
            if _written(above, self.parent):
                namespace.written.add(above.attr.value)
            return None
        arg = above if isinstance(above, cst.Arg) and above.keyword is None and not above.star else None
        call = self.parent(arg) if arg is not None else None
        if isinstance(call, cst.Call) and self.names(call.func) and self.names(call.func) <= PRINTING:
            return None
        return f"`{node.value}` is passed on where this file does not show what happens to it"

    def _bound_values(self, name: cst.BaseExpression) -> Iterator[cst.BaseExpression | None]:
        """The value of each binding of ``name`` (None: not a plain ``name = value``)."""
        if not isinstance(name, cst.Name):
            yield None
            return
        for binding in self.bindings(name.value, name):
            node = getattr(binding, "node", None)
            owner = binding_owner(node, self.parent) if node is not None else None
            statement = owner[0] if owner is not None else None
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1 and statement.targets[0].target is node:
                yield statement.value
            else:
                yield None


class _Namespace:
    def __init__(self, parser: str) -> None:
        self.parser = parser
        self.arguments: dict[str, list[cst.Call]] = {}
        self.written: set[str] = set()


def _not_a_variable(node: cst.Name, above: cst.CSTNode | None) -> bool:
    """``x.opt``, ``f(opt=1)``: a ``Name`` node that is no read or binding of a variable."""
    return (isinstance(above, cst.Attribute) and above.attr is node) or (isinstance(above, cst.Arg) and above.keyword is node)


def _parse_call(value: cst.BaseExpression | None) -> cst.Call | None:
    """``p.parse_args(...)`` (``p`` a name), else None."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "parse_args":
        return value if isinstance(value.func.value, cst.Name) else None
    return None


def _plain_parse(call: cst.Call) -> bool:
    """``parse_args()`` or ``parse_args(["--a", "1"])``: no namespace of the caller's."""
    if not call.args:
        return True
    if len(call.args) != 1 or call.args[0].star or (call.args[0].keyword is not None and call.args[0].keyword.value != "args"):
        return False
    value = call.args[0].value
    return isinstance(value, (cst.List, cst.Tuple)) and all(_string(e.value) is not None for e in value.elements)


def _destination(call: cst.Call) -> str | None:
    """The attribute ``add_argument`` stores its value in, as argparse names it; None where
    the option strings or ``dest=`` are not literal strings."""
    if any(a.star for a in call.args):
        return None
    dest = nodes.keyword_arg(call, "dest")
    if dest is not None:
        return _string(dest.value)
    strings = [_string(a.value) for a in call.args if a.keyword is None]
    if not strings or any(s is None for s in strings):
        return None
    options: list[str] = [s for s in strings if s is not None]
    if not options[0].startswith("-"):
        return options[0]  # a positional argument: its own name
    long = [s for s in options if len(s) > 1 and s[1] == "-"]
    return (long or options)[0].lstrip("-").replace("-", "_")


def _argument_missing(evidence: ParsedValueEvidence, call: cst.Call, shown: str) -> str | None:
    kind = nodes.keyword_arg(call, "type")
    if kind is not None and not (evidence.names(kind.value) and evidence.names(kind.value) <= PLAIN_TYPES):
        return f"{shown} is made by `type={nodes.code_of(kind.value)}`, which this file does not show to make no tensor"
    action = nodes.keyword_arg(call, "action")
    if action is not None and _string(action.value) not in PLAIN_ACTIONS:
        return f"{shown} is stored by `action={nodes.code_of(action.value)}`, which may store anything"
    nargs = nodes.keyword_arg(call, "nargs")
    if nargs is not None and _string(nargs.value) != "?":
        return f"{shown} is a list (`nargs={nodes.code_of(nargs.value)}`), which may be filled later"
    for keyword in ("default", "const"):
        given = nodes.keyword_arg(call, keyword)
        if given is not None and not _literal(given.value):
            return f"{shown} has a `{keyword}=` that is not a literal"
    return None


def _written(attribute: cst.Attribute, parent: Callable[[cst.CSTNode], "cst.CSTNode | None"]) -> bool:
    """``opt.x = ...``, ``opt.x += ...``, ``del opt.x``, ``for opt.x in ...``, ``opt.x[0] = ...``,
    ``a, opt.x = ...``: the attribute (or a part of it) is a target."""
    child: cst.CSTNode = attribute
    above = parent(child)
    while isinstance(above, (cst.Attribute, cst.Subscript, cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        if isinstance(above, (cst.Attribute, cst.Subscript)) and above.value is not child:
            return False
        child, above = above, parent(above)
    if isinstance(above, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
        return above.target is child
    return isinstance(above, (cst.Del, cst.AsName))


def _string(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _literal(expr: cst.BaseExpression) -> bool:
    """A number, a string, ``None``, ``True`` or ``False`` (a negative number too)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    return isinstance(expr, cst.Name) and expr.value in ("None", "True", "False")


def _first(found: Iterator[str | None]) -> str | None:
    for item in found:
        if item is not None:
            return item
    return None
