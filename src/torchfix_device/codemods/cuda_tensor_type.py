from __future__ import annotations

import ast
import libcst as cst
import libcst.matchers as m

from torchfix_device import _cst
from torchfix_device.codemod import Codemod
from torchfix_device.candidates import FileFacts
from torchfix_device.device_source import NoDevice

SET_DEFAULT_LAST = frozenset({"set_default_tensor_type"})


class CudaTensorType(Codemod):
    """
    ## What it does
    Rewrites the legacy CUDA tensor types to device-agnostic code:
    `torch.cuda.FloatTensor(2, 3)` → `torch.empty(2, 3, dtype=torch.float32, device=device)`,
    `torch.cuda.LongTensor([1, 2])` → `torch.tensor([1, 2], dtype=torch.int64, device=device)`,
    and `x.type(torch.cuda.FloatTensor)` → `x.to(device=device, dtype=torch.float32)`.
    The device is chosen as for `.cuda()` (TFD001).

    ## Why is this bad?
    `torch.cuda.FloatTensor` exists only with CUDA: the code fails on a CPU-only machine
    (`TypeError: type torch.cuda.FloatTensor not available`), and the types are deprecated in
    favour of a `dtype` plus a `device`.

    ## Example
    ```python
    mask = torch.cuda.ByteTensor(batch, steps)
    x = x.type(torch.cuda.FloatTensor)
    ```

    ## Use instead
    ```python
    mask = torch.empty(batch, steps, dtype=torch.uint8, device=device)
    x = x.to(device=device, dtype=torch.float32)
    ```

    ## Not rewritten
    A constructor given a lone name (`torch.cuda.FloatTensor(n)`: a size or data?) or keyword
    arguments, and the types used as values (`dtype = torch.cuda.FloatTensor if use_cuda else
    torch.FloatTensor`): reported for manual review. CPU types outside `nn.Module` methods
    (`torch.FloatTensor(...)`) are left alone; inside them TFD003 handles them.

    ## Fix safety
    Safe. `torch.empty` and the legacy size constructor both return uninitialised memory of the
    same shape and dtype; `torch.tensor` copies the same data; `.to(device=, dtype=)` converts
    like `.type()` did. On a machine without CUDA the code now runs on the CPU instead of failing.
    """

    code = "TFD008"
    name = "cuda-tensor-type"
    summary = "`torch.cuda.FloatTensor` & co. exist only with CUDA: use a dtype and a device"
    safe = True
    triggers = ("Tensor",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """An expression naming ``torch.cuda.FloatTensor`` or another CUDA tensor type (called,
        passed to ``.type()`` or used as a value)."""
        if not (facts.torch_imported and "cuda" in facts.names and facts.names & LEGACY_TYPE_NAMES):
            return False
        scan = facts.scan
        return any(
            isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
            and (scan.opaque or any(_is_cuda_legacy_type(q) for q in scan.qualified(node)))
            for node, _, _ in facts.contexts
        )

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._torch = _cst.torch_module_alias(node) or "torch"
        self._handled: set[int] = set()
        return None

    def _cuda_dtype(self, node: cst.BaseExpression) -> str | None:
        legacy = _cst.legacy_tensor_type(self.qualified_names(node, ending_in=_cst.LEGACY_TENSOR_TYPE_NAMES))
        return legacy[0] if legacy and legacy[1] else None

    def visit_Call(self, node: cst.Call) -> bool | None:
        # Mark the type objects that a rewrite below consumes, so they are not reported as values.
        if self._cuda_dtype(node.func):
            self._handled.add(id(node.func))
        if m.matches(node.func, m.Attribute(attr=m.Name("type"))) and len(node.args) == 1 and self._cuda_dtype(node.args[0].value):
            self._handled.add(id(node.args[0].value))
        if "torch.set_default_tensor_type" in self.qualified_names(node.func, ending_in=SET_DEFAULT_LAST):
            self._handled.update(id(a.value) for a in node.args)  # TFD014's finding
        return None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        dtype = self._cuda_dtype(original_node.func)
        if dtype is not None:
            return self._constructor(original_node, updated_node, dtype)
        if m.matches(original_node.func, m.Attribute(attr=m.Name("type"))) and len(original_node.args) == 1:
            arg = original_node.args[0]
            dtype = self._cuda_dtype(arg.value) if arg.keyword is None else None
            if dtype is not None:
                return self._type_call(original_node, updated_node, dtype)
        return updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if id(original_node) not in self._handled and self._cuda_dtype(original_node):
            self.report(
                original_node,
                f"`{_cst.code_of(original_node)}` used as a value: replace it by a dtype and a device by hand",
                fixable=False,
            )
        return updated_node

    def _constructor(self, original: cst.Call, updated: cst.Call, dtype: str) -> cst.BaseExpression:
        shown = _cst.code_of(original.func)
        device = self.device_source.for_site(original)
        if isinstance(device, NoDevice):
            self.report(original, f"`{shown}(...)`: {device.reason}", fixable=False)
            return updated
        rewritten = _cst.legacy_constructor_call(updated, self._torch, dtype, device.code)
        if rewritten is None:
            self.report(original, f"`{shown}(...)`: cannot tell a size from data; rewrite by hand", fixable=False)
            return updated
        if self.report(original, f"`{shown}` exists only with CUDA: use `dtype={self._torch}.{dtype}, device={device.code}`"):
            return rewritten
        return updated

    def _type_call(self, original: cst.Call, updated: cst.Call, dtype: str) -> cst.BaseExpression:
        device = self.device_source.for_site(original)
        if isinstance(device, NoDevice):
            self.report(original, f"`.type(...)` with a CUDA type: {device.reason}", fixable=False)
            return updated
        if not self.report(original, f"`.type(torch.cuda.*)` exists only with CUDA: use `.to(device={device.code}, dtype=...)`"):
            return updated
        template = cst.ensure_type(
            cst.parse_expression(f"_.to(device={device.code}, dtype={self._torch}.{dtype})"), cst.Call
        )
        func = cst.ensure_type(updated.func, cst.Attribute).with_changes(attr=cst.Name("to"))
        return template.with_changes(func=func, lpar=updated.lpar, rpar=updated.rpar)


# -- stage 1 ---------------------------------------------------------------------------------
LEGACY_TYPE_NAMES = frozenset(_cst.LEGACY_TENSOR_DTYPES)


def _is_cuda_legacy_type(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "torch" and parts[1:-1] == ["cuda"] and parts[-1] in LEGACY_TYPE_NAMES
