from __future__ import annotations

import ast
import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts, in_module_forward, module_class_possible

# ``torch.nn`` layers that own parameters or buffers (state that must be trained and moved).
STATEFUL_LAYERS = {
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "InstanceNorm1d",
    "InstanceNorm2d", "InstanceNorm3d", "GroupNorm", "LayerNorm", "RMSNorm", "LocalResponseNorm",
    "Embedding", "EmbeddingBag", "PReLU", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "Transformer", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerDecoder",
}


class LayerBuiltInForward(Codemod):
    """
    ## What it does
    Reports `torch.nn` layers that own weights or running statistics (`nn.Linear`,
    `nn.Conv2d`, `nn.BatchNorm2d`, `nn.LSTM`, ...) constructed inside the `forward` method of an
    `nn.Module`, such as `nn.BatchNorm2d(c)(x)`.

    ## Why is this bad?
    A layer built in `forward` is a new layer on every call: its weights are freshly initialised
    on the CPU each time, they are not registered in the module, so the optimizer never trains
    them, `.to(device)` never moves them (`RuntimeError: Input type (torch.cuda.FloatTensor) and
    weight type (torch.FloatTensor) should be the same` on a GPU), and `state_dict()` never saves
    them. A BatchNorm built this way never accumulates running statistics either.

    ## Example
    ```python
    def forward(self, x):
        x = self.conv(x)
        return nn.BatchNorm2d(x.shape[1])(x)
    ```

    ## Use instead
    ```python
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(self.conv(x))
    ```

    ## Not rewritten
    Nothing is rewritten: moving the layer to `__init__` needs its constructor arguments there
    (often computed from the input's shape in `forward`) and a name for it, and changes the
    model's `state_dict`. Layers without state (`nn.ReLU()`, `nn.Dropout()`, `nn.Flatten()`),
    layers built in `__init__` or other methods, and functions nested inside `forward` are not
    reported.

    ## Fix safety
    No fix is offered (report only): the findings are left for manual review.
    """

    code = "TFD013"
    name = "layer-built-in-forward"
    summary = "A layer built inside `forward` gets new untrained CPU weights on every call: build it in `__init__`"
    safe = True
    triggers = ("forward",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """A stateful ``torch.nn`` layer built in a module's ``forward``."""
        if not (module_class_possible(facts) and "forward" in facts.function_names and facts.names & STATEFUL_LAYERS):
            return False
        scan = facts.scan
        for node, klass, func in facts.contexts:
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                if in_module_forward(scan, klass, func) and (
                    scan.opaque or any(_is_stateful_layer_name(q) for q in scan.qualified(node.func))
                ):
                    return True
        return False

    def visit_Call(self, node: cst.Call) -> None:
        layer = self._stateful_layer(node.func)
        if layer is None or not self._in_forward():
            return
        self.report(
            node,
            f"`{nodes.code_of(node.func)}(...)` built inside `forward`: its weights are re-created on the CPU "
            f"on every call, never trained, moved or saved; create it once in `__init__` as an attribute",
            fixable=False,
        )

    def _stateful_layer(self, func: cst.BaseExpression) -> str | None:
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return None  # ``nn.BatchNorm2d(c)(x)``: the inner call is the one reported
        for q in self.qualified_names(func, ending_in=frozenset(STATEFUL_LAYERS)):
            parts = q.split(".")
            if parts[:2] == ["torch", "nn"] and parts[-1] in STATEFUL_LAYERS and (
                len(parts) == 3 or parts[2] == "modules"
            ):
                return parts[-1]
        return None

    def _in_forward(self) -> bool:
        cls = self.device_source.enclosing_module_class()
        if cls is None or not self.function_stack:
            return False
        func = self.function_stack[-1]
        return func.name.value == "forward" and any(stmt is func for stmt in cls.body.body)


# -- stage 1 ---------------------------------------------------------------------------------
def _is_stateful_layer_name(name: str) -> bool:
    parts = name.split(".")
    return parts[:2] == ["torch", "nn"] and parts[-1] in STATEFUL_LAYERS and (len(parts) == 3 or parts[2] == "modules")
