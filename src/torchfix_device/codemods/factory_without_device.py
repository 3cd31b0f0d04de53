from __future__ import annotations

import ast
from typing import Iterator
import libcst as cst
from torchfix_device.codemods.common import legacy_constructors
from torchfix_device.syntax import imports
from torchfix_device.syntax import nodes
from torchfix_device import torch_api
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter import scan as ast_scan
from torchfix_device.prefilter.candidates import FileFacts, has_keyword, has_star_args
from torchfix_device.devices.source import NoDevice
from torchfix_device.facts.devices import KEEP_DEVICE, kept_chain

FACTORIES = {
    "randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange", "range",
    "linspace", "logspace", "eye", "tensor", "as_tensor", "normal", "bernoulli_",
}
FACTORIES = {f"torch.{name}" for name in FACTORIES if not name.endswith("_")}
MOVES = {"to", "cuda", "cpu", "type"}
FACTORY_LAST_PARTS = frozenset(q.rpartition(".")[2] for q in FACTORIES) | frozenset(torch_api.LEGACY_TENSOR_DTYPES)
"""The last parts of the names a call must have to be a factory or a legacy constructor."""


class FactoryWithoutDevice(Codemod):
    """
    ## What it does
    Adds `device=` to tensor factory calls — `torch.randn`, `rand`, `randint`, `randperm`,
    `zeros`, `ones`, `empty`, `full`, `arange`, `linspace`, `logspace`, `eye`, `tensor`,
    `as_tensor`, `normal` — made inside methods of an `nn.Module` (helpers such as `reset_noise`
    or `init_hidden` included), and rewrites legacy constructors there
    (`torch.FloatTensor(n)` → `torch.empty(n, dtype=torch.float32, device=...)`).

    The device is the module's own: the method's tensor argument (`x.device` in `forward(x)`;
    never an argument that is a size, a count or a flag, such as `forward(self, batch_size)`),
    else a parameter, buffer or layer created in `__init__` that already exists when the method
    runs (`self.sigma_weight.device`), else `next(self.parameters()).device`.

    ## Why is this bad?
    Factories create tensors on the default device, the CPU. After `model.to("cuda")` the
    module's weights are on the GPU but the tensors its methods create are not, and the next
    operation fails with `RuntimeError: Expected all tensors to be on the same device, but found
    at least two devices, cuda:0 and cpu!` — the NoisyNet `reset_noise()` bug.

    ## Example
    ```python
    def reset_noise(self):
        eps_in = torch.randn(self.num_in)
        self.epsilon_weight.copy_(eps_in.ger(torch.randn(self.num_out)))
    ```

    ## Use instead
    ```python
    def reset_noise(self):
        eps_in = torch.randn(self.num_in, device=self.sigma_weight.device)
        self.epsilon_weight.copy_(eps_in.ger(torch.randn(self.num_out, device=self.sigma_weight.device)))
    ```

    ## Not rewritten
    - `*_like` calls (they follow their argument), calls that already pass `device`, calls moved
      at once (`torch.zeros(3).to(x.device)`, `.cuda()`, `.type(...)`), also after methods that
      keep the device (`torch.FloatTensor(s).unsqueeze(0).detach().to(device)`).
    - Anything in `__init__`: the module is still being built on the CPU, and factories whose
      result goes into `nn.Parameter(...)` or `register_buffer(...)` move with the module.
    - Static methods, class methods and functions nested in methods (no module to ask), and
      methods run during `__init__` before any parameter exists: reported, not guessed.
    - Plain functions: reported when they also deal with devices (mention `device`, `.to(` or
      `cuda`), since a CPU tensor there is a likely mismatch; otherwise left alone (data
      preparation on the CPU is normal).
    - Legacy constructors given a lone argument the facts do not show to be a size, data or a
      NumPy array (`torch.FloatTensor(x)`, `x` a parameter: a size or data?) are reported; the
      others become `torch.empty`, `torch.tensor` or `torch.as_tensor` (an array's memory is
      shared on the CPU, as the legacy constructor shared it), as in TFD008.

    ## Fix safety
    Safe. The values are drawn from the same generator in the same order; only where the new
    tensor lives changes, and it is placed with the module it is used with. (On a CUDA device the
    random numbers come from the CUDA generator, which the CPU-only check cannot compare.)
    """

    code = "TFD003"
    skips_within_statements = True
    name = "factory-without-device"
    summary = "Tensor factories inside nn.Module methods create CPU tensors: pass `device=`"
    safe = True
    triggers = ("torch", "Tensor")

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """A factory call without ``device=``, not moved at once, in a class that may be an
        ``nn.Module`` (outside ``__init__``) or in a function that mentions devices."""
        return _factory_sites(facts)

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._moved: set[int] = set()
        self._device_aware: dict[int, bool] = {}
        self._torch = imports.torch_module_alias(node) or "torch"
        return None

    def visit_Attribute(self, node: cst.Attribute) -> bool | None:
        if node.attr.value in MOVES:
            self._moved.update(id(call) for call in kept_chain(node.value))  # the calls whose result is moved
        return None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        qualified = self.qualified_names(original_node.func, ending_in=FACTORY_LAST_PARTS)
        legacy = torch_api.legacy_tensor_type(qualified)
        is_factory = bool(qualified & FACTORIES)
        if not (is_factory or legacy) or (legacy and legacy[1]):
            return updated_node  # torch.cuda.* types are TFD008's
        if id(original_node) in self._moved or nodes.keyword_arg(original_node, "device") is not None:
            return updated_node
        if nodes.has_star_args(original_node):
            return updated_node
        if not self._in_module_method_or_device_aware_function():
            return updated_node
        function = self.function_stack[-1] if self.function_stack else None
        if function is not None and function.name.value == "__init__" and self.device_source.enclosing_module_class():
            return updated_node
        device = self.device_source.for_site(original_node, allow_global=False)
        shown = nodes.code_of(original_node.func)
        if isinstance(device, NoDevice):
            self.report(original_node, f"`{shown}(...)` creates a CPU tensor: {device.reason}", fixable=False)
            return updated_node
        if legacy:
            made_by, _ = legacy_constructors.factory(self, original_node)
            rewritten = legacy_constructors.rewritten(updated_node, self._torch, made_by, legacy[0], device.code) if made_by else None
            if rewritten is None:
                factory = f"{self._torch}.empty(..., dtype={self._torch}.{legacy[0]}, device={device.code})"
                data = f"{self._torch}.tensor(..., dtype={self._torch}.{legacy[0]}, device={device.code})"
                self.report(original_node, f"legacy `{shown}(...)` creates a CPU tensor and nothing shows whether its argument is a size or data: write `{factory}` for a size or `{data}` for data", fixable=False)
                return updated_node
            if self.report(original_node, f"legacy `{shown}(...)` creates a CPU tensor: use a factory with `device={device.code}`"):
                return rewritten
            return updated_node
        if self.report(original_node, f"`{shown}(...)` creates a CPU tensor: add `device={device.code}`"):
            return nodes.add_keyword_arg(updated_node, "device", device.code)
        return updated_node

    def _in_module_method_or_device_aware_function(self) -> bool:
        if self.device_source.enclosing_module_class() is not None:
            return True
        if not self.function_stack:
            return False
        function = self.function_stack[-1]
        if id(function) not in self._device_aware:
            text = nodes.code_of(function)
            self._device_aware[id(function)] = "device" in text or ".to(" in text or "cuda" in text
        return self._device_aware[id(function)]


# -- stage 1 ---------------------------------------------------------------------------------
DEVICE_AWARE_WORDS = ("device", ".to(", "cuda")
"""A function outside an ``nn.Module`` is only looked into when its text holds one."""
LEGACY_TYPE_NAMES = frozenset(torch_api.LEGACY_TENSOR_DTYPES)


def is_factory_name(name: str) -> bool:
    """A ``torch`` factory, or a legacy constructor (CPU or CUDA: the codemod tells them apart)."""
    if name in FACTORIES:
        return True
    parts = name.split(".")
    return parts[0] == "torch" and parts[-1] in LEGACY_TYPE_NAMES and (len(parts) == 2 or parts[1:-1] == ["cuda"])


def _factory_site_possible(f: FileFacts) -> bool:
    if not (f.torch_imported and f.names & FACTORY_LAST_PARTS):
        return False
    in_function = bool(f.function_names) and any(w in f.text for w in DEVICE_AWARE_WORDS)
    return f.has_class_with_bases or in_function


def _factory_sites(f: FileFacts) -> Iterator[ast.Call]:
    if not _factory_site_possible(f):
        return
    scan, moved, aware = f.scan, set(), {}

    def device_aware(func) -> bool:
        if id(func) not in aware:
            text = ast_scan.function_text(func, f.lines)
            aware[id(func)] = any(w in text for w in DEVICE_AWARE_WORDS)
        return aware[id(func)]

    for node, cls, func in f.contexts:
        if isinstance(node, ast.Attribute) and node.attr in MOVES:
            value = node.value  # seen before the calls themselves (preorder)
            while isinstance(value, ast.Call):
                moved.add(id(value))
                value = value.func.value if isinstance(value.func, ast.Attribute) and value.func.attr in KEEP_DEVICE else None
        if not isinstance(node, ast.Call) or id(node) in moved:
            continue
        if has_keyword(node, "device") or has_star_args(node):
            continue
        if not (scan.opaque or any(is_factory_name(q) for q in scan.qualified(node.func))):
            continue
        if func is not None and func.name == "__init__":
            if device_aware(func):  # in an nn.Module's __init__ never; elsewhere only device-aware
                yield node
        elif scan.is_module_class(cls) or (func is not None and device_aware(func)):
            yield node
