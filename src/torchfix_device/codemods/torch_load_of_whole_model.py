from __future__ import annotations

import ast
from typing import Iterator
import libcst as cst
from libcst.metadata import Assignment, PositionProvider
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts, calls_to, has_keyword
from torchfix_device.codemods.torch_load_without_map_location import torch_load_possible
from torchfix_device.codemods.torch_load_without_map_location import LOAD, TORCH_LOAD
from torchfix_device.facts.checkpoints import checkpoint_saves
from torchfix_device.facts.kinds import module_classes
from torchfix_device.torch_api import is_torch_module_class

MODULE_ATTRIBUTES = frozenset(
    {
        "eval", "train", "forward", "parameters", "named_parameters", "buffers", "named_buffers",
        "children", "named_children", "modules", "named_modules", "state_dict", "load_state_dict",
        "zero_grad", "apply", "register_buffer", "register_parameter", "register_forward_hook",
        "register_forward_pre_hook", "register_full_backward_hook", "add_module",
    }
)
"""Attributes an ``nn.Module`` (or an optimizer) has and a state dict or tensor has not."""
PLAIN_PROPERTIES = frozenset(
    {
        # `torch.Tensor`'s public attributes that are not methods (`dir(torch.Tensor)`, torch 2.13,
        # and `names`, `volatile` of older releases; tests/test_legacy_idioms.py checks the list)
        "H", "T", "data", "device", "dtype", "grad", "grad_dtype", "grad_fn", "imag", "is_cpu", "is_cuda",
        "is_ipu", "is_leaf", "is_maia", "is_meta", "is_mkldnn", "is_mps", "is_mtia", "is_nested",
        "is_quantized", "is_sparse", "is_sparse_csr", "is_vulkan", "is_xla", "is_xpu", "itemsize", "layout",
        "mH", "mT", "name", "names", "nbytes", "ndim", "output_nr", "real", "requires_grad", "retains_grad",
        "shape", "volatile",
        # the numbers', a `torch.device`'s and a `torch.dtype`'s (dicts, lists, tuples and strings have none)
        "numerator", "denominator", "type", "index", "is_complex", "is_floating_point", "is_signed",
    }
)
"""Attributes, not called, of what ``weights_only=True`` unpickles (tensors, numbers, containers,
devices, dtypes): any other attribute read on a loaded value is an object's (an
``argparse.Namespace`` saved with the data)."""
SAME_KIND_METHODS = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16"})
"""Methods that return an object of the same kind (a module stays a module)."""
MAX_HOPS = 3
"""How many assignments and subscripts a loaded object is followed through."""
SAVE_DISTANCE = 4
"""How many statements before a load its ``torch.save`` may stand (same block, straight line)."""


class TorchLoadOfWholeModel(Codemod):
    """
    ## What it does
    Finds `torch.load(...)` calls whose result is used as a model — called like one
    (`net(x)`), or given a method only an `nn.Module` (or an optimizer) has: `.eval()`,
    `.train()`, `.parameters()`, `.state_dict()`, `.load_state_dict(...)`, `.forward(...)`, … —
    directly, through `.to(...)`/`.cuda()`/`.float()` chains, through a variable, or through a
    checkpoint entry (`ckpt["model"].eval()`), or unpacked into the very names a
    `torch.save([model, criterion, optimizer], f)` of the file saves whole (the program's own
    checkpoint of objects, an optimizer among them), or with an attribute read that no tensor,
    number or container has (`data["settings"].max_len`: a pickled `argparse.Namespace`). With `--unsafe-fixes` it adds
    `weights_only=False` to such calls. Also a `torch.load` of a string literal path to which
    one of the few statements just before it, in the same block, saves a model
    (`torch.save(net, "net_all.pth")` then `net2 = torch.load("net_all.pth")`, `net` an instance
    of a `torch.nn` class or of a class of the file subclassing one): there `apply` adds it.

    ## Why is this bad?
    Legacy code saved whole models with `torch.save(model, path)`: a pickle of the class. Since
    torch 2.6, `torch.load` defaults to `weights_only=True`, which only unpickles tensors and
    plain containers, so loading such a file fails after an upgrade with
    `_pickle.UnpicklingError: Weights only load failed`. A `state_dict` (a dict of tensors)
    still loads.

    ## Example
    ```python
    model = torch.load("model.pt")
    model.eval()
    ```

    ## Use instead
    ```python
    model = torch.load("model.pt", weights_only=False)  # only for files you trust
    model.eval()
    ```
    Better, once: load it like this, save `model.state_dict()`, and from then on build the model
    in code and `model.load_state_dict(torch.load(path))` with the safe default.

    ## Not rewritten
    Loads whose result is a state dict or a tensor (`net.load_state_dict(torch.load(p))`,
    `w = torch.load(p); w.to(device)`), results only returned or passed to another function
    (no evidence here what they are), calls that already pass `weights_only`, pass
    `pickle_module` (torch then defaults to `weights_only=False` itself) or forward `*args` or
    `**kwargs` (the caller's choice: `def load(*a, **k): return torch.load(*a, **k)`), and every
    other `load` (`torch.jit.load`, `pickle.load`). A name rebound later is followed only up to
    its next binding.

    ## Fix safety
    Unsafe, and only reported unless `--unsafe-fixes` is given: `weights_only=False` runs
    arbitrary code from the file while unpickling it. It restores what the code did on torch
    before 2.6; add it only for files you produced or trust. The finding itself is worth acting
    on either way: the line fails on torch 2.6 and later as it stands.

    Safe where the program itself has just written the file (the save a few straight-line
    statements before the load, same literal path, a model object): unpickling it runs only the
    classes of the program that wrote it, and the load fails on torch >= 2.6 without it.
    """

    code = "TFD015"
    name = "torch-load-of-whole-model"
    summary = "`torch.load` of a pickled whole model fails on torch >= 2.6 (`weights_only=True` default)"
    safe = True
    triggers = ("load",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """A ``torch.load`` result — directly, through subscripts and ``.to()``-like calls, or
        through names bound to one (any number of hops) — called or given a module-only
        attribute (``.eval()``, ``.parameters()``)."""
        return _loaded_model_site(facts) or (torch_load_possible(facts) and (_saved_then_loaded(facts) or _saved_together(facts)))

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """The ``torch.load`` calls leaving ``weights_only`` to torch's default."""
        return calls_to(facts, TORCH_LOAD, _weights_only_defaulted)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not (self.qualified_names(original_node.func, ending_in=LOAD) & TORCH_LOAD):
            return updated_node
        if not self._weights_only_is_defaulted(original_node):
            return updated_node
        saved = self._saved_just_before(original_node)
        if saved is not None:
            message = (
                f"`torch.load` reads the whole model {saved} just before: torch >= 2.6 loads with "
                "`weights_only=True` and refuses a pickled model; the file is this program's own output, "
                "so `weights_only=False` trusts nothing the program does not already run"
            )
            if self.report(original_node, message):
                return nodes.add_keyword_arg(updated_node, "weights_only", "False")
            return updated_node
        evidence = self._model_use(original_node, MAX_HOPS)
        if evidence is None:
            return updated_node
        message = (
            f"`torch.load` result is used as a model ({evidence}): torch >= 2.6 loads with "
            "`weights_only=True` and refuses a pickled model or object; `weights_only=False` only for trusted "
            "files, or save a `state_dict` instead"
        )
        if self.report(original_node, message, safe=False):
            return nodes.add_keyword_arg(updated_node, "weights_only", "False")
        return updated_node

    def _saved_just_before(self, call: cst.Call) -> str | None:
        """How the program saved, in one of the few statements just before the load's in the same
        block, a model to the literal path the load reads (``torch.save(net, "net.pth")``, ``net``
        an instance of a ``torch.nn`` class or of a class of the file subclassing one); None
        otherwise."""
        path = _literal_path(call)
        line = self.values.enclosing(call, cst.SimpleStatementLine)
        found = self.values.block_of(line) if path is not None and line is not None else None
        if found is None:
            return None
        body, index = found
        for statement in reversed(body[max(0, index - SAVE_DISTANCE):index]):
            if not isinstance(statement, cst.SimpleStatementLine):
                return None  # a compound statement between them may not run, or run otherwise
            for small in statement.body:
                save = small.value if isinstance(small, cst.Expr) else None
                if isinstance(save, cst.Call) and "torch.save" in self.values.torch_names(save.func) \
                        and _literal_path(save, 1) == path and self._a_model(save):
                    return f"this program saved to `{path}` (`{nodes.short_text(nodes.code_of(save))}`)"
        return None

    def _a_model(self, save: cst.Call) -> bool:
        positional = nodes.positional_args(save)
        if not positional or not isinstance(positional[0].value, cst.Name):
            return False
        found = list(self.values.values_of(positional[0].value))
        classes = {c.name.value for c in module_classes(self.values).values()}
        for value in found:
            if not isinstance(value, cst.Call):
                return False
            names = self.values.names(value.func)
            if not (any(is_torch_module_class(q) for q in names) or (isinstance(value.func, cst.Name) and value.func.value in classes)):
                return False
        return bool(found)

    @staticmethod
    def _weights_only_is_defaulted(call: cst.Call) -> bool:
        """True when the call leaves ``weights_only`` to torch's default (True since 2.6)."""
        if nodes.has_star_args(call):
            return False  # forwarded `*args`/`**kwargs` may hold `weights_only` or `pickle_module`
        if nodes.keyword_arg(call, "weights_only") is not None or nodes.keyword_arg(call, "pickle_module") is not None:
            return False
        return len(nodes.positional_args(call)) < 3  # the third positional is `pickle_module`

    # -- following the loaded object ------------------------------------------------------------
    def _model_use(self, node: cst.CSTNode, hops: int) -> str | None:
        """How the value of ``node`` is used as a model, or None when there is no such evidence."""
        parent = self.parent_of(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            return "it is called"
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return self._attribute_use(parent, hops)
        if hops and isinstance(parent, cst.Subscript) and parent.value is node:
            return self._model_use(parent, hops - 1)
        if hops and isinstance(parent, cst.Assign) and parent.value is node:
            return self._use_of_assigned_name(parent, hops - 1) or self._saved_together(parent)
        return None

    def _saved_together(self, assign: cst.Assign) -> str | None:
        """``model, criterion, optimizer = torch.load(f)`` where the file has
        ``torch.save([model, criterion, optimizer], f)``: its own checkpoint of whole objects
        (:mod:`~torchfix_device.facts.checkpoints`)."""
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        first = target.elements[0].value if isinstance(target, (cst.Tuple, cst.List)) and target.elements else None
        found = checkpoint_saves(self.values, first) if first is not None else None
        if found is None:
            return None
        save = self.values.parent(self.values.parent(found[1][0]))
        return f"it unpacks the objects `{nodes.short_text(nodes.code_of(save))}` saves whole"

    def _attribute_use(self, attribute: cst.Attribute, hops: int) -> str | None:
        name = attribute.attr.value
        if name in MODULE_ATTRIBUTES:
            return f"`.{name}`"
        call = self.parent_of(attribute)
        if not (isinstance(call, cst.Call) and call.func is attribute) and _an_object_attribute(name):
            return f"an object: `.{name}` is read, which no tensor, number or container has"
        if name in SAME_KIND_METHODS and isinstance(call, cst.Call) and call.func is attribute:
            return self._model_use(call, hops)  # `.to(device)` returns the same kind of object
        return None

    def _use_of_assigned_name(self, assign: cst.Assign, hops: int) -> str | None:
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return None
        target = assign.targets[0].target
        for access_node in self._uses_until_rebound(target):
            evidence = self._model_use(access_node, hops)
            if evidence is not None:
                return evidence
        return None

    def _uses_until_rebound(self, target: cst.Name) -> list[cst.Name]:
        """The names reading ``target``'s binding, after it and before the name's next binding
        in the same scope (scopes are not flow-sensitive; positions stand in for the flow)."""
        scope = self.local_scope_of(target)
        if scope is None:
            return []
        start = self._line_of(target)
        later_bindings = [
            (self._line_of(a.node), a.node)
            for a in scope.assignments[target.value]
            if isinstance(a, Assignment) and a.node is not target and self._line_of(a.node) > start
        ]
        end, rebinding = min(later_bindings, key=lambda found: found[0], default=(None, None))
        # `model = model.to(device)`: the read on the right comes before the new binding
        before_rebinding = self._read_by_rebinding(rebinding) if rebinding is not None else set()
        uses = []
        for assignment in scope.assignments[target.value]:
            if assignment.node is not target:
                continue
            for access in assignment.references:
                line = self._line_of(access.node)
                if isinstance(access.node, cst.Name) and line >= start and (end is None or line < end or id(access.node) in before_rebinding):
                    uses.append(access.node)
        # in source order: `references` is a set, and the first use found names the evidence in
        # the message, which must read the same in every run
        return sorted(uses, key=lambda name: (self._line_of(name), self.get_metadata(PositionProvider, name).start.column))

    def _read_by_rebinding(self, target: cst.CSTNode) -> set[int]:
        """``id`` of every node in the value of the plain assignment that binds ``target``."""
        assign = self.parent_of(self.parent_of(target) or target)
        if not isinstance(assign, cst.Assign):
            return set()
        return {id(n) for n in traversal.walk(assign.value)}

    def _line_of(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line


# -- stage 1 ---------------------------------------------------------------------------------
def _weights_only_defaulted(call: ast.Call) -> bool:
    """The codemod's own test: ``weights_only`` left to torch's default."""
    return (
        all(k.arg is not None for k in call.keywords) and not has_keyword(call, "weights_only")
        and not has_keyword(call, "pickle_module") and len(call.args) < 3
        and not any(isinstance(a, ast.Starred) for a in call.args)
    )


def _loaded_model_site(f: FileFacts) -> bool:
    if not torch_load_possible(f):
        return False
    loads = {id(node) for node in calls_to(f, TORCH_LOAD, _weights_only_defaulted)}
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
    called = {id(node.func) for node, _, _ in f.contexts if isinstance(node, ast.Call)}
    for node, _, _ in f.contexts:
        if isinstance(node, ast.Call) and is_loaded(node.func):
            return True
        if isinstance(node, ast.Attribute) and is_loaded(node.value) and (
            node.attr in MODULE_ATTRIBUTES or (id(node) not in called and _an_object_attribute(node.attr))
        ):
            return True
    return False


def _an_object_attribute(name: str) -> bool:
    """An attribute, read without a call, that nothing ``weights_only=True`` loads has (a
    private ``_name`` may be a tensor's own: ``_version``)."""
    return name not in PLAIN_PROPERTIES and not name.startswith("_")


def _literal_path(call: cst.Call, index: int = 0) -> str | None:
    """The plain string literal a call gives as its ``index``-th positional argument."""
    positional = nodes.positional_args(call)
    if len(positional) <= index or not isinstance(positional[index].value, cst.SimpleString):
        return None
    value = positional[index].value.evaluated_value
    return value if isinstance(value, str) else None


def _saved_then_loaded(f: FileFacts) -> bool:
    """A ``torch.save`` to a string literal that a ``torch.load`` of the file reads."""
    saved = {
        n.args[1].value for n in calls_to(f, frozenset({"torch.save"}), lambda c: True)
        if len(n.args) > 1 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)
    }
    return bool(saved) and any(
        n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value in saved
        for n in calls_to(f, TORCH_LOAD, _weights_only_defaulted)
    )


def _saved_together(f: FileFacts) -> bool:
    """A ``torch.save`` of a list or tuple of names that a ``torch.load`` is unpacked into."""
    def names(node: ast.AST) -> tuple[str, ...] | None:
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and all(isinstance(e, ast.Name) for e in node.elts):
            return tuple(e.id for e in node.elts)  # type: ignore[attr-defined]
        return None

    saved = {names(n.args[0]) for n in calls_to(f, frozenset({"torch.save"}), lambda c: bool(c.args))} - {None}
    if not saved:
        return False
    loads = {id(n) for n in calls_to(f, TORCH_LOAD, _weights_only_defaulted)}
    return any(
        isinstance(n, ast.Assign) and id(n.value) in loads and len(n.targets) == 1 and names(n.targets[0]) in saved
        for n, _, _ in f.contexts
    )
