"""Tensor-type aliases (TFD008): ``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``.

An alias is a name bound once, in the body of the module or of a function, to
``torch.cuda.XTensor if <condition> else torch.XTensor`` (``torch.Tensor`` for ``FloatTensor``),
and read only after that statement, each read being one of:

- ``Alias(...)``, a constructor whose arguments show what they are, as for the legacy
  constructors themselves (:mod:`torchfix_device.codemods.common.legacy_constructors`: sizes →
  ``torch.empty(..., dtype=, device=)``, data → ``torch.tensor(...)``, a NumPy array →
  ``torch.as_tensor(...)``);
- ``x.type(Alias)`` → ``x.to(device=..., dtype=...)``.

The device is the alias's own condition: ``torch.device("cuda" if <condition> else "cpu")``, the
binding of the user's flag where the condition is that flag (:mod:`torchfix_device.devices.flag_binding`),
else a binding of that value in place of the alias. When any read is of another kind, or an
argument shows neither a size nor data, nothing of the alias is rewritten and the reads are
reported for review.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device import torch_api
from torchfix_device.devices.flag_scan import statements_of
from torchfix_device.facts.losses import related_classes

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod

MODULE = ""
"""The dtype of a module alias (``tt = torch.cuda if cuda else torch``): each read names its own."""


@dataclass
class Alias:
    name: str
    statement: cst.SimpleStatementLine
    choice: cst.IfExp
    dtype: str
    """The alias's dtype, or :data:`MODULE` for an alias of ``torch.cuda``/``torch``."""
    scope: cst.CSTNode  # Module or FunctionDef
    reads: list[cst.BaseExpression] = field(default_factory=list)
    """The reads: names, or for an attribute alias the ``self.tt`` attributes."""
    owner: cst.ClassDef | None = None
    """For ``self.tt = torch.cuda if cuda else torch`` in ``__init__``: the class."""
    reason: str | None = None
    """Why it is left as it is (None: every read is rewritten and the alias goes)."""
    device: str | None = None
    removed: bool = False
    """The alias statement goes (the device is a binding made earlier); else it becomes one."""
    unconditional: bool = False
    """``dtype = torch.cuda.FloatTensor``: :attr:`choice` is made up, on ``torch.cuda.is_available()``
    (the device TFD001 gives a hard-coded ``.cuda()``)."""


DYNAMIC_NAMES = frozenset({"globals", "locals", "vars", "eval", "exec", "__import__"})
"""Builtins that may read a name by its string: an alias no code spells may still be read."""


def unread_goes(codemod: "Codemod", alias: Alias) -> bool:
    """No read of ``alias`` can exist: it is a function's local, or a module's name where no
    file of the run imports the module; the file reads no names by their strings
    (``globals()``, ``eval``...); its condition is a flag (a name, an attribute, negated or
    not, or ``torch.cuda.is_available()``), whose evaluation does nothing."""
    if alias.owner is not None or not (isinstance(alias.scope, cst.FunctionDef) or codemod.imported_by_none):
        return False
    if traversal.all_names(codemod.visited_module) & DYNAMIC_NAMES:
        return False
    test = alias.choice.test
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Call) and not test.args:
        return "torch.cuda.is_available" in codemod.qualified_names(test.func)
    return _nodes.dotted_name(test) is not None


def find_aliases(codemod: "Codemod", module: cst.Module) -> dict[str, list[Alias]]:
    """The aliases of ``module`` by name, with their reads and whether they can be rewritten."""
    found: dict[str, list[Alias]] = {}
    for scope, statement in _body_statements(module):
        alias = _alias_of(codemod, statement, scope)
        if alias is not None:
            found.setdefault(alias.name, []).append(alias)
    for owner, init, statement in _init_statements(module):
        alias = _alias_of(codemod, statement, init, owner)
        if alias is not None:
            found.setdefault(alias.name, []).append(alias)
    if not found:
        return {}
    attributes = {name: aliases for name, aliases in found.items() if aliases[0].owner is not None}
    if attributes:
        _attribute_reads(module, attributes)
    found = {name: aliases for name, aliases in found.items() if name not in attributes}
    binds: dict[str, int] = {}
    for event in codemod.device_source.flags.analysis.scan.events:
        if event.kind == "bind" and event.target in found:
            binds[event.target] = binds.get(event.target, 0) + 1
    for name, aliases in found.items():
        reads = traversal.name_reads(module, name)
        for alias in aliases:
            if len(aliases) > 1 or binds.get(name, 0) != 1 or reads is None or _bound_in_expressions(module, name):
                alias.reason = f"`{name}` is bound more than once"
                continue
            alias.reads = [r for r in reads if r is not alias.statement.body[0].targets[0].target]  # type: ignore[attr-defined]
    return {**found, **attributes}


def _init_statements(module: cst.Module):
    """(class, its ``__init__``, statement) for the statements of each class's ``__init__``."""
    for node in traversal.walk_statements(module):
        if isinstance(node, cst.ClassDef):
            for method in statements_of(node):
                if isinstance(method, cst.FunctionDef) and method.name.value == "__init__" and _self_name(method):
                    for statement in statements_of(method):
                        yield node, method, statement


def _self_name(method: cst.FunctionDef) -> str | None:
    params = [*method.params.posonly_params, *method.params.params]
    return params[0].name.value if params and not method.decorators else None


def _attribute_reads(module: cst.Module, found: dict[str, list[Alias]]) -> None:
    """Fill the reads of the attribute aliases ``found`` (by their shown name, ``self.tt``):
    every ``X.tt`` of the file other than the alias's own target is a read; the alias stays
    when the attribute is bound more than once."""
    by_attribute = {name.partition(".")[2]: aliases for name, aliases in found.items()}
    targets: dict[str, int] = {}
    for node in traversal.of_classes(module, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del, cst.For, cst.With):
        for target in traversal.walk(_binding_part(node)) if not isinstance(node, cst.Del) else traversal.walk(node.target):
            if isinstance(target, cst.Attribute) and target.attr.value in by_attribute:
                targets[target.attr.value] = targets.get(target.attr.value, 0) + 1
    for attribute, aliases in by_attribute.items():
        alias = aliases[0]
        target = alias.statement.body[0].targets[0].target  # type: ignore[attr-defined]
        if len(aliases) > 1 or targets.get(attribute, 0) != 1:
            for each in aliases:
                each.reason = f"`.{attribute}` is bound more than once in the file"
            continue
        alias.reads = [
            node for node in traversal.of_classes(module, cst.Attribute)
            if node.attr.value == attribute and node is not target
        ]


def _body_statements(module: cst.Module):
    """(scope, statement) for the statements of the module's body and of every function body."""
    for statement in module.body:
        yield module, statement
    for node in traversal.walk_statements(module):
        if isinstance(node, cst.FunctionDef):
            for statement in statements_of(node):
                yield node, statement


def _alias_of(codemod: "Codemod", statement: cst.CSTNode, scope: cst.CSTNode, owner: cst.ClassDef | None = None) -> Alias | None:
    target = m.Name() if owner is None else m.Attribute(value=m.Name(_self_name(cst.ensure_type(scope, cst.FunctionDef))))
    pattern = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=target)], value=m.IfExp() | m.Attribute())])
    if not m.matches(statement, pattern):
        return None
    line = cst.ensure_type(statement, cst.SimpleStatementLine)
    assign = cst.ensure_type(line.body[0], cst.Assign)
    name = _nodes.code_of(assign.targets[0].target)
    if isinstance(assign.value, cst.Attribute):  # `dtype = torch.cuda.FloatTensor`: CUDA wherever there is one
        if assign.value.attr.value not in torch_api.LEGACY_TENSOR_DTYPES:
            return None  # `self.x = self.y`, `w = m.weight`: no type (before asking for names)
        on_cuda = torch_api.legacy_tensor_type(codemod.qualified_names(assign.value, ending_in=torch_api.LEGACY_TENSOR_TYPE_NAMES))
        if on_cuda is None or not on_cuda[1]:
            return None
        torch_name = getattr(codemod, "_torch", "torch")
        test = cst.parse_expression(f"{torch_name}.cuda.is_available()")
        choice = cst.IfExp(test=test, body=assign.value, orelse=cst.parse_expression(f"{torch_name}.Tensor"))
        return Alias(name, line, choice, on_cuda[0], scope, owner=owner, unconditional=True)
    choice = cst.ensure_type(assign.value, cst.IfExp)
    if "torch.cuda" in codemod.qualified_names(choice.body) and "torch" in codemod.qualified_names(choice.orelse):
        return Alias(name, line, choice, MODULE, scope, owner=owner)
    on_cuda = torch_api.legacy_tensor_type(codemod.qualified_names(choice.body, ending_in=torch_api.LEGACY_TENSOR_TYPE_NAMES))
    if on_cuda is None or not on_cuda[1]:
        return None
    otherwise = codemod.qualified_names(choice.orelse, ending_in=torch_api.LEGACY_TENSOR_TYPE_NAMES | {"Tensor"})
    on_cpu = torch_api.legacy_tensor_type(otherwise)
    if not (on_cpu == (on_cuda[0], False) or ("torch.Tensor" in otherwise and on_cuda[0] == "float32")):
        return None
    return Alias(name, line, choice, on_cuda[0], scope, owner=owner)


def attribute_device(alias: Alias, chosen: list[Alias], taken: set[str]) -> None:
    """The device attribute of an attribute alias (``self.tt = torch.cuda if cuda else torch``,
    ``self.dtype = torch.cuda.FloatTensor if cuda else torch.FloatTensor``): the one an earlier
    alias of the same ``__init__`` binds on the same condition, where no statement between them
    calls anything or binds what the condition reads (this alias's line then goes; CUDA types bound
    with no condition share one always); else a free attribute name, one no alias of the same
    class (or of a base or subclass of the file) took. ``chosen``: those so far (appended to)."""
    init = cst.ensure_type(alias.scope, cst.FunctionDef)
    body = list(statements_of(init))
    test = _nodes.code_of(alias.choice.test)
    read = {n.value for n in traversal.walk(alias.choice.test) if isinstance(n, cst.Name)}
    for earlier in chosen:
        if earlier.scope is not init or earlier.removed or _nodes.code_of(earlier.choice.test) != test:
            continue
        start = next(i for i, s in enumerate(body) if s is earlier.statement)
        end = next(i for i, s in enumerate(body) if s is alias.statement)
        between = body[start + 1:end]
        if start < end and (alias.unconditional and earlier.unconditional or not any(_calls_or_binds(s, read) for s in between)):
            alias.device, alias.removed = earlier.device, True
            chosen.append(alias)
            return
    names = taken | {cst.ensure_type(a.device, str).partition(".")[2] for a in chosen
                     if a.owner is not None and (a.owner is alias.owner or related_classes(a.owner, alias.owner))}
    free = next((n for n in ("device", "tensor_device", "default_device", "device_") if n not in names), None) or \
        next(f"device{i}" for i in range(2, 1000) if f"device{i}" not in names)
    params = [*init.params.posonly_params, *init.params.params]
    alias.device = f"{params[0].name.value}.{free}"
    chosen.append(alias)


def _calls_or_binds(statement: cst.CSTNode, names: set[str]) -> bool:
    """``statement`` calls something, or binds (or deletes) a name of ``names`` or an attribute
    or item of one."""
    for node in traversal.walk(statement):
        if isinstance(node, cst.Call):
            return True
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del, cst.For, cst.With, cst.NamedExpr)):
            part = node.target if isinstance(node, cst.Del) else _binding_part(node)
            if any(isinstance(n, cst.Name) and n.value in names for n in traversal.walk(part)):
                return True
    return False


def _bound_in_expressions(module: cst.Module, name: str) -> bool:
    """A lambda parameter or comprehension target of that name (it would hide the alias)."""
    for node in traversal.of_classes(module, cst.Lambda, cst.CompFor):
        if isinstance(node, cst.Lambda) and any(p.name.value == name for p in _cst_lambda_params(node)):
            return True
        if isinstance(node, cst.CompFor) and name in traversal.all_names(node.target):
            return True
    return False


def _cst_lambda_params(node: cst.Lambda) -> list[cst.Param]:
    p = node.params
    extra = [s for s in (p.star_arg, p.star_kwarg) if isinstance(s, cst.Param)]
    return [*p.posonly_params, *p.params, *p.kwonly_params, *extra]


# -- what a read of an alias becomes -------------------------------------------------------------
def read_kind(codemod: "Codemod", read: cst.BaseExpression, parent: cst.CSTNode | None, grand: cst.CSTNode | None,
              alias: Alias | None = None) -> str | None:
    """``"call"`` for ``Alias(...)``, ``"type"`` for ``x.type(Alias)``, ``"member"`` for
    ``tt.FloatTensor(...)`` of a module alias, None for anything else."""
    if alias is not None and alias.dtype == MODULE:
        if isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value in torch_api.LEGACY_TENSOR_DTYPES \
                and isinstance(grand, cst.Call) and grand.func is parent:
            return "member"
        return None
    if isinstance(parent, cst.Call) and parent.func is read:
        return "call"
    if isinstance(parent, cst.Arg) and parent.keyword is None and isinstance(grand, cst.Call) and len(grand.args) == 1 \
            and m.matches(grand.func, m.Attribute(attr=m.Name("type"))):
        return "type"
    return None


def _binding_part(node: cst.CSTNode) -> cst.CSTNode:
    if isinstance(node, cst.Assign):
        return cst.Module(body=[]) if not node.targets else node.targets[0].target if len(node.targets) == 1 else node
    if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
        return node.target
    if isinstance(node, cst.With):
        return cst.Tuple([cst.Element(i.asname.name) for i in node.items if i.asname is not None]) if \
            any(i.asname for i in node.items) else cst.Module(body=[])
    if isinstance(node, cst.ExceptHandler):
        return node.name.name if node.name is not None else cst.Module(body=[])
    return node
