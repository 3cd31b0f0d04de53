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

``.item()`` on a ``meta`` tensor (stand-in only)
    returns a placeholder ``0`` of the tensor's kind (``0.0``, ``0``, ``False``): meta tensors
    hold no data. Numbers computed from it are meaningless, and they are only ever compared on
    the CPU. ``.tolist()``, ``.numpy()`` and ``bool(meta_tensor)`` still raise.
"""

from __future__ import annotations

from collections import Counter

CUDA_CALL = ".cuda()"
ZERO_DIM_INDEX = "0-dim [0]"
META_ITEM = "meta .item()"
MODERN_FORBIDDEN = (CUDA_CALL, ZERO_DIM_INDEX)
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


_ORIGINALS: dict = {}
"""torch's own methods, kept by the first :func:`install` for :func:`uninstall`."""


def uninstall() -> None:
    """Give torch its own methods back (one interpreter runs a model on several devices)."""
    import torch

    for (owner, name), method in _ORIGINALS.items():
        setattr(torch.nn.Module if owner == "Module" else torch.Tensor, name, method)


def install(target) -> Counter:
    """Patch torch for a run on ``target`` (a ``torch.device``); return the live use counter.
    A second call first undoes the first (:func:`uninstall`)."""
    import torch

    if not _ORIGINALS:
        _ORIGINALS.update({
            ("Tensor", "cuda"): torch.Tensor.cuda, ("Module", "cuda"): torch.nn.Module.cuda,
            ("Tensor", "__getitem__"): torch.Tensor.__getitem__, ("Tensor", "item"): torch.Tensor.item,
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

    torch.Tensor.cuda = cuda
    torch.nn.Module.cuda = module_cuda_
    torch.Tensor.__getitem__ = getitem
    if target.type == "meta":
        torch.Tensor.item = item
    return used
