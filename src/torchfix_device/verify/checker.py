"""The stand-in device checker: mixed devices raise on ``meta`` as they would on a GPU.

``meta`` alone does not model a second device faithfully: on torch 2.13 its kernels for
``F.linear``, ``conv2d`` and ``matmul`` accept a CPU weight with a meta input and return a meta
result, so a model whose layers were left on the CPU would "run". (Elementwise ops do raise,
with ``Tensor on device cpu is not on the expected device meta!``.) :class:`DeviceChecker` is a
``TorchDispatchMode`` that looks at every operator call below autograd, forward and backward, and
raises the error CUDA raises when one operator receives non-scalar tensors on two devices.

Exempt, as on a real device:

- 0-dim CPU tensors (CPU scalars mix with any device);
- the copies that exist to cross devices (``_to_copy``, ``copy_``, ``_copy_from``...);
- CPU index tensors of ``index`` / ``index_put_`` (CUDA accepts CPU indices).

Meta tensors hold no data, so a copy *out of* meta (``load_state_dict`` of a checkpoint loaded
with ``map_location=meta``, ``.cpu()`` of a meta result) cannot happen: the checker leaves the
destination of such a ``copy_`` as it was and gives ``.to(real device)`` of a meta tensor zeros of
the right shape, counting each in :attr:`DeviceChecker.placeholders`. Such values are
meaningless, and numbers are only ever compared on the CPU.

:func:`misplaced` lists the parameters and buffers of a module that are not on the target device,
for the check made after a run.
"""

from __future__ import annotations

import re
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

CROSS_DEVICE_OPS = frozenset(
    {
        "aten::_to_copy", "aten::to", "aten::copy_", "aten::copy", "aten::_copy_from",
        "aten::_copy_from_and_resize", "aten::set_", "aten::lift_fresh", "aten::lift_fresh_copy",
        "aten::lift", "aten::_has_compatible_shallow_copy_type", "aten::is_same_size",
    }
)
INDEX_OPS = frozenset({"aten::index", "aten::_unsafe_index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"})

DEVICE_ERROR_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"Expected all tensors to be on the same device",
        r"found at least two devices",
        r"Input type \(.*\) and weight type \(.*\) should be the same",
        r"is not on the expected device",
        r"Expected object of device type",
        r"Expected .{0,80} to be on (?:the same )?device",
        r"Expected .{0,80}device.{0,40} but (?:got|found)",
        r"(?:is|are) on (?:CPU|cpu|CUDA|cuda|GPU|MPS|mps|XPU|xpu|meta).{0,40}but expected",
        r"Placeholder storage has not been allocated on MPS device",
        r"indices should be either on cpu or on the same device",
        r"on different devices",
        r"(?:Input and hidden|hidden) tensors are not (?:at|on) the same device",  # torch's RNNs
        r"not on the target device",
        r"can't convert \S+ device type tensor to numpy",
    )
)


class DeviceMismatchError(RuntimeError):
    """Raised by the checker; the message is CUDA's, so it reads the same to the user."""


def is_device_error(message: str) -> bool:
    """Does this error message say that tensors were on different devices?"""
    return any(p.search(message) for p in DEVICE_ERROR_PATTERNS)


def _device_name(device: torch.device) -> str:
    return str(device)


class DeviceChecker(TorchDispatchMode):
    """Raise :class:`DeviceMismatchError` when an operator mixes tensors of two devices."""

    META_COPY = "copy out of meta"

    def __init__(self) -> None:
        super().__init__()
        self.checked = 0
        self.placeholders: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name == "aten::copy_" and args[1].is_meta and not args[0].is_meta:
            self.placeholders[self.META_COPY] += 1
            return args[0]
        if name == "aten::_to_copy" and args[0].is_meta and kwargs.get("device") not in (None, torch.device("meta")):
            self.placeholders[self.META_COPY] += 1
            source = args[0]
            return torch.zeros(source.shape, dtype=kwargs.get("dtype") or source.dtype, device=kwargs["device"])
        if name not in CROSS_DEVICE_OPS:
            self.checked += 1
            devices = self._devices(name, args, kwargs)
            if len(devices) > 1:
                first, second = devices[:2]
                raise DeviceMismatchError(
                    "Expected all tensors to be on the same device, but found at least two devices, "
                    f"{first} and {second}! ({func})"
                )
        return func(*args, **kwargs)

    @staticmethod
    def _devices(name: str, args, kwargs) -> list[str]:
        if name in INDEX_OPS:
            # index(self, indices) / index_put_(self, indices, values): CPU indices are allowed
            tensors = [a for a in tree_flatten((args[:1], args[2:], kwargs))[0] if isinstance(a, torch.Tensor)]
            indices = [a for a in tree_flatten(args[1:2])[0] if isinstance(a, torch.Tensor)]
            tensors += [t for t in indices if t.device.type != "cpu"]
        else:
            tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        seen: list[str] = []
        for tensor in tensors:
            if tensor.dim() == 0 and tensor.device.type == "cpu":
                continue  # a CPU scalar mixes with any device
            device = _device_name(tensor.device)
            if device not in seen:
                seen.append(device)
        return seen


def on_device(tensor: torch.Tensor, target: torch.device) -> bool:
    """Is ``tensor`` on ``target`` (any index of the target's type when it names none)?"""
    device = tensor.device
    if device.type != target.type:
        return False
    return target.index is None or (device.index or 0) == target.index


def misplaced(module: torch.nn.Module, target: torch.device) -> list[str]:
    """``"kind 'name' is on DEV"`` for each parameter or buffer of ``module`` not on ``target``."""
    found = []
    for kind, items in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        for name, tensor in items:
            if tensor is not None and not on_device(tensor, target):
                found.append(f"{kind} {name!r} is on {tensor.device}")
    return found


def check_module(module: torch.nn.Module, target: torch.device) -> None:
    """Raise :class:`DeviceMismatchError` when a parameter or buffer is not on ``target``."""
    found = misplaced(module, target)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise DeviceMismatchError(f"after run(): {found[0]}, not on the target device {target}{more}")
