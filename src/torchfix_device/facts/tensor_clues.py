"""Clues that a value is a tensor which need no walk through its value: the call of a
``torch.nn`` layer, and a method only torch tensors have. Part of :mod:`.kinds` (which
re-exports :func:`layer_class`, :func:`tensor_by_method` and :func:`numpy_doubt`); kept apart
so that each module stays small.

**A layer's output.** :func:`layer_class` names the ``torch.nn`` class a call goes to where
every binding of the called name that may reach the call builds one (``model = nn.Linear(4,
3)``, maybe moved: ``model = model.cuda()``); the layers of :data:`ONE_TENSOR_LAYERS` return one
tensor (an ``nn.Sequential`` only of such layers too).

**A tensor, by its methods.** In a file that imports torch and no other array library
(:data:`OTHER_ARRAY_LIBRARIES`: TensorFlow's tensors have ``.numpy()`` and ``.cpu()``, pandas'
objects ``.eq()``), no star import, and whose own classes define no method of that name, a
value on which a method of :data:`TORCH_ONLY_METHODS` is called (``x.numpy()``, ``.cpu()``,
``.eq(y)``, ``.view_as(y)``, ``.long()``: NumPy's arrays and Python's types have none of them)
is a tensor wherever that call succeeds: :func:`tensor_by_method`. :func:`numpy_doubt` says why
``.numpy()`` is no such evidence in a file. Code of other files is not seen: a project class
defined elsewhere with its own ``.numpy()`` is not known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts.self_attributes import held_by_self
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.torch_api import is_torch_module_class

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

ONE_TENSOR_LAYERS = frozenset({
    "Linear", "Bilinear", "Identity", "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "GELU", "SiLU", "Tanh", "Sigmoid",
    "Softmax", "LogSoftmax", "Softplus", "Hardtanh", "PReLU", "Dropout", "Dropout2d", "AlphaDropout", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "Embedding",
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d", "MaxPool2d",
    "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten", "Upsample", "Sequential",
})
"""``torch.nn`` layers whose call returns one tensor (``Sequential`` only of such layers)."""
MAX_DEPTH = 12
MOVES_OF_MODULES = frozenset({"cuda", "to", "cpu", "eval", "train", "float", "double", "half", "requires_grad_"})
"""Methods of a module that return the module itself."""
OTHER_ARRAY_LIBRARIES = frozenset({
    "tensorflow", "keras", "pandas", "jax", "paddle", "mxnet", "cupy", "oneflow", "jittor", "megengine", "dask",
    "xarray", "polars", "mindspore", "tf_keras",
})
"""Libraries whose objects share method names with torch tensors (``.numpy()``, ``.cpu()``,
``.eq()``, ``.view()``...): a file importing one has no method evidence."""
TORCH_ONLY_METHODS = frozenset({
    "numpy", "cpu", "cuda", "detach", "eq", "ne", "lt", "le", "gt", "ge", "view_as", "type_as", "expand_as",
    "long", "float", "double", "half", "byte", "unsqueeze", "masked_fill", "masked_fill_", "contiguous", "item",
    "data_ptr", "requires_grad_", "zero_", "numel", "masked_select", "index_select",
})
"""Methods torch tensors have and NumPy arrays (and Python's own types) do not."""
TENSOR_ONLY_METHODS = TORCH_ONLY_METHODS - MOVES_OF_MODULES
"""Of those, the ones ``torch.nn`` modules do not have: only a tensor answers them."""


def layer_class(values: "ModuleValues", func: cst.BaseExpression, depth: int = 0, seen: frozenset[int] = frozenset()) -> str | None:
    """The ``torch.nn`` class (last part: ``Linear``) of the layer ``func`` calls, where every
    binding of the name that may reach the call builds one (``model = nn.Linear(4, 3)``,
    maybe moved: ``model = model.cuda()``), or every value the class gives ``self.fc``
    (:func:`~.self_attributes.held_by_self`); a ``Sequential`` counts only of layers of :data:`ONE_TENSOR_LAYERS`
    (as ``Sequential``). None otherwise."""
    if isinstance(func, cst.Attribute) and depth <= MAX_DEPTH:
        found = {_built_layer(values, v, depth + 1, seen) for v in held_by_self(values, func) or [None]}
        return found.pop() if len(found) == 1 else None
    if not isinstance(func, cst.Name) or depth > MAX_DEPTH or func.value not in _call_bound_names(values):
        return None
    found: set[str] = set()
    for value in values.values_of(func):
        if value is not None and id(value) in seen:
            continue  # `model = model.cuda()` in a loop: the other bindings decide
        layer = _built_layer(values, value, depth + 1, seen | {id(value)})
        if layer is None:
            return None
        found.add(layer)
    return found.pop() if len(found) == 1 else None


def _built_layer(values: "ModuleValues", value: cst.BaseExpression | None, depth: int, seen: frozenset[int] = frozenset()) -> str | None:
    if isinstance(value, cst.Name):
        return layer_class(values, value, depth + 1, seen)
    if not isinstance(value, cst.Call) or depth > MAX_DEPTH:
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in MOVES_OF_MODULES and not values.module_path(func):
        return _built_layer(values, func.value, depth + 1, seen)  # `model.cuda()`: what it was
    names = values.names(func)
    if len(names) != 1:
        return None
    qualified = next(iter(names))
    if not qualified.startswith("torch.nn.") or not is_torch_module_class(qualified):
        return None
    last = qualified.rpartition(".")[2]
    if last == "Sequential":
        items = [a.value for a in value.args]
        if not items or any(a.star or a.keyword for a in value.args):
            return None
        return last if all(_built_layer(values, i, depth + 1) in ONE_TENSOR_LAYERS for i in items) else None
    return last


def tensor_by_method(values: "ModuleValues", call: cst.BaseExpression) -> bool:
    """``call`` is ``x.<method>(...)`` of :data:`TORCH_ONLY_METHODS` in a file where only torch
    tensors have that method (see the module docstring): ``x`` is a tensor where it succeeds."""
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
        return False
    method = call.func.attr.value
    if method not in TORCH_ONLY_METHODS or values.module_path(call.func):
        return False
    return method_doubt(values, method) is None


def numpy_doubt(values: "ModuleValues") -> str | None:
    """Why ``x.numpy()`` does not show ``x`` to be a tensor in this file (None: it does)."""
    return method_doubt(values, "numpy")


def method_doubt(values: "ModuleValues", method: str) -> str | None:
    """Why a call of ``.<method>()`` does not show its receiver to be a torch object in this file
    (None: it does, see the module docstring)."""
    imports = values.facets.get("top-level imports")
    if imports is None:
        imports = values.facets["top-level imports"] = _imported_packages(values.module)
    if "torch" not in imports:
        return "the file does not import torch"
    others = sorted(imports & OTHER_ARRAY_LIBRARIES)
    if others:
        return f"the file also imports {', '.join(others)}, whose objects may have `.{method}()` too"
    if "*" in imports:
        return "a star import may bind objects of another library"
    own = values.facets.get("own methods")
    if own is None:
        own = values.facets["own methods"] = frozenset(
            n.name.value for n in traversal.walk_statements(values.module)
            if isinstance(n, cst.FunctionDef) and isinstance(values.parent(values.parent(n) or n), cst.ClassDef)
        )
    if method in own:
        return f"a class of this file defines its own `{method}()`"
    return None


def _imported_packages(module: cst.Module) -> frozenset[str]:
    """The top-level packages the file imports (``*`` for a star import)."""
    found: set[str] = set()
    for node in traversal.walk_statements(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                found.add((nodes.dotted_name(alias.name) or "").partition(".")[0])
        elif isinstance(node, cst.ImportFrom) and not node.relative and node.module is not None:
            found.add((nodes.dotted_name(node.module) or "").partition(".")[0])
            if isinstance(node.names, cst.ImportStar):
                found.add("*")
    return frozenset(found)


def _call_bound_names(values: "ModuleValues") -> frozenset[str]:
    """The names some assignment of the file binds to a call's result (``model = nn.Linear(...)``,
    ``model = model.cuda()``): only these can name a layer (memoised per module version; a
    cheap filter before the bindings are resolved)."""
    known = values.facets.get("call-bound names")
    if known is None:
        found = set()
        for node in traversal.walk_statements(values.module):
            if isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
                        found.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
                    elif isinstance(small, cst.AnnAssign) and isinstance(small.value, cst.Call) and isinstance(small.target, cst.Name):
                        found.add(small.target.value)
        known = values.facets["call-bound names"] = frozenset(found)
    return known
