"""Where the program's path, not the value's making, shows it on the CPU: two facts of
:func:`torchfix_device.facts.devices.on_cpu` (asked where a tensor meets host code, TFD018).

**The flag's CPU branch.** Where every place of the file that may put a value on a device
(:func:`placements`: a ``.cuda`` anywhere but ``torch.cuda.is_available()`` and the seeding
and counting calls, a ``.to(...)`` or ``.type(...)`` call, a ``device=``/``map_location=``
not following a tensor, a ``torch.load`` whose result is not handed straight to
``load_state_dict``, ``set_default_tensor_type``/``set_default_device``) lies in the body of
``if F:`` for one flag ``F`` that the file binds once (a name with one binding reaching every
such test, or ``self.f`` assigned once), the ``else:`` of ``if F:`` (and the body of
``if not F:``) runs only where none of them ran: every value there is where the code that made
it put it, and this file put nothing anywhere. That is the legacy author's CPU path
(``if self.gpu_mode: s = s.cpu().data.numpy()`` / ``else: s = s.data.numpy()``). Values made
by other files' functions are taken to follow the same flag.

**A data loader's items.** An item of a ``torch.utils.data.DataLoader`` (through
``enumerate``, ``zip``, ``iter``, ``tqdm``...) is where its data set and its ``collate_fn``
put it, and no codemod puts a device in either (none rewrites a ``Dataset``); a
``__getitem__`` or a ``collate_fn`` of this file that may place a value (as above) rules it
out. The loader is a ``DataLoader(...)`` call (or a call of a subclass of it, of this file or
another of the run, whose code places nothing: :func:`loader_class`), a name every binding of
which is one, or a
parameter of a plain function of a file no other file imports every call of which in the file
passes one (``def eval(dataloader, ...)`` called as ``eval(test_dataloader, ...)``). Whether
the item was moved since is the caller's question (the bindings that reach its read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts.data_pipeline import DATALOADERS, iterated
from torchfix_device.facts.project_placements import DTYPE_KEYWORDS, NOT_PLACING_CUDA, PLACING_KEYWORDS
from torchfix_device.facts.values import ITEM, PARAM, VALUE
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

if TYPE_CHECKING:
    from torchfix_device.facts.values import Bound, ModuleValues

PLACING_CALLS = frozenset({"to", "type", "set_default_tensor_type", "set_default_device"})
TORCH_LOAD = frozenset({"torch.load", "torch.serialization.load"})
MAX_DEPTH = 6


def placements(values: "ModuleValues", scope: cst.CSTNode | None = None) -> list[cst.CSTNode]:
    """The places of ``scope`` (the module by default; memoised for it) that may put a value on
    a device (see the module docstring)."""
    if scope is None:
        return values.facet("device placements", lambda: _placements(values, values.module))
    return _placements(values, scope)


def _placements(values: "ModuleValues", scope: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    for node in traversal.of_classes_under(values.module, scope, cst.Attribute, cst.Call, cst.Arg):
        if isinstance(node, cst.Attribute) and node.attr.value == "cuda":
            above = values.parent(node)
            if not (isinstance(above, cst.Attribute) and above.value is node and above.attr.value in NOT_PLACING_CUDA):
                found.append(node)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in PLACING_CALLS:
            if not (node.func.attr.value in ("to", "type") and _cpu_types_only(node)):
                found.append(node)
        elif isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in PLACING_KEYWORDS:
            if not names_the_cpu(node.value) and not follows_a_tensor(values, node.value) \
                    and not _into_state_dict(values, values.parent(node)):
                found.append(node)
        elif isinstance(node, cst.Call) and (nodes.dotted_name(node.func) or "").rpartition(".")[2] == "load":
            if values.names(node.func) & TORCH_LOAD and not _into_state_dict(values, node):
                found.append(node)
    return found


def _cpu_types_only(call: cst.Call) -> bool:
    """``x.type(torch.LongTensor)``, ``x.type('torch.FloatTensor')``, ``x.to(torch.float32)``:
    a type of the CPU or a dtype, nothing naming CUDA or a device."""
    if not call.args or nodes.has_star_args(call):
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value not in DTYPE_KEYWORDS:
            return False
        value = arg.value
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            if not isinstance(text, str) or "cuda" in text or not text.startswith("torch."):
                return False
            continue
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            continue
        dotted = nodes.dotted_name(value)
        if dotted is None or not dotted.startswith("torch.") or dotted.count(".") != 1 or "cuda" in dotted or dotted == "torch.device":
            return False
    return True


def names_the_cpu(expr: cst.BaseExpression) -> bool:
    """``"cpu"`` (as in ``map_location="cpu"``): no device other than the CPU."""
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value == "cpu"


def follows_a_tensor(values: "ModuleValues", expr: cst.BaseExpression) -> bool:
    """``x.device`` or ``self.w.device`` (as in ``device=x.device``, TFD003's rewrite): a value's
    own device, which follows a tensor already placed and puts nothing on a device of its own
    (never ``torch.device`` or ``T.device``: a module's, spelt any way)."""
    return (
        isinstance(expr, cst.Attribute) and expr.attr.value == "device"
        and isinstance(expr.value, (cst.Name, cst.Attribute)) and not values.module_path(expr.value)
    )


def _into_state_dict(values: "ModuleValues", call: cst.CSTNode | None) -> bool:
    """``call`` is the argument of ``m.load_state_dict(...)``: its tensors are copied into the
    module's own, wherever those are."""
    arg = values.parent(call) if call is not None else None
    outer = values.parent(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(outer, cst.Call) and isinstance(outer.func, cst.Attribute) and outer.func.attr.value == "load_state_dict"


def in_flag_cpu_branch(values: "ModuleValues", expr: cst.CSTNode) -> bool:
    """``expr`` runs only where the file's one device flag is off (see the module docstring)."""
    child, above = expr, values.parent(expr)
    while above is not None:
        if isinstance(above, cst.Else):
            owner = values.parent(above)
            if isinstance(owner, cst.If) and owner.orelse is above and _only_flag(values, owner.test):
                return True
        if isinstance(above, cst.If) and above.body is child and isinstance(above.test, cst.UnaryOperation) \
                and isinstance(above.test.operator, cst.Not) and _only_flag(values, above.test.expression):
            return True
        child, above = above, values.parent(above)
    return False


def _only_flag(values: "ModuleValues", test: cst.BaseExpression) -> bool:
    """``test`` is a flag bound once, and every placement of the file is in the body of an
    ``if`` on it."""
    flag = _flag_key(values, test)
    if flag is None:
        return False
    found = placements(values)
    if not found:
        return False
    for place in found:
        guard = values.parent(place)
        while guard is not None and not (isinstance(guard, cst.If) and _flag_key(values, guard.test) == flag
                                         and _within(values, place, guard.body)):
            guard = values.parent(guard)
        if guard is None:
            return False
    return True


def flag_of_every_move(values: "ModuleValues") -> str | None:
    """The flag (as spelt: ``cuda``, ``args.cuda``, ``self.use_gpu``) of the ``if`` whose body
    holds each place of the file that may put a value on a device, where there is one for every
    place and there are some, the ``torch.load`` calls without a location left out (TFD005 gives
    them one); None otherwise (memoised per module version). A load outside those bodies that
    took ``torch.cuda.is_available()``'s device would not follow the user's choice."""

    def compute() -> str | None:
        flags: list[str] = []
        for place in placements(values):
            if isinstance(place, cst.Call) and values.names(place.func) & TORCH_LOAD and nodes.keyword_arg(place, "map_location") is None:
                continue
            followed = _flag_device_of(values, place)
            guard, child = values.parent(place), place
            while followed is None and guard is not None:
                if isinstance(guard, cst.If) and guard.body is child and _a_flag(guard.test):
                    followed = nodes.code_of(guard.test)
                guard, child = values.parent(guard), guard
            if followed is None:
                return None
            flags.append(followed)
        return flags[0] if flags else None

    return values.facet("flag of every move", compute)


def _flag_device_of(values: "ModuleValues", place: cst.CSTNode) -> str | None:
    """``x.to(device)`` where every value of ``device`` is ``torch.device("cuda" if F ... else
    "cpu")`` (TFD001's device of a flag): ``F``."""
    if not (isinstance(place, cst.Call) and len(place.args) == 1 and isinstance(place.args[0].value, cst.Name)):
        return None
    found: set[str] = set()
    for value in values.values_of(place.args[0].value):
        if not (isinstance(value, cst.Call) and values.names(value.func) & {"torch.device"} and value.args
                and isinstance(value.args[0].value, cst.IfExp)):
            return None
        test = value.args[0].value.test
        while isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            test = test.left
        if not _a_flag(test):
            return None
        found.add(nodes.code_of(test))
    return found.pop() if len(found) == 1 else None


def _a_flag(test: cst.BaseExpression) -> bool:
    """``cuda``, ``args.cuda``, ``self.use_gpu``: a name or an attribute of one, not a call
    (``torch.cuda.is_available()`` decides as the default device does)."""
    dotted = nodes.dotted_name(test)
    return dotted is not None and "cuda.is_available" not in dotted


def _within(values: "ModuleValues", node: cst.CSTNode, block: cst.CSTNode) -> bool:
    while node is not None and node is not block:
        node = values.parent(node)
    return node is block


def _flag_key(values: "ModuleValues", test: cst.BaseExpression) -> object | None:
    """What identifies the flag ``test`` reads: its one binding (a name), or ``self.f`` assigned
    at most once in the file."""
    if isinstance(test, cst.Name):
        reach = values.reach(test)
        if reach.why is not None or len(reach.bindings) != 1:
            return None
        return id(reach.bindings[0])
    dotted = nodes.dotted_name(test)
    if dotted is None or not dotted.startswith("self.") or dotted.count(".") != 1:
        return None
    assigned = values.facet("self attribute stores", lambda: _self_stores(values))
    return dotted if assigned.get(dotted, 0) <= 1 else None


def _self_stores(values: "ModuleValues") -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in traversal.of_classes(values.module, cst.AssignTarget, cst.AugAssign, cst.AnnAssign):
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.AssignTarget):
            targets = [n for n in traversal.walk(node.target) if isinstance(n, cst.Attribute)]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        for target in targets:
            dotted = nodes.dotted_name(target)
            if dotted is not None:
                counts[dotted] = counts.get(dotted, 0) + 1
    return counts


# -- a data loader's items ------------------------------------------------------------------
def loader_item(values: "ModuleValues", bound: "Bound", depth: int = 0) -> bool:
    """``bound`` (an ``ITEM`` binding) is an item of a data loader (see the module docstring)."""
    return bound.kind == ITEM and bound.value is not None and _iterates_loaders(values, bound.value, depth)


def _iterates_loaders(values: "ModuleValues", iterable: cst.BaseExpression, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    through = iterated(values.names, iterable)
    if through is not None:
        return bool(through) and all(_iterates_loaders(values, a, depth + 1) for a in through)
    return _is_loader(values, iterable, depth)


def _is_loader(values: "ModuleValues", expr: cst.BaseExpression, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Call):
        if not _places_nothing(values, expr):
            return False
        if values.names(expr.func) & DATALOADERS:
            return True
        if isinstance(expr.func, cst.Name):  # a `DataLoader` subclass of this file
            reach = values.reach(expr.func)
            if reach.why is None and len(reach.bindings) == 1 and isinstance(reach.bindings[0], cst.ClassDef):
                return loader_class(values, reach.bindings[0])
        summary = values.call_returns(expr)  # of another file of the run
        return bool(getattr(summary, "loader", False))
    if not isinstance(expr, cst.Name):
        return False
    reach = values.reach(expr)
    if reach.why is not None or not reach.bindings:
        return False
    for node in reach.bindings:
        bound = values.bound(node)
        if bound.kind == VALUE and bound.value is not expr:
            if not _is_loader(values, bound.value, depth + 1):
                return False
        elif bound.kind == PARAM and isinstance(bound.value, cst.FunctionDef):
            if not _param_loader(values, node, bound.value, depth):
                return False
        else:
            return False
    return True


def _param_loader(values: "ModuleValues", node: cst.CSTNode, function: cst.FunctionDef, depth: int) -> bool:
    from torchfix_device.facts.uses import passed_to

    given = passed_to(values, node, function)
    return bool(given) and all(_is_loader(values, value, depth + 1) for value in given)


def _places_nothing(values: "ModuleValues", loader: cst.Call) -> bool:
    """The loader's ``collate_fn`` and its data set's class, where this file defines them, put
    no value on a device."""
    if nodes.has_star_args(loader):
        return False
    collate = nodes.keyword_arg(loader, "collate_fn")
    dataset = nodes.keyword_arg(loader, "dataset")
    if dataset is None:
        positional = nodes.positional_args(loader)
        dataset = positional[0] if positional else None
    for arg, kind in ((collate, "function"), (dataset, "class")):
        if arg is None:
            continue
        shown = [arg.value] if isinstance(arg.value, cst.Name) else []
        shown += [v for v in values.values_of(arg.value) if v is not None and v is not arg.value]
        for value in shown:
            target = value.func if kind == "class" and isinstance(value, cst.Call) else value
            if isinstance(target, cst.Lambda) and placements(values, target):
                return False
            if isinstance(target, cst.Name):
                for binding in values.reach(target).bindings:
                    if isinstance(binding, (cst.FunctionDef, cst.ClassDef)) and placements(values, binding):
                        return False
    return True


def loader_class(values: "ModuleValues", cls: cst.ClassDef, depth: int = 0) -> bool:
    """``cls`` subclasses torch's ``DataLoader`` (directly or through classes of the file), and
    neither its body nor a function of the file it names may place a value on a device."""
    if depth > MAX_DEPTH or placements(values, cls):
        return False
    named = {n.value for n in traversal.walk(cls) if isinstance(n, cst.Name)}
    for statement in values.module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value in named and placements(values, statement):
            return False
    for base in cls.bases:
        if values.names(base.value) & DATALOADERS:
            return True
        if isinstance(base.value, cst.Name):
            reach = values.reach(base.value)
            if reach.why is None and len(reach.bindings) == 1 and isinstance(reach.bindings[0], cst.ClassDef) \
                    and loader_class(values, reach.bindings[0], depth + 1):
                return True
    return False
