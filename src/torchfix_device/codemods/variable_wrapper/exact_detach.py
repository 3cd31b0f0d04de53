"""``Variable(x)`` → ``x.detach()`` where nothing shows ``x`` cannot require grad (TFD009).

Since PyTorch 0.4, ``Variable(t)`` (``requires_grad`` not true) *is* ``t.detach()``: torch makes
the new tensor with ``detach`` and sets ``requires_grad`` to the default, ``False``. Checked on
torch 2.13 (``test_variable_is_detach``): the same class (a ``Parameter`` gives a plain tensor
either way), storage, strides, version counter; no ``grad_fn``; not requiring grad. So
``x.detach()`` needs no evidence about grad and is the safe fix where the evidence for ``x``
is missing; ``--unsafe-fixes`` writes ``x`` (the message says what evidence was missing).

The two differ only where ``x`` is not a plain tensor, and :func:`detach_doubt` holds the
fallback back there:

- ``Variable(obj)`` raises ``TypeError`` for a non-tensor; ``obj.detach()`` raises
  ``AttributeError`` (or runs the object's own ``detach``). Only a run that fails at the line
  can tell, and only a handler that catches ``TypeError`` and not ``AttributeError`` lets the
  program go on: none may be in a ``try`` around the call in its function;
- a subclass of ``torch.Tensor`` with its own ``__torch_function__`` keeps its class through
  ``.detach()``, and ``Variable`` gives a plain tensor: not in a file that defines a class on a
  tensor class (its name ends in ``Tensor``, or is ``Variable`` or ``Parameter``). Not seen:
  such a class from another file (none could exist before PyTorch 1.7, for which legacy code
  was written).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.syntax.try_handlers import telling_handler
from torchfix_device.codemods.variable_wrapper.shapes import method_call

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod


@lru_cache(maxsize=1)  # asked once per fallback site, of the same module; the file's own pass only
def defines_tensor_subclass(module: cst.Module) -> bool:
    """A class in the file whose base is a tensor class (by the base's last name)."""
    for node in traversal.of_classes(module, cst.ClassDef):
        for base in node.bases:
            last = (nodes.dotted_name(base.value) or "").rpartition(".")[2]
            if last.endswith("Tensor") or last in ("Variable", "Parameter"):
                return True
    return False


def detach_doubt(codemod: "Codemod", call: cst.Call) -> str | None:
    """Why ``x.detach()`` might not be exactly ``Variable(x)`` at ``call``; None where it is."""
    if defines_tensor_subclass(codemod.visited_module):
        return "this file defines a tensor subclass, which `.detach()` would keep"
    handler = telling_handler(codemod, call, {"TypeError"}, {"AttributeError"})
    if handler is not None:
        return f"`except {handler}` around it would see `AttributeError` instead of `TypeError` for a non-tensor"
    return None


def unwrapped_without_evidence(
    codemod: "Codemod", call: cst.Call, data: cst.BaseExpression, why: str
) -> tuple[cst.BaseExpression, str, str | None]:
    """TFD009's replacement of ``Variable(x)`` where nothing shows ``x`` cannot require grad
    (``why``), how the message shows it, and why it is unsafe (None: safe): ``x.detach()``
    without ``--unsafe-fixes`` where it is exact, else ``x``, unsafe."""
    unsafe_applies = codemod.options.applies(safe=False)
    doubt = None if unsafe_applies else detach_doubt(codemod, call)
    if unsafe_applies or doubt is not None:
        return data, "the tensor itself", f"nothing shows it cannot require grad: {why}" + (
            f"; `.detach()` is not exact either: {doubt}" if doubt else ""
        )
    new = method_call(data, ("detach", []))
    shown = f"`{nodes.code_of(new)}`, which is what `Variable` did (`--unsafe-fixes` writes plain `{nodes.code_of(data)}`, but nothing shows it cannot require grad: {why})"
    return new, shown, None
