"""Stage 1 of the engine: which codemods can possibly match a file, decided with the stdlib ``ast``.

CPython's parser is an order of magnitude faster than libcst's parse, and much faster again than
libcst's metadata and tree walks. So before a file is handed to libcst, one ``ast`` walk collects
a few facts about it (:class:`FileFacts`), and each codemod's *necessary condition* is checked on
them. A codemod whose condition fails cannot report or rewrite anything in the file; when no
codemod is left, libcst never sees the file.

Each condition must be necessary, never sufficient: it may say "maybe" for a file the codemod
then leaves alone, but it must never say "no" for a file where the codemod would report or
change something. The conditions rest on two facts of libcst's ``QualifiedNameProvider``:

- a qualified name starting with ``torch.`` needs an absolute ``import torch...`` or
  ``from torch... import`` somewhere in the file, or a name ``torch`` bound some other way (an
  unbound ``torch``, a relative import or a star import gives no such name);
- the last part of a qualified name is spelt in the file as an attribute (``nn.Linear``) or as
  an imported name (``from torch.nn import Linear as L``).

Where these facts leave a codemod possible, its condition looks for a real site with
:mod:`torchfix_device.ast_scan` (qualified names and ``nn.Module`` classes over-approximated),
mirroring the codemod's own test: TFD004, for one, needs ``self.x = [...]`` in a method of a class
that may be an ``nn.Module``, not only such a class.

A codemod without an entry in :data:`CONDITIONS` is always run (a new codemod is safe by
default). ``tests/test_candidates.py`` checks that results with and without this stage are the
same on every fixture.
"""

from __future__ import annotations

import ast
import bisect
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterator, NamedTuple, Sequence

from torchfix_device import ast_scan
from torchfix_device._cst import LEGACY_TENSOR_DTYPES
from torchfix_device.ast_scan import AstScan, first_line, walk_in_context
from torchfix_device.codemod import Codemod
from torchfix_device.codemods.cuda_amp import NAMES as AMP_NAMES
from torchfix_device.codemods.cuda_amp import OLD_MODULES as AMP_OLD_MODULES
from torchfix_device.codemods.factory_without_device import FACTORIES, MOVES
from torchfix_device.codemods.layer_built_in_forward import STATEFUL_LAYERS
from torchfix_device.codemods.legacy_loss_reduction_args import LOSS_CLASSES, LOSS_FUNCTIONS
from torchfix_device.codemods.tensor_attribute_not_buffer import TENSOR_FACTORIES, TENSOR_METHODS
from torchfix_device.codemods.torch_load_of_whole_model import MODULE_ATTRIBUTES, SAME_KIND_METHODS
from torchfix_device.codemods.torch_load_without_map_location import TORCH_LOAD
from torchfix_device.codemods.variable_wrapper import VARIABLE

FACTORY_NAMES = frozenset(q.rpartition(".")[2] for q in FACTORIES) | frozenset(LEGACY_TENSOR_DTYPES)
LEGACY_TYPE_NAMES = frozenset(LEGACY_TENSOR_DTYPES)
LOSS_NAMES = frozenset(LOSS_CLASSES) | frozenset(LOSS_FUNCTIONS)
DEVICE_AWARE_WORDS = ("device", ".to(", "cuda")
"""A function outside an ``nn.Module`` is only looked into by TFD003 when its text holds one."""


@dataclass
class FileFacts:
    """What one ``ast`` walk tells about a file."""

    text: str
    tree: ast.Module | None = None
    """The whole ``ast`` (for the site checks, which :class:`AstScan` makes precise)."""
    torch_imported: bool = False
    """An absolute import of ``torch`` or one of its submodules, anywhere in the file, or
    ``torch`` bound some other way (libcst names ``torch.zeros`` after ``torch = f()`` as spelt)."""
    names: set[str] = field(default_factory=set)
    """Attribute names and imported names (every dotted part): the possible last parts of a
    qualified name."""
    call_attrs: set[str] = field(default_factory=set)
    """``x.NAME(...)``: the method names called."""
    statement_call_attrs: set[str] = field(default_factory=set)
    """``x.NAME(...)`` as a whole statement (its result dropped)."""
    subscripted_attrs: set[str] = field(default_factory=set)
    """``x.NAME[...]``."""
    keywords: set[str] = field(default_factory=set)
    """Keyword argument names of calls."""
    function_names: set[str] = field(default_factory=set)
    has_class_with_bases: bool = False
    augassign_to_name_in_forward: bool = False
    """``name op= ...`` directly in a function called ``forward`` (not in a function nested
    in it)."""

    contexts: list[ast_scan.ContextNode] = field(default_factory=list)
    """Every node with its innermost class and function (walked once, for all checks)."""

    @cached_property
    def scan(self) -> AstScan:
        assert self.tree is not None
        return AstScan(self.tree, self.contexts)

    @cached_property
    def lines(self) -> list[str]:
        return ast_scan.source_lines(self.text)

    @cached_property
    def statement_starts(self) -> list[int]:
        """The first line of every top-level statement (its first decorator's for a decorated one)."""
        return [first_line(s) for s in self.tree.body] if self.tree is not None else []

    @cached_property
    def class_outlines(self) -> dict[int, ClassOutline]:
        """Index of each top-level class → its :class:`ClassOutline`."""
        if self.tree is None:
            return {}
        return {i: _outline(s, 1) for i, s in enumerate(self.tree.body) if isinstance(s, ast.ClassDef)}


def collect_facts(tree: ast.Module, text: str) -> FileFacts:
    facts = FileFacts(text, tree, contexts=walk_in_context(tree))
    for node, _, func in facts.contexts:
        kind = type(node)
        if kind is ast.Attribute:
            facts.names.add(node.attr)
        elif kind is ast.Name:
            facts.torch_imported |= node.id == "torch" and not isinstance(node.ctx, ast.Load)
        elif kind is ast.Call:
            if type(node.func) is ast.Attribute:
                facts.call_attrs.add(node.func.attr)
            facts.keywords.update(k.arg for k in node.keywords if k.arg)
        elif kind is ast.Expr:
            if type(node.value) is ast.Call and type(node.value.func) is ast.Attribute:
                facts.statement_call_attrs.add(node.value.func.attr)
        elif kind is ast.Subscript:
            if type(node.value) is ast.Attribute:
                facts.subscripted_attrs.add(node.value.attr)
        elif kind is ast.AugAssign:
            if type(node.target) is ast.Name and func is not None and func.name == "forward":
                facts.augassign_to_name_in_forward = True
        elif kind is ast.Import:
            for alias in node.names:
                facts.names.update(alias.name.split("."))
                facts.torch_imported |= alias.name.split(".")[0] == "torch"
        elif kind is ast.ImportFrom:
            for alias in node.names:
                facts.names.update(alias.name.split("."))
            if node.module:
                facts.names.update(node.module.split("."))
                facts.torch_imported |= node.level == 0 and node.module.split(".")[0] == "torch"
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            facts.function_names.add(node.name)
            facts.torch_imported |= node.name == "torch"
        elif kind is ast.ClassDef:
            facts.has_class_with_bases |= bool(node.bases)
            facts.torch_imported |= node.name == "torch"
        elif kind in BINDING_STATEMENTS:
            facts.torch_imported |= "torch" in _bound_names(node)
    return facts


BINDING_STATEMENTS = frozenset({ast.Global, ast.Nonlocal, ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping})


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return node.names
    name = node.rest if isinstance(node, ast.MatchMapping) else node.name
    return [name] if name else []


def _module_class_possible(f: FileFacts) -> bool:
    """An ``nn.Module`` subclass needs a base whose qualified name is ``torch.nn.*``: a torch
    import, and ``nn`` spelt as an imported name or an attribute."""
    return f.torch_imported and f.has_class_with_bases and "nn" in f.names


def _factory_site_possible(f: FileFacts) -> bool:
    if not (f.torch_imported and f.names & FACTORY_NAMES):
        return False
    in_function = bool(f.function_names) and any(w in f.text for w in DEVICE_AWARE_WORDS)
    return f.has_class_with_bases or in_function


def _torch_load_possible(f: FileFacts) -> bool:
    return f.torch_imported and "load" in f.names


# -- site checks: the codemod's own test, made coarser where only libcst can tell ------------------
def _is_factory_name(name: str) -> bool:
    """A ``torch`` factory, or a legacy constructor (CPU or CUDA: TFD003 tells them apart)."""
    if name in FACTORIES:
        return True
    parts = name.split(".")
    return parts[0] == "torch" and parts[-1] in LEGACY_TYPE_NAMES and (len(parts) == 2 or parts[1:-1] == ["cuda"])


def _has_star_args(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def _has_keyword(call: ast.Call, name: str) -> bool:
    return any(k.arg == name for k in call.keywords)


def _factory_sites(f: FileFacts) -> Iterator[ast.Call]:
    """TFD003: a factory call without ``device=``, not moved at once, in a class that may be an
    ``nn.Module`` (outside ``__init__``) or in a function that mentions devices."""
    if not _factory_site_possible(f):
        return
    scan, moved, aware = f.scan, set(), {}

    def device_aware(func) -> bool:
        if id(func) not in aware:
            text = ast_scan.function_text(func, f.lines)
            aware[id(func)] = any(w in text for w in DEVICE_AWARE_WORDS)
        return aware[id(func)]

    for node, cls, func in f.contexts:
        if isinstance(node, ast.Attribute) and node.attr in MOVES and isinstance(node.value, ast.Call):
            moved.add(id(node.value))  # seen before the call itself (preorder)
        if not isinstance(node, ast.Call) or id(node) in moved:
            continue
        if _has_keyword(node, "device") or _has_star_args(node):
            continue
        if not (scan.opaque or any(_is_factory_name(q) for q in scan.qualified(node.func))):
            continue
        if func is not None and func.name == "__init__":
            if device_aware(func):  # in an nn.Module's __init__ never; elsewhere only device-aware
                yield node
        elif scan.is_module_class(cls) or (func is not None and device_aware(func)):
            yield node


def _self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


CONTAINER_DISPLAYS = (ast.List, ast.ListComp, ast.Dict, ast.DictComp)


def _container_site(f: FileFacts) -> bool:
    """TFD004: in a method of a possible ``nn.Module`` class, ``self.x = <list or dict>`` (a
    display, a comprehension, ``list()``, or a local bound to a display in the same function), or
    ``[layer] * n``."""
    if not _module_class_possible(f):
        return False
    scan = f.scan
    for node, cls, func in f.contexts:
        if func is None or not scan.is_module_class(cls):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _self_attr(node.targets[0]):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None and _self_attr(node.target):
            value = node.value
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            if isinstance(node.left, ast.List) or isinstance(node.right, ast.List):
                return True
            continue
        else:
            continue
        if _may_be_container(value, func):
            return True
    return False


def _may_be_container(value: ast.expr, func) -> bool:
    if isinstance(value, CONTAINER_DISPLAYS):
        return True
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        return (ast_scan.full_name(value.func) or "").rpartition(".")[2] in ("list", "dict")
    if isinstance(value, ast.Name):
        return any(
            isinstance(bound, CONTAINER_DISPLAYS) for bound in _values_bound_to(value.id, func)
        )
    return False


def _values_bound_to(name: str, func) -> list[ast.expr]:
    """The values ``name = value`` (or ``name: T = value``) binds anywhere in ``func``."""
    values: list[ast.expr] = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values.append(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name) and node.target.id == name:
                values.append(node.value)
    return values


def _tensor_attribute_site(f: FileFacts) -> bool:
    """TFD007: ``self.x = <a tensor>`` in the ``__init__`` of a possible ``nn.Module`` class."""
    if not (_module_class_possible(f) and "__init__" in f.function_names):
        return False
    scan = f.scan
    for node, cls, func in f.contexts:
        if not (isinstance(node, ast.ClassDef) and scan.is_module_class(node)):
            continue
        for init in node.body:
            if isinstance(init, ast_scan.FUNCTIONS) and init.name == "__init__":
                for stmt in ast.walk(init):
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _self_attr(stmt.targets[0]):
                        if _may_be_tensor(stmt.value, init, scan, frozenset()):
                            return True
    return False


def _may_be_tensor(value: ast.expr, init, scan: AstScan, seen: frozenset[str]) -> bool:
    """TFD007's ``_is_tensor`` with every binding of a local name allowed (it needs all)."""
    if isinstance(value, ast.Call):
        if scan.opaque or any(q in TENSOR_FACTORIES or _is_factory_name(q) for q in scan.qualified(value.func)):
            return True
        if isinstance(value.func, ast.Attribute) and value.func.attr in TENSOR_METHODS:
            return _may_be_tensor(value.func.value, init, scan, seen)
        return False
    if isinstance(value, ast.BinOp):
        return _may_be_tensor(value.left, init, scan, seen) or _may_be_tensor(value.right, init, scan, seen)
    if isinstance(value, ast.UnaryOp):
        return _may_be_tensor(value.operand, init, scan, seen)
    if isinstance(value, ast.Subscript):
        return _may_be_tensor(value.value, init, scan, seen)
    if isinstance(value, ast.Name) and value.id not in seen:
        return any(_may_be_tensor(v, init, scan, seen | {value.id}) for v in _values_bound_to(value.id, init))
    return False


def _in_module_forward(scan: AstScan, cls, func) -> bool:
    """Directly in a method ``forward`` of a class that may be an ``nn.Module``."""
    return (
        func is not None and func.name == "forward" and scan.is_module_class(cls)
        and any(stmt is func for stmt in cls.body)
    )


def _is_stateful_layer_name(name: str) -> bool:
    parts = name.split(".")
    return parts[:2] == ["torch", "nn"] and parts[-1] in STATEFUL_LAYERS and (len(parts) == 3 or parts[2] == "modules")


def _layer_in_forward_site(f: FileFacts) -> bool:
    """TFD013: a stateful ``torch.nn`` layer built in a module's ``forward``."""
    if not (_module_class_possible(f) and "forward" in f.function_names and f.names & STATEFUL_LAYERS):
        return False
    scan = f.scan
    for node, cls, func in f.contexts:
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            if _in_module_forward(scan, cls, func) and (
                scan.opaque or any(_is_stateful_layer_name(q) for q in scan.qualified(node.func))
            ):
                return True
    return False


def _inplace_in_forward_sites(f: FileFacts) -> Iterator[ast.AST]:
    """TFD012: ``name op= ...`` in a module's ``forward``."""
    if not (_module_class_possible(f) and f.augassign_to_name_in_forward):
        return
    scan = f.scan
    for node, cls, func in f.contexts:
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and _in_module_forward(scan, cls, func):
            yield node


def _cuda_call_sites(f: FileFacts) -> Iterator[ast.AST]:
    """TFD001: ``x.cuda(...)`` (a guard or conditional it rewrites holds one)."""
    if "cuda" not in f.call_attrs:
        return
    for node, _, _ in f.contexts:
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "cuda":
            yield node


def _dropped_move_sites(f: FileFacts) -> Iterator[ast.AST]:
    """TFD002: ``x.cuda(...)`` / ``x.to(...)`` as a statement."""
    if not f.statement_call_attrs & {"cuda", "to"}:
        return
    for node, _, _ in f.contexts:
        if type(node) is ast.Expr and type(node.value) is ast.Call and type(node.value.func) is ast.Attribute:
            if node.value.func.attr in ("cuda", "to"):
                yield node


def _amp_possible(f: FileFacts) -> bool:
    return f.torch_imported and "amp" in f.names and bool(f.names & set(AMP_NAMES))


AMP_OLD_NAMES = frozenset(f"{module}.{name}" for module in AMP_OLD_MODULES for name in AMP_NAMES)


def _cuda_amp_sites(f: FileFacts) -> Iterator[ast.AST]:
    """TFD011: a call to ``torch.cuda.amp.autocast`` / ``GradScaler``, and the imports from
    ``torch.cuda.amp`` it moves to ``torch.amp``."""
    if not _amp_possible(f):
        return
    scan = f.scan
    for node, _, _ in f.contexts:
        if isinstance(node, ast.Call) and scan.may_name(node.func, AMP_OLD_NAMES):
            yield node
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.cuda.amp" and not node.level:
            yield node


def _has_site(sites: Callable[[FileFacts], Iterator[ast.AST]]) -> Callable[[FileFacts], bool]:
    return lambda f: next(sites(f), None) is not None


def _calls_to(f: FileFacts, names: set[str], accept: Callable[[ast.Call], bool]) -> bool:
    return _has_site(_calls_to_sites(names, accept))(f)


def _load_without_map_location(call: ast.Call) -> bool:
    """TFD005's own test: no ``map_location=``, fewer than two positional arguments, no ``**``."""
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    return not _has_keyword(call, "map_location") and len(positional) < 2 and all(k.arg is not None for k in call.keywords)


def _weights_only_defaulted(call: ast.Call) -> bool:
    """TFD015's own test: ``weights_only`` left to torch's default."""
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    return (
        all(k.arg is not None for k in call.keywords) and not _has_keyword(call, "weights_only")
        and not _has_keyword(call, "pickle_module") and len(positional) < 3
    )


def _loaded_model_site(f: FileFacts) -> bool:
    """TFD015: a ``torch.load`` result — directly, through subscripts and ``.to()``-like calls,
    or through names bound to one (any number of hops) — called or given a module-only attribute
    (``.eval()``, ``.parameters()``)."""
    if not _torch_load_possible(f):
        return False
    scan = f.scan
    loads = {
        id(node) for node, _, _ in f.contexts
        if isinstance(node, ast.Call) and _weights_only_defaulted(node) and scan.may_name(node.func, TORCH_LOAD)
    }
    if not loads:
        return False
    tainted: set[str] = set()

    def is_loaded(expr: ast.AST) -> bool:
        while True:
            if isinstance(expr, ast.Subscript):
                expr = expr.value
            elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_KIND_METHODS:
                expr = expr.func.value
            else:
                break
        return id(expr) in loads or (isinstance(expr, ast.Name) and expr.id in tainted)

    assigns = [n for n, _, _ in f.contexts if isinstance(n, ast.Assign)]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            names = {t.id for t in node.targets if isinstance(t, ast.Name)} - tainted
            if names and is_loaded(node.value):
                tainted |= names
                changed = True
    for node, _, _ in f.contexts:
        if isinstance(node, ast.Call) and is_loaded(node.func):
            return True
        if isinstance(node, ast.Attribute) and node.attr in MODULE_ATTRIBUTES and is_loaded(node.value):
            return True
    return False


def _legacy_reduction_call(call: ast.Call) -> bool:
    """TFD010's own test on the arguments: ``size_average=`` / ``reduce=``, or
    ``reduction="elementwise_mean"``."""
    for keyword in call.keywords:
        if keyword.arg in ("size_average", "reduce"):
            return True
        if keyword.arg == "reduction" and isinstance(keyword.value, ast.Constant) and keyword.value.value == "elementwise_mean":
            return True
    return False


def _legacy_reduction_sites(f: FileFacts) -> Iterator[ast.AST]:
    """TFD010: a ``torch.nn`` loss class or ``torch.nn.functional`` loss called with a legacy
    reduction argument."""
    if not (f.torch_imported and f.names & LOSS_NAMES):
        return
    if not (f.keywords & {"size_average", "reduce"} or "elementwise_mean" in f.text):
        return
    scan = f.scan
    for node, _, _ in f.contexts:
        if isinstance(node, ast.Call) and _legacy_reduction_call(node) and (
            scan.opaque or any(q.startswith("torch.nn.") and q.rpartition(".")[2] in LOSS_NAMES for q in scan.qualified(node.func))
        ):
            yield node


def _is_cuda_legacy_type(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "torch" and parts[1:-1] == ["cuda"] and parts[-1] in LEGACY_TYPE_NAMES


def _cuda_tensor_type_site(f: FileFacts) -> bool:
    """TFD008: an expression naming ``torch.cuda.FloatTensor`` or another CUDA tensor type (called,
    passed to ``.type()`` or used as a value)."""
    if not (f.torch_imported and "cuda" in f.names and f.names & LEGACY_TYPE_NAMES):
        return False
    scan = f.scan
    return any(
        isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        and (scan.opaque or any(_is_cuda_legacy_type(q) for q in scan.qualified(node)))
        for node, _, _ in f.contexts
    )


def _data_zero_site(f: FileFacts) -> bool:
    """TFD006: ``x.data[0]`` (the literal integer 0)."""
    if "data" not in f.subscripted_attrs:
        return False
    for node, _, _ in f.contexts:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "data":
            index = node.slice
            if isinstance(index, ast.Tuple) and len(index.elts) == 1:
                index = index.elts[0]
            if isinstance(index, ast.Constant) and type(index.value) is int and index.value == 0:
                return True
    return False


CONDITIONS: dict[str, Callable[[FileFacts], bool]] = {
    # cuda-call: a `.cuda(...)` call (guards and conditionals only go with a rewritten one)
    "TFD001": lambda f: "cuda" in f.call_attrs,
    # dropped-move: `x.cuda()` / `x.to(...)` as a statement
    "TFD002": lambda f: bool(f.statement_call_attrs & {"cuda", "to"}),
    # factory-without-device: a torch factory or legacy constructor call without `device=` in a
    # module class (not its __init__) or a device-aware function
    "TFD003": _has_site(_factory_sites),
    # unregistered-layer-container: `self.x = [...]` / `{...}` in a module class's method
    "TFD004": _container_site,
    # torch-load-without-map-location: a `torch.load` call without `map_location=`
    "TFD005": lambda f: _torch_load_possible(f) and _calls_to(f, TORCH_LOAD, _load_without_map_location),
    # loss-data-index: `x.data[0]`
    "TFD006": _data_zero_site,
    # tensor-attribute-not-buffer: `self.x = <tensor>` in a module class's `__init__`
    "TFD007": _tensor_attribute_site,
    # cuda-tensor-type: an expression naming `torch.cuda.FloatTensor` and friends
    "TFD008": _cuda_tensor_type_site,
    # variable-wrapper: a `torch.autograd.Variable(...)` call
    "TFD009": lambda f: f.torch_imported and "Variable" in f.names and _calls_to(f, VARIABLE, _any_call),
    # legacy-loss-reduction-args: a loss given size_average=, reduce= or reduction="elementwise_mean"
    "TFD010": _has_site(_legacy_reduction_sites),
    # cuda-amp: `torch.cuda.amp.autocast` / `GradScaler`
    "TFD011": _amp_possible,
    # inplace-op-in-forward: `name op= ...` in a module's `forward`
    "TFD012": _has_site(_inplace_in_forward_sites),
    # layer-built-in-forward: a stateful torch.nn layer called in a module's `forward`
    "TFD013": _layer_in_forward_site,
    # set-default-cuda-tensor-type: `torch.set_default_tensor_type`
    "TFD014": lambda f: f.torch_imported and "set_default_tensor_type" in f.names,
    # torch-load-of-whole-model: a `torch.load` call whose result is called or used as a module
    "TFD015": _loaded_model_site,
}


def _any_call(call: ast.Call) -> bool:
    return True


def _calls_to_sites(names: set[str], accept: Callable[[ast.Call], bool]) -> Callable[[FileFacts], Iterator[ast.AST]]:
    """Every call :func:`_calls_to` accepts (the calls a codemod acts on, and maybe more)."""

    def sites(f: FileFacts) -> Iterator[ast.AST]:
        scan = f.scan
        for node, _, _ in f.contexts:
            if isinstance(node, ast.Call) and accept(node) and scan.may_name(node.func, names):
                yield node

    return sites


SITES: dict[str, Callable[[FileFacts], Iterator[ast.AST]]] = {
    # Codemods whose findings and rewrites happen only at these nodes (or in the statement just
    # around one: TFD001's guards), and whose visit of one top-level statement or class member
    # does not depend on the others: the runner lets them skip the top-level statements and
    # class members without a site (no visit, no rebuild). Checking mode visits those anyway
    # and asserts that nothing is reported or changed there.
    "TFD001": _cuda_call_sites,
    "TFD002": _dropped_move_sites,
    "TFD003": _factory_sites,
    "TFD010": _legacy_reduction_sites,
    "TFD011": _cuda_amp_sites,
    "TFD012": _inplace_in_forward_sites,
    "TFD005": _calls_to_sites(TORCH_LOAD, _load_without_map_location),
    "TFD015": _calls_to_sites(TORCH_LOAD, _weights_only_defaulted),
}


class StatementSites(NamedTuple):
    """Where the sites of one codemod are, by statement (as CPython's ``ast`` counts them)."""

    wanted: set[int]
    """Indices of the top-level statements holding a site."""
    starts: list[int]
    """The first line of every top-level statement (its first decorator's for a decorated one)."""
    members: dict[int, tuple[set[int], int]]
    """For a top-level class holding sites only in its members (none in its decorators, bases
    or header): its index → the indices of the members (statements of its body) holding one,
    and the number of members."""
    inner: dict[tuple[int, int], tuple[set[int], int]] = {}
    """The same one level down, for a class that is such a member: (index of the top-level
    class, index of the member) → its members holding a site, and their number."""


def statements_with_sites(facts: FileFacts, code: str) -> StatementSites | None:
    """The statements holding a site of the codemod ``code``. A codemod without a site
    function gets every top-level index: it visits everything, and the lines still let it
    compute positions one statement at a time."""
    if facts.tree is None:
        return None
    starts = facts.statement_starts
    sites = SITES.get(code)
    if sites is None:
        return StatementSites(set(range(len(starts))), starts, {}, {})
    lines_by_statement: dict[int, list[int]] = {}
    for node in sites(facts):
        index = bisect.bisect_right(starts, node.lineno) - 1
        if index >= 0:
            lines_by_statement.setdefault(index, []).append(node.lineno)
    members: dict[int, tuple[set[int], int]] = {}
    inner: dict[tuple[int, int], tuple[set[int], int]] = {}
    for index, lines in lines_by_statement.items():
        outline = facts.class_outlines.get(index)
        by_member = _site_lines_by_member(outline, lines)
        if by_member is None:
            continue
        assert outline is not None
        members[index] = set(by_member), len(outline.member_lines)
        for member, member_lines in by_member.items():
            nested_outline = outline.classes.get(member)
            nested = _site_lines_by_member(nested_outline, member_lines)
            if nested is not None:
                inner[index, member] = set(nested), len(nested_outline.member_lines)  # type: ignore[union-attr]
    return StatementSites(set(lines_by_statement), starts, members, inner)


class ClassOutline(NamedTuple):
    """What a codemod needs of a class of stage 1's tree to tell its members apart: the first
    line of each statement of its body and, for a member that is a class itself, its outline
    (one level down only: member skipping goes no deeper)."""

    member_lines: list[int]
    classes: dict[int, "ClassOutline"]


def _outline(cls: ast.ClassDef, depth: int) -> ClassOutline:
    classes = (
        {i: _outline(s, depth - 1) for i, s in enumerate(cls.body) if isinstance(s, ast.ClassDef)} if depth else {}
    )
    return ClassOutline([first_line(s) for s in cls.body], classes)


def _site_lines_by_member(outline: ClassOutline | None, lines: list[int]) -> dict[int, list[int]] | None:
    """For a class with ``outline`` whose sites are on ``lines``: the index of each statement
    of its body holding one → the lines of its sites; None for no class (no outline), or when
    a site is in the class's own lines (a decorator, a base)."""
    if outline is None:
        return None
    by_member: dict[int, list[int]] = {}
    for line in lines:
        member = bisect.bisect_right(outline.member_lines, line) - 1
        if member < 0:
            return None
        by_member.setdefault(member, []).append(line)
    return by_member


def parse_facts(text: str) -> FileFacts | None:
    """The facts of ``text``, or None when CPython cannot parse it (the caller then runs the
    full engine, which reports the error as before)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text, "<stage1>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return collect_facts(tree, text)
    except RecursionError:
        return None


def candidate_codemods(facts: FileFacts, codemods: Sequence[type[Codemod]]) -> list[type[Codemod]]:
    """The codemods of ``codemods`` that may match the file ``facts`` describe, in order."""
    return [c for c in codemods if CONDITIONS.get(c.code, _always)(facts)]


def _always(facts: FileFacts) -> bool:
    return True
