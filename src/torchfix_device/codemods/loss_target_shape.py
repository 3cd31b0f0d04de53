import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.dims import dims
from torchfix_device.facts.tensor_clues import layer_class
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes

RAISING = frozenset({"BCELoss", "BCEWithLogitsLoss", "binary_cross_entropy", "binary_cross_entropy_with_logits"})
"""Losses that raise ``ValueError`` since PyTorch 0.4.1 where the target's size is not the input's."""
BROADCASTING = frozenset({"MSELoss", "L1Loss", "SmoothL1Loss", "mse_loss", "l1_loss", "smooth_l1_loss"})
"""Losses that broadcast input and target since 0.4 (with a warning): another number, no error."""
LOSSES = RAISING | BROADCASTING
SIMPLE = (cst.Name, cst.Attribute)


class LossTargetShape(Codemod):
    """
    ## What it does
    Gives the target of an elementwise loss the input's shape, `criterion(outputs,
    labels.view_as(outputs))`, where the two are shown to have different numbers of dimensions:
    a GAN's discriminator output of shape `(batch, 1)` against labels made by
    `torch.ones(batch_size)`. The losses are `nn.BCELoss`, `nn.BCEWithLogitsLoss`, `nn.MSELoss`,
    `nn.L1Loss`, `nn.SmoothL1Loss` called through a name bound to one, and their
    `torch.nn.functional` forms.

    ## Why is this bad?
    PyTorch 0.3 computed these losses element by element over the two tensors read in order,
    whatever their shapes, as long as they had as many elements. Since 0.4.1 the binary cross
    entropy losses raise `ValueError: Using a target size (torch.Size([100])) that is different
    to the input size (torch.Size([100, 1])) is deprecated`, and the others broadcast: a
    `(100, 1)` input against a `(100,)` target gives a `(100, 100)` difference, a loss that is no
    longer the one the code was written for, with only a warning.

    ## Example
    ```python
    criterion = nn.BCELoss()
    real_labels = torch.ones(batch_size)
    outputs = D(images.view(batch_size, -1))
    d_loss_real = criterion(outputs, real_labels)
    ```

    ## Use instead
    ```python
    criterion = nn.BCELoss()
    real_labels = torch.ones(batch_size)
    outputs = D(images.view(batch_size, -1))
    d_loss_real = criterion(outputs, real_labels.view_as(outputs))
    ```

    ## Not rewritten
    A call whose input and target are not both shown to have a number of dimensions, or are
    shown to have the same number (a shape that differs in size only is not shown by the code);
    an input that is not a name or an attribute (`criterion(D(x), y)`: naming it twice would
    run `D` twice), which is reported for review; a loss not shown to be one of these (a
    project's own `criterion`, `self.criterion`).

    ## Fix safety
    Safe for the binary cross entropy losses: with the shapes shown to differ, the original
    raises `ValueError` on every run, and `view_as` reads the target in the order PyTorch 0.3
    did, so the fixed call computes the 0.3 loss (and still fails where the element counts
    differ, as 0.3 did). Unsafe for the broadcasting losses: the original runs and gives another
    number, which the fix changes back to the 0.3 one.
    """

    code = "TFD024"
    skips_within_statements = True
    name = "loss-target-shape"
    summary = "An elementwise loss whose target has another shape than its input: 0.3 read both in order, 2.x raises or broadcasts"
    safe = True
    triggers = tuple(sorted(LOSSES))

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """Calls with two arguments or more, in a file that imports torch and names one of the losses."""
        if not facts.torch_imported or not any(name in facts.text for name in LOSSES):
            return
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Call) and len(node.args) + len(node.keywords) >= 2:
                yield node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        loss = self._loss(original_node)
        if loss is None:
            return updated_node
        pair = _input_and_target(original_node)
        if pair is None:
            return updated_node
        (input_index, input_arg), (target_index, target_arg) = pair
        input_dims = dims(self.values, input_arg.value)
        target_dims = dims(self.values, target_arg.value)
        if input_dims is None or target_dims is None or input_dims == target_dims:
            return updated_node
        input_code, target_code = nodes.code_of(input_arg.value), nodes.code_of(target_arg.value)
        shapes = f"its input `{nodes.short_text(input_code)}` has {input_dims} dimensions and its target `{nodes.short_text(target_code)}` {target_dims}"
        if not isinstance(input_arg.value, SIMPLE):
            self.report(original_node, f"`{loss}` is computed on tensors of different shapes, {shapes}: give the target the input's shape by hand, with the input bound to a name first", fixable=False)
            return updated_node
        fixed = f"{_atom(target_code, target_arg.value)}.view_as({input_code})"
        if loss in RAISING:
            message = f"`{loss}` raises ValueError since PyTorch 0.4.1 where the target's shape is not the input's, {shapes}, which 0.3 read element by element: use `{fixed}`"
            applied = self.report(original_node, message)
        else:
            message = f"`{loss}` broadcasts since PyTorch 0.4, {shapes}, so it no longer compares them element by element as 0.3 did: use `{fixed}` (unsafe: the original runs and gives another number, which this changes)"
            applied = self.report(original_node, message, safe=False)
        if not applied:
            return updated_node
        new_target = cst.parse_expression(f"{_atom(nodes.code_of(updated_node.args[target_index].value), target_arg.value)}.view_as({nodes.code_of(updated_node.args[input_index].value)})")
        args = list(updated_node.args)
        args[target_index] = args[target_index].with_changes(value=new_target)
        return updated_node.with_changes(args=args)

    def _loss(self, call: cst.Call) -> str | None:
        """The loss ``call`` computes (``BCELoss``, ``mse_loss``...), where shown."""
        if nodes.has_star_args(call):
            return None
        for qualified in self.qualified_names(call.func, ending_in=LOSSES):  # the node visited: its own answer holds
            package, _, last = qualified.rpartition(".")
            if package == "torch.nn.functional" and last in LOSSES:
                return last
        if isinstance(call.func, cst.Name):
            layer = layer_class(self.values, call.func)
            if layer in LOSSES:
                return layer
        return None


def _input_and_target(call: cst.Call) -> tuple[tuple[int, cst.Arg], tuple[int, cst.Arg]] | None:
    """The input and target arguments with their positions (by position or by keyword)."""
    found: dict[str, tuple[int, cst.Arg]] = {}
    position = 0
    for index, arg in enumerate(call.args):
        if arg.keyword is None:
            name = ("input", "target")[position] if position < 2 else None
            position += 1
        else:
            name = arg.keyword.value if arg.keyword.value in ("input", "target") else None
        if name is not None:
            found[name] = (index, arg)
    if "input" not in found or "target" not in found:
        return None
    return found["input"], found["target"]


def _atom(code: str, node: cst.BaseExpression) -> str:
    """``code`` as the receiver of a method call (in parentheses where it needs them)."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or (node.lpar and node.rpar):
        return code
    return f"({code})"

