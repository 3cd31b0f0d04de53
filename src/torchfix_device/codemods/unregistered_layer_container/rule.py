from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from torchfix_device.syntax import imports
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter import scan as ast_scan
from torchfix_device.prefilter.candidates import FileFacts, is_self_attribute, module_class_possible, values_bound_to
from torchfix_device.codemods.unregistered_layer_container.containers import Attr, ContainerFinder, Site
from torchfix_device.facts.layers import (
    LAYER,
    NESTED,
    NONE,
    OPAQUE,
    OTHER,
    PARAM,
    REGISTERED,
    UNKNOWN,
    Element,
    LayerEvidence,
)
from torchfix_device.facts.layers import (  # re-exported: the tests check these tables here
    NN_NON_MODULE_CLASSES as NN_NON_MODULE_CLASSES,
    NN_PARAMETER_CLASSES as NN_PARAMETER_CLASSES,
    NON_LAYER_MODULES as NON_LAYER_MODULES,
    TORCH_MAY_BE_MODULE as TORCH_MAY_BE_MODULE,
)
from torchfix_device.syntax.bindings import from_import_of
from torchfix_device.torch_api import DICT_CONTAINER_ATTRS, NN_MODULE_ATTRS

# The container classes, by element kind and container kind.
CONTAINER = {(LAYER, "list"): "ModuleList", (LAYER, "dict"): "ModuleDict",
             (PARAM, "list"): "ParameterList", (PARAM, "dict"): "ParameterDict"}
# Methods of list/dict that the container lacks (torch 2.x; checked by the tests).
UNSUPPORTED_METHODS = {
    "ModuleList": {"clear", "copy", "count", "index", "remove", "reverse", "sort"},
    "ModuleDict": {"copy", "fromkeys", "get", "popitem", "setdefault"},
    "ParameterList": {"clear", "copy", "count", "index", "insert", "pop", "remove", "reverse", "sort"},
    "ParameterDict": set(),
}
NN_PACKAGES = ("torch.nn", "torch.nn.modules", "torch.nn.modules.container")


class UnregisteredLayerContainer(Codemod):
    """
    ## What it does
    Finds layers of an `nn.Module` kept on `self` in a plain Python `list` or `dict` and stores
    them in the registered container instead: `nn.ModuleList` / `nn.ModuleDict`, or
    `nn.ParameterList` / `nn.ParameterDict` for `nn.Parameter`s. Rewritten forms, in any method of
    an `nn.Module` subclass of the file (found through its bases, however `torch.nn` was imported):

    - `self.blocks = [Block(c) for _ in range(n)]` and list literals → `nn.ModuleList([...])`;
    - `self.blocks = []` filled later with `.append` / `.extend` / `.insert` / `+=` (in loops,
      in other methods) → `self.blocks = nn.ModuleList()`, the fills kept (the containers have
      those methods);
    - a local `layers = []` filled, then `self.layers = layers` → `nn.ModuleList(layers)`;
    - `{"a": nn.Linear(4, 2)}`, dict comprehensions, `self.heads = {}` filled by
      `self.heads["a"] = ...` / `.update(...)` → `nn.ModuleDict(...)`.

    An element counts as a layer when it is built by a `torch.nn` class, by an `nn.Module`
    subclass of the same file, by a function or method of the file that returns one
    (`self._make_layer(...)`), or is a local name bound only to such a call. The container is
    spelled as the file already spells it (`nn.ModuleList`, `torch.nn.ModuleList`, or the name
    bound by `from torch.nn import ModuleList`); when the file binds neither `nn` nor `torch`,
    `from torch.nn import ModuleList` is added (merged into an existing `from torch.nn import`).

    ## Why is this bad?
    `nn.Module` only sees submodules assigned directly as attributes or held in its own
    containers. Layers in a plain list are invisible to `.parameters()` (the optimizer never
    trains them), to `state_dict()` (checkpoints silently lack them) and to `.to(device)` /
    `.cuda()`: after `model.to("cuda")` the blocks are still on the CPU and the forward pass fails
    with `RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor)
    should be the same` — the two-day bug of seed 003 (a hand-written ResNet). `model.eval()` does
    not reach them either: a `BatchNorm` in the list keeps normalising with batch statistics, a
    `Dropout` keeps dropping, at evaluation time.

    ## Example
    ```python
    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [BasicBlock(64) for _ in range(3)]
    ```

    ## Use instead
    ```python
    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([BasicBlock(64) for _ in range(3)])
    ```

    ## Not rewritten
    - Lists of numbers, strings, shapes or plain tensors, empty lists never filled with layers,
      local lists never stored on `self`, lists only passed to `nn.Sequential(*layers)`.
    - Containers whose layers are registered already: elements that are attributes (`[self.fc1,
      self.fc2]`) or names also stored on `self`, lists passed to a layer (`nn.Sequential(
      *self.blocks)`) or walked by `add_module` / `register_module` / `setattr`, and names that
      are not built in the class at all (`[teacher]`: hiding a module in a list can be on purpose).
    - Reported for manual review: a call the file cannot tell builds a layer (a class imported
      from another module, `getattr(nn, name)()`, `copy.deepcopy(arg)`), layers mixed with other
      values or with unknown names, layers mixed with parameters, nested lists of layers,
      `[nn.Linear(4, 4)] * 3` (one layer object repeated: its weights are shared), an attribute
      also assigned a value not shown to be a layer or `None` (`self.blocks = list(...)`: a
      registered container attribute refuses it), list/dict methods the container lacks (`ModuleList.sort`, `.index`,
      `ModuleDict.get`, `.setdefault`, `ParameterList.insert`, ...), `ModuleDict` keys that are
      not strings or that `add_module` refuses (a `.` in the key, `"type"`, `"train"`, ...), and a
      local list assigned to `self` inside a block or mutated after the assignment.
    - Static and class methods, and methods whose first parameter is not `self`.

    ## Fix safety
    Safe: the layers, their order and their forward computation are unchanged; what changes is
    what the module's methods reach, which is the point: after `model.eval()` the registered
    layers are in eval mode too, so a model with a `BatchNorm` or `Dropout` among them gives
    different (now correct) outputs in eval mode (`torchfix-device verify` checks that this is the
    whole difference). **Checkpoints**:
    the rewrite registers the layers, so `state_dict()` gains keys (`blocks.0.conv1.weight`,
    ...). A checkpoint saved before the rewrite lacks them: `load_state_dict(sd)` (strict by
    default) then fails with `Missing key(s) in state_dict`, and the old checkpoint never held
    those weights anyway (they were freshly initialised at every start). Load old checkpoints
    with `load_state_dict(sd, strict=False)` and retrain or migrate the blocks; every rewritten
    container is listed in the run's checkpoint notes. Where the dict keys are not literal
    strings (`{name: ... for name in names}`, `heads[key] = ...`), `ModuleDict` may refuse a key
    at run time: that fix is unsafe and applied only with `--unsafe-fixes`.
    """

    code = "TFD004"
    name = "unregistered-layer-container"
    summary = "Layers kept in a plain list/dict on self are invisible to .to()/.parameters(): use nn.ModuleList/ModuleDict"
    safe = True
    # A match needs an nn.Module subclass, which needs ``torch.nn`` resolved through an import.
    triggers = ("torch",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """In a method of a possible ``nn.Module`` class, ``self.x = <list or dict>`` (a display,
        a comprehension, ``list()``, or a local bound to a display in the same function), or
        ``[layer] * n``."""
        if not module_class_possible(facts):
            return False
        scan = facts.scan
        for node, klass, func in facts.contexts:
            if func is None or not scan.is_module_class(klass):
                continue
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and is_self_attribute(node.targets[0]):
                value = node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None and is_self_attribute(node.target):
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

    # -- module-level state --------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._module = node
        self._plan: dict[int, tuple[str, bool]] = {}
        self._names: set[str] | None = None
        self._evidence = LayerEvidence(node, self.qualified_names, self.device_source.module_class_names)
        self._containers = ContainerFinder(self._evidence)
        return None

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        super().visit_ClassDef(node)
        if self.device_source.is_module_class(node):
            self._analyse_class(node)
        return None

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        return self._rewrite(original_node, updated_node)

    def leave_AnnAssign(self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign) -> cst.AnnAssign:
        return self._rewrite(original_node, updated_node)

    def _rewrite(self, original, updated):
        planned = self._plan.get(id(original))
        if planned is None or updated.value is None:
            return updated
        spelling, empty = planned
        if empty:
            return updated.with_changes(value=cst.parse_expression(f"{spelling}()"))
        call = cst.ensure_type(cst.parse_expression(f"{spelling}(x)"), cst.Call)
        return updated.with_changes(value=call.with_changes(args=[call.args[0].with_changes(value=updated.value)]))

    # -- the class ------------------------------------------------------------------------------------
    def _analyse_class(self, cls: cst.ClassDef) -> None:
        attrs, repeats = self._containers.find(cls)
        for node in repeats:
            self._manual(
                node,
                f"`{_short(node)}` repeats the same layer object: the copies share one set of weights "
                f"(and a plain list hides them from .to(), .parameters() and state_dict()); build distinct "
                f"layers with a comprehension in nn.ModuleList",
            )
        for name, info in attrs.items():
            self._decide(cls, name, info)

    # -- one attribute: rewrite it, report it, or leave it ---------------------------------------------
    def _decide(self, cls: cst.ClassDef, name: str, info: Attr) -> None:
        candidates = [s for s in info.sites if s.kind is not None]
        if not candidates or info.complex:
            return
        kinds = {s.kind for s in candidates}
        if len(kinds) != 1:
            return
        kind = kinds.pop()
        elements = [e for s in candidates for e in s.elements] + [e for k, e in info.fills if k == kind]
        classes: dict[str, cst.CSTNode | None] = {}
        for element in elements:
            found = self._evidence.classify_element(element)
            classes.setdefault(found, element.value)
        if any(s.registered_local for s in candidates) or REGISTERED in classes:
            return
        first = candidates[0].node
        shown = f"`self.{name}`"
        container = "list" if kind == "list" else "dict"
        layerish = LAYER in classes or PARAM in classes
        if not layerish and UNKNOWN not in classes and NESTED not in classes:
            return  # not a container of layers: numbers, strings, tensors, names we cannot see
        if OTHER in classes:
            if layerish or NESTED in classes:
                self._manual(first, f"{shown} mixes layers with other values in a plain {container}: "
                                    f".to(), .parameters() and state_dict() do not see the layers; register them by hand")
            return
        if NESTED in classes:
            self._manual(first, f"{shown} holds nested containers of layers: .to(), .parameters() and state_dict() "
                                f"do not see them; use nn.ModuleList of nn.ModuleList (or nn.Sequential) by hand")
            return
        if UNKNOWN in classes:
            call = classes[UNKNOWN]
            what = f"`{nodes.code_of(call.func)}(...)`" if isinstance(call, cst.Call) else "a value"
            self._manual(first, f"{shown} holds {what}, which this file does not show to be a layer: if it is an "
                                f"nn.Module, a plain {container} hides it from .to(), .parameters() and state_dict(); "
                                f"use nn.Module{'List' if kind == 'list' else 'Dict'}")
            return
        if LAYER in classes and PARAM in classes:
            self._manual(first, f"{shown} mixes layers and nn.Parameters in a plain {container}: "
                                f"split it into nn.Module{container.title()} and nn.Parameter{container.title()}")
            return
        if OPAQUE in classes or (PARAM in classes and NONE in classes):
            value = classes.get(OPAQUE) or classes.get(NONE)
            shown_value = f"`{nodes.code_of(value)}`" if value is not None else "values this file does not show"
            self._manual(first, f"{shown} holds layers and {shown_value}, which may not be one: .to(), .parameters() "
                                f"and state_dict() do not see layers in a plain {container}; use a registered container by hand")
            return
        target = CONTAINER[(LAYER if LAYER in classes else PARAM, kind)]
        problem = next((s.problem for s in candidates if s.problem), None) or self._structural_problem(
            name, info, target, candidates
        )
        if problem is not None:
            self._manual(first, f"{shown} holds layers in a plain {container} but is not rewritten to {target}: {problem}")
            return
        safe: bool | None = None
        if kind == "dict":
            status, why = self._keys_status(elements)
            if status == "bad":
                self._manual(first, f"{shown} holds layers in a plain dict but {target} would refuse it: {why}")
                return
            if status == "unsafe":
                safe = False
        spelled = self._spelling(target)
        if spelled is None:
            self._manual(first, f"{shown} should be a {target}, but the name `{target}` is taken in this file "
                                f"and torch.nn is not imported: rewrite it by hand")
            return
        spelling, needs_import = spelled
        applied = False
        for site in candidates:
            message = (f"{shown} keeps {'parameters' if target.startswith('Parameter') else 'layers'} in a plain "
                       f"{container}: .to(), .parameters() and state_dict() do not see them; use `{spelling}`")
            if safe is False:
                message += f"; unsafe: {why}"
            if self.report(site.node, message, safe=safe):
                self._plan[id(site.node)] = (spelling, site.empty)
                applied = True
        if applied:
            if needs_import:
                AddImportsVisitor.add_needed_import(self.context, "torch.nn", target)
            self.checkpoint_notes.append(
                f"TFD004: {cls.name.value}.{name} is now registered: state_dict() gains keys '{name}.*'; "
                f"checkpoints saved before this rewrite need load_state_dict(..., strict=False) or a key migration"
            )

    def _manual(self, node: cst.CSTNode, message: str) -> None:
        self.report(node, message, fixable=False)

    def _structural_problem(self, name: str, info: Attr, target: str, candidates: list[Site]) -> str | None:
        for site in info.sites:
            if site.kind is not None or nodes.is_none(site.value):
                continue
            if target.startswith("Module") and self._evidence.classify(site.value, site.scope, frozenset()) == LAYER:
                continue  # a module replacing the container: fine
            return f"it is also assigned `{_short(site.value)}`, which a registered {target} attribute would refuse"
        for use, where in info.uses.items():
            if use in UNSUPPORTED_METHODS[target]:
                return f"`.{use}()` is used on it and {target} has no such method"
            if use == "isinstance":
                return f"its type is tested (`{_short(where)}`), and it would no longer be a {'list' if 'List' in target else 'dict'}"
            if use.startswith("r") or use in ("*", "*=", "|", "|=") or (use == "+" and target == "ParameterList") or (
                use == "del" and target == "ParameterList"
            ):
                return f"`{_short(where)}` does not work on a {target}"
        return None

    def _keys_status(self, elements: list[Element]) -> tuple[str, str]:
        status, why = "ok", ""
        for element in elements:
            if not element.is_dict_item:
                continue
            key = element.key
            if key is None:
                return "bad", "a key this file does not show"
            if isinstance(key, (cst.SimpleString, cst.ConcatenatedString)):
                text = key.evaluated_value
                if not isinstance(text, str):
                    return "bad", f"the key {nodes.code_of(key)} is not a str"
                if not text or "." in text or text in NN_MODULE_ATTRS or text in DICT_CONTAINER_ATTRS:
                    return "bad", f"the key {nodes.code_of(key)} is empty, has a '.', or names an nn.Module attribute"
                continue
            if isinstance(key, (cst.Integer, cst.Float, cst.Imaginary, cst.Tuple)) or m.matches(key, m.Name("None") | m.Name("True") | m.Name("False")):
                return "bad", f"the key `{nodes.code_of(key)}` is not a str"
            status, why = "unsafe", f"the key `{_short(key)}` may not be a str accepted by add_module"
        return status, why

    # -- naming the container ---------------------------------------------------------------------------
    def _spelling(self, target: str) -> tuple[str, bool] | None:
        """How to write ``target`` here, and whether ``from torch.nn import <target>`` must be added:
        the name a ``from torch.nn import`` binds, else ``<nn alias>.<target>``, else the bare name
        with an import (when the file uses that name for nothing else)."""
        direct = from_import_of(self._module, NN_PACKAGES, target)
        if direct is not None:
            return direct, False
        alias = imports.nn_alias(self._module)
        if alias is not None:
            return f"{alias}.{target}", False
        if target not in self._all_names():
            return target, True
        return None

    def _all_names(self) -> set[str]:
        if self._names is None:
            self._names = traversal.all_names(self._module)
        return self._names


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(nodes.code_of(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- stage 1 ---------------------------------------------------------------------------------
CONTAINER_DISPLAYS = (ast.List, ast.ListComp, ast.Dict, ast.DictComp)


def _may_be_container(value: ast.expr, func: ast.AST) -> bool:
    if isinstance(value, CONTAINER_DISPLAYS):
        return True
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        return (ast_scan.full_name(value.func) or "").rpartition(".")[2] in ("list", "dict")
    if isinstance(value, ast.Name):
        return any(isinstance(bound, CONTAINER_DISPLAYS) for bound in values_bound_to(value.id, func))
    return False
