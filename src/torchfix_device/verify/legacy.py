"""Shims that let legacy originals run where they were not written to, and count their use.

The fixture models are legacy code: they call ``.cuda()`` and index losses with ``.data[0]``.
To run them on any machine the harness gives them the meaning they had on the machine and the
PyTorch they were written for. Each use is counted; the verifier requires a *rewrite* to use
none of the first two (it must be device-agnostic and modern by itself).

``.cuda()`` (Tensor and Module), when the target is not CUDA
    means ``.to(target)``: the stand-in (``meta``), MPS, XPU or, in the CPU leg, the CPU plays
    the GPU. On a CUDA target nothing changes (the calls are only counted). ``torch.cuda.*``
    and the ``torch.cuda.FloatTensor`` types are not patched.

``x[0]`` on a 0-dim tensor that does not require grad (``loss.data[0]``)
    gives the Python number, as indexing a 1-element tensor did in PyTorch 0.3. Since 0.4 it
    raises ``IndexError``, so no code that works today changes meaning.

``F()(x)``, a legacy autograd Function (non-static ``forward(self, ...)``)
    runs as it did up to PyTorch 1.2: one object is both the instance and the context, so
    ``self.save_for_backward``, ``self.saved_tensors``, ``self.needs_input_grad``,
    ``self.mark_dirty`` and ``self.mark_non_differentiable`` act on the context, and any other
    attribute (state from ``__init__``, one set in ``forward`` for ``backward``, a method) is the
    instance's. Since 1.3 the call raises ``RuntimeError: Legacy autograd function with
    non-static forward method is deprecated``, so no code that works today changes meaning.

``x.backward(retain_variables=...)`` and ``torch.autograd.backward(..., retain_variables=...)``
    mean ``retain_graph=``, as up to PyTorch 0.3 (0.4 removed the old name: a TypeError since).
``it.next()`` on a ``DataLoader``'s iterator
    is ``next(it)``, as up to torch 1.x (an alias of ``__next__`` since Python 2; gone in 2.x).
``F.binary_cross_entropy(input, target)`` (``nn.BCELoss``; also ``_with_logits``) of two shapes
    with as many elements reads the target in the input's shape, as up to PyTorch 0.3 (an
    element-by-element loss over both in order; a ValueError since 0.4.1).
``.item()`` on a ``meta`` tensor (stand-in only)
    returns a placeholder ``0`` of the tensor's kind (``0.0``, ``0``, ``False``): meta tensors
    hold no data. Numbers computed from it are meaningless, and they are only ever compared on
    the CPU. ``.tolist()``, ``.numpy()`` and ``bool(meta_tensor)`` still raise.
"""

from __future__ import annotations

import inspect
from collections import Counter

CUDA_CALL = ".cuda()"
ZERO_DIM_INDEX = "0-dim [0]"
META_ITEM = "meta .item()"
LEGACY_FUNCTION = "legacy Function()(x)"
RETAIN_VARIABLES = "backward(retain_variables=)"
ITERATOR_NEXT = "DataLoader iterator .next()"
LOSS_TARGET_SHAPE = "BCE loss of a target of another shape"
MODERN_FORBIDDEN = (CUDA_CALL, ZERO_DIM_INDEX, LEGACY_FUNCTION, RETAIN_VARIABLES, ITERATOR_NEXT, LOSS_TARGET_SHAPE)
"""Shims a rewrite must not need. (torch is imported only by :func:`install`.)"""


def _placeholder(tensor) -> object:
    import torch

    if tensor.dtype == torch.bool:
        return False
    if tensor.is_complex():
        return 0j
    if tensor.is_floating_point():
        return 0.0
    return 0


_ADDED: list = []
"""(class, attribute) that :func:`install` added where torch has none, for :func:`uninstall`."""
_ORIGINALS: dict = {}
"""torch's own methods, kept by the first :func:`install` for :func:`uninstall`."""


def _owner(torch, name: str):
    return {"Module": torch.nn.Module, "Tensor": torch.Tensor, "Function": torch.autograd.Function, "autograd": torch.autograd,
            "functional": torch.nn.functional}[name]


def uninstall() -> None:
    """Give torch its own methods back (one interpreter runs a model on several devices)."""
    import torch

    for (owner, name), method in _ORIGINALS.items():
        setattr(_owner(torch, owner), name, method)
    while _ADDED:
        owner, name = _ADDED.pop()
        delattr(owner, name)


CONTEXT_API = frozenset({
    "save_for_backward", "saved_tensors", "saved_variables", "needs_input_grad", "mark_dirty",
    "mark_non_differentiable", "set_materialize_grads",
})
"""What a legacy Function's ``self`` did as the context (the rest is the instance's)."""


class _LegacySelf:
    """``self`` of a legacy Function's ``forward``/``backward``: the context for
    :data:`CONTEXT_API`, the instance for everything else."""

    def __init__(self, instance, ctx) -> None:
        object.__setattr__(self, "_instance", instance)
        object.__setattr__(self, "_ctx", ctx)

    def __getattr__(self, name: str):
        if name == "needs_input_grad":  # the instance is the adapter's first input: not the user's
            return object.__getattribute__(self, "_ctx").needs_input_grad[1:]
        if name in CONTEXT_API:
            return getattr(object.__getattribute__(self, "_ctx"), name)
        return getattr(object.__getattribute__(self, "_instance"), name)

    def __setattr__(self, name: str, value) -> None:
        setattr(object.__getattribute__(self, "_instance"), name, value)


_ADAPTERS: dict = {}


def _adapter(torch, cls):
    """A new-style Function running the legacy class ``cls``'s methods (one per class)."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:

        class Legacy(torch.autograd.Function):
            @staticmethod
            def forward(ctx, instance, *inputs):
                ctx.legacy_instance = instance
                return cls.forward(_LegacySelf(instance, ctx), *inputs)

            @staticmethod
            def backward(ctx, *grads):
                result = cls.backward(_LegacySelf(ctx.legacy_instance, ctx), *grads)
                return (None, *(result if isinstance(result, tuple) else (result,)))

        adapter = _ADAPTERS[cls] = Legacy
    return adapter


def install(target) -> Counter:
    """Patch torch for a run on ``target`` (a ``torch.device``); return the live use counter.
    A second call first undoes the first (:func:`uninstall`)."""
    import torch

    if not _ORIGINALS:
        _ORIGINALS.update({
            ("Tensor", "cuda"): torch.Tensor.cuda, ("Module", "cuda"): torch.nn.Module.cuda,
            ("Tensor", "__getitem__"): torch.Tensor.__getitem__, ("Tensor", "item"): torch.Tensor.item,
            ("Function", "__call__"): torch.autograd.Function.__call__,
            ("Tensor", "backward"): torch.Tensor.backward, ("autograd", "backward"): torch.autograd.backward,
            ("functional", "binary_cross_entropy"): torch.nn.functional.binary_cross_entropy,
            ("functional", "binary_cross_entropy_with_logits"): torch.nn.functional.binary_cross_entropy_with_logits,
        })
    uninstall()
    used: Counter = Counter()
    tensor_cuda = torch.Tensor.cuda
    module_cuda = torch.nn.Module.cuda
    tensor_getitem = torch.Tensor.__getitem__
    tensor_item = torch.Tensor.item
    redirect = target.type != "cuda"

    def cuda(self, device=None, non_blocking=False, **kwargs):
        used[CUDA_CALL] += 1
        if redirect:
            return self.to(target, non_blocking=non_blocking)
        return tensor_cuda(self, device, non_blocking, **kwargs)

    def module_cuda_(self, device=None):
        used[CUDA_CALL] += 1
        if redirect:
            return self.to(target)
        return module_cuda(self, device)

    def getitem(self, index):
        if type(index) is int and index == 0 and self.dim() == 0 and not self.requires_grad:
            used[ZERO_DIM_INDEX] += 1
            return self.item()
        return tensor_getitem(self, index)

    def item(self):
        if self.is_meta:
            used[META_ITEM] += 1
            return _placeholder(self)
        return tensor_item(self)

    def legacy_call(self, *inputs):
        if isinstance(inspect.getattr_static(type(self), "forward", None), staticmethod):
            return function_call(self, *inputs)  # a new-style Function's instance: torch's own error
        used[LEGACY_FUNCTION] += 1
        return _adapter(torch, type(self)).apply(self, *inputs)

    def retaining(backward):
        def run(*args, retain_variables=None, **kwargs):
            if retain_variables is not None:
                used[RETAIN_VARIABLES] += 1
                kwargs.setdefault("retain_graph", retain_variables)
            return backward(*args, **kwargs)

        return run

    def elementwise(loss):
        def run(input, target, *args, **kwargs):
            if target.shape != input.shape and target.numel() == input.numel():
                used[LOSS_TARGET_SHAPE] += 1
                target = target.reshape(input.shape)
            return loss(input, target, *args, **kwargs)

        return run

    from torch.utils.data import dataloader

    def loader_next(self):
        used[ITERATOR_NEXT] += 1
        return self.__next__()

    if "next" not in vars(dataloader._BaseDataLoaderIter):
        dataloader._BaseDataLoaderIter.next = loader_next
        _ADDED.append((dataloader._BaseDataLoaderIter, "next"))
    function_call = torch.autograd.Function.__call__
    torch.Tensor.backward = retaining(_ORIGINALS[("Tensor", "backward")])
    torch.autograd.backward = retaining(_ORIGINALS[("autograd", "backward")])
    for name in ("binary_cross_entropy", "binary_cross_entropy_with_logits"):
        setattr(torch.nn.functional, name, elementwise(_ORIGINALS[("functional", name)]))
    torch.Tensor.cuda = cuda
    torch.nn.Module.cuda = module_cuda_
    torch.Tensor.__getitem__ = getitem
    torch.autograd.Function.__call__ = legacy_call
    if target.type == "meta":
        torch.Tensor.item = item
    return used
