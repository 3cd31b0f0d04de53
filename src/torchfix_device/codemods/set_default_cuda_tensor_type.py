from __future__ import annotations

from typing import Union

import libcst as cst
from torchfix_device.syntax import imports
from torchfix_device import torch_api
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.devices.source import NoDevice

SET_DEFAULT = {"torch.set_default_tensor_type"}
SET_DEFAULT_LAST = frozenset({"set_default_tensor_type"})


class SetDefaultCudaTensorType(Codemod):
    """
    ## What it does
    Rewrites `torch.set_default_tensor_type(torch.cuda.FloatTensor)` (or the string form
    `"torch.cuda.FloatTensor"`) standing as a statement of its own to
    `torch.set_default_device(device)`, with the device chosen as for `.cuda()` (TFD001): an
    existing `torch.device` binding, else
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` inserted once. For a
    type other than `FloatTensor` (`DoubleTensor`, `HalfTensor`, `BFloat16Tensor`) a
    `torch.set_default_dtype(torch.float64)` line is added as well.

    ## Why is this bad?
    `torch.set_default_tensor_type` is deprecated since PyTorch 2.1, and a CUDA tensor type
    fails on a machine without CUDA (`TypeError: type torch.cuda.FloatTensor not available`).
    `torch.set_default_device` and `torch.set_default_dtype` say the same thing separately and
    accept any device.

    ## Example
    ```python
    torch.set_default_tensor_type(torch.cuda.DoubleTensor)
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.set_default_device(device)
    torch.set_default_dtype(torch.float64)
    ```

    ## Not rewritten
    CPU types (`torch.set_default_tensor_type(torch.DoubleTensor)`), a type given as a variable,
    and calls used as a value or sharing a line with other statements: reported for manual review
    (CPU types are not reported).

    ## Fix safety
    Unsafe, applied only with `--unsafe-fixes`. `set_default_device` works through a torch
    function mode: unlike the old call it does not change the legacy constructors
    (`torch.Tensor(2)`, `torch.FloatTensor(2)` stay on the CPU) nor `torch.Tensor` as a type, and
    it adds a small overhead to every tensor creation. On a machine without CUDA the code now runs
    on the CPU instead of failing.
    """

    code = "TFD014"
    name = "set-default-cuda-tensor-type"
    summary = "`torch.set_default_tensor_type(torch.cuda.*Tensor)` is deprecated and CUDA-only: use `set_default_device`"
    safe = False
    triggers = ("set_default_tensor_type",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """A possible ``torch.set_default_tensor_type``."""
        return facts.torch_imported and "set_default_tensor_type" in facts.names

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._torch = imports.torch_module_alias(node) or "torch"
        return None

    def _cuda_dtype(self, call: cst.Call) -> str | None:
        if len(call.args) != 1 or call.args[0].star:
            return None
        keyword = call.args[0].keyword
        if keyword is not None and keyword.value != "t":
            return None
        value = call.args[0].value
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            legacy = torch_api.legacy_tensor_type({text}) if isinstance(text, str) else None
        else:
            legacy = torch_api.legacy_tensor_type(self.qualified_names(value, ending_in=torch_api.LEGACY_TENSOR_TYPE_NAMES))
        return legacy[0] if legacy and legacy[1] else None

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> Union[cst.BaseStatement, cst.FlattenSentinel[cst.BaseStatement]]:
        if len(original_node.body) != 1 or not isinstance(original_node.body[0], cst.Expr):
            return updated_node
        call = original_node.body[0].value
        if not isinstance(call, cst.Call) or not (self.qualified_names(call.func, ending_in=SET_DEFAULT_LAST) & SET_DEFAULT):
            return updated_node
        dtype = self._cuda_dtype(call)
        if dtype is None:
            return updated_node
        device = self.device_source.for_site(call)
        if isinstance(device, NoDevice):
            self.report(call, f"`set_default_tensor_type` with a CUDA type: {device.reason}", fixable=False)
            return updated_node
        extra = f" and `{self._torch}.set_default_dtype({self._torch}.{dtype})`" if dtype != "float32" else ""
        message = f"`set_default_tensor_type(torch.cuda.*)` is deprecated and CUDA-only: use `{self._torch}.set_default_device({device.code})`{extra}"
        if not self.report(call, message):
            return updated_node
        first = updated_node.with_changes(body=[cst.Expr(cst.parse_expression(f"{self._torch}.set_default_device({device.code})"))])
        if dtype == "float32":
            return first
        second = cst.SimpleStatementLine(
            body=[cst.Expr(cst.parse_expression(f"{self._torch}.set_default_dtype({self._torch}.{dtype})"))]
        )
        return cst.FlattenSentinel([first, second])
