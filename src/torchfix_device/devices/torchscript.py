"""Code that TorchScript compiles sees only what the script can see: a module-level ``device``
binding is not one of them (``torch.jit.script`` fails on it when the file is imported). So a
rewrite inside a scripted function or method takes its device from a tensor argument, or is
left for review.

Scripted here means: a function decorated ``@torch.jit.script``, a method decorated
``@torch.jit.script_method`` or any method of a ``torch.jit.ScriptModule`` subclass. (A plain
``nn.Module`` whose instance is later passed to ``torch.jit.script`` is not seen from here; its
methods take their device from the module, which TorchScript accepts.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

SCRIPT_DECORATORS = frozenset({"torch.jit.script", "torch.jit.script_method", "torch.jit._script.script"})
SCRIPT_BASES = frozenset({"torch.jit.ScriptModule", "torch.jit._script.ScriptModule"})
_LAST_PARTS = frozenset({"script", "script_method", "ScriptModule"})
TENSOR_ANNOTATIONS = frozenset({"Tensor", "torch.Tensor"})


def scripted_function(codemod: "CodemodView") -> cst.FunctionDef | None:
    """The innermost function being visited when it is compiled by TorchScript, else None."""
    if not codemod.function_stack:
        return None
    if any(_is_script(codemod, d.decorator, SCRIPT_DECORATORS) for f in codemod.function_stack for d in f.decorators):
        return codemod.function_stack[-1]
    for cls in codemod.class_stack:
        if any(_is_script(codemod, base.value, SCRIPT_BASES) for base in cls.bases):
            return codemod.function_stack[-1]
    return None


def tensor_argument(function: cst.FunctionDef) -> str | None:
    """The first parameter TorchScript types as a tensor (annotated ``Tensor``, or not annotated:
    TorchScript's default), ``self`` left out; None when there is none."""
    params = list(function.params.posonly_params) + list(function.params.params)
    for param in params:
        name = param.name.value
        if name in ("self", "cls"):
            continue
        annotation = param.annotation
        if annotation is None:
            return name
        spelt = cst.helpers.get_full_name_for_node(annotation.annotation)
        if spelt in TENSOR_ANNOTATIONS:
            return name
    return None


def _is_script(codemod: "CodemodView", expr: cst.BaseExpression, names: frozenset[str]) -> bool:
    target = expr.func if isinstance(expr, cst.Call) else expr
    return bool(codemod.qualified_names(target, ending_in=_LAST_PARTS) & names)
