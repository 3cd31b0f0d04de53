import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts import devices, kinds
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.sizes import Size
from torchfix_device.facts.sizes import evidence as size_evidence
from torchfix_device.syntax.nodes import numpy_subject, zero_index
from torchfix_device.facts.stores import written_in_place
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes

TO_ARRAY = frozenset({"numpy.array", "numpy.asarray"})
PLOTTING = frozenset(
    f"matplotlib.pyplot.{f}"
    for f in (
        "plot", "imshow", "scatter", "hist", "hist2d", "bar", "barh", "matshow", "pcolor", "pcolormesh", "contour",
        "contourf", "quiver", "errorbar", "fill_between", "semilogx", "semilogy", "loglog", "step", "stem", "boxplot",
        "violinplot", "pie", "stackplot",
    )
)
"""pyplot functions that take arrays (matplotlib converts each with ``np.asarray``)."""
CONVERTER_LAST_PARTS = frozenset(q.rpartition(".")[2] for q in TO_ARRAY | PLOTTING)
"""What the names of a call this codemod looks at end in (the others need no scope analysis)."""
DEVICE_WORDS = devices.DEVICE_WORDS | {"load"}
"""What stage 1 looks for (:func:`torchfix_device.facts.devices.moves_to_a_device`, with
``torch.load`` spelt ``load``)."""
ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class HostTransferWithoutCpu(Codemod):
    """
    ## What it does
    Adds `.cpu()` where a tensor that may be on the GPU, once the file is migrated (or already),
    goes to host code that needs it in main memory: `x.numpy()` and `x.data.numpy()` become
    `x.cpu().numpy()` and `x.data.cpu().numpy()`; `np.array(t)` and `np.asarray(t)` become
    `np.array(t.cpu())`; a tensor given to a pyplot function (`plt.plot(t)`, `plt.imshow(t)`,
    `plt.scatter`, `plt.hist`..., which convert with `np.asarray`) gets `.cpu()` too, so that
    `PIL.Image.fromarray(t.numpy())` and plotting work on the GPU.

    Only in a file that may put values on a device: one with `.cuda`, `.to`, `device`
    (`torch.device`, `device=`; not `device=x.device`, which follows a tensor already placed),
    `map_location=`, `torch.load` (which TFD005 gives `map_location=device`),
    `set_default_tensor_type` or `set_default_device`. The evidence that
    the value is a tensor: for `x.numpy()`, the method itself, in a file that imports torch and
    no other library whose objects have `.numpy()` (TensorFlow, Paddle, pandas, JAX...) and whose
    own classes define no `numpy()` (else `x` must be shown to be a tensor, as below); for
    `np.array`/`np.asarray` and plotting, the argument must be shown to be a tensor: made by
    torch (`torch.randn(...)`, `Variable(...)`, the output of an `nn.Linear` called through its
    name...), or by a method only tensors have (`out.detach()`, `t.view(-1)` is not one: NumPy
    has `view`).

    ## Why is this bad?
    NumPy arrays live in main memory. Converting a tensor that is on the GPU raises
    `TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the
    tensor to host memory first.` A migration that moves the model with `.to(device)` puts its
    outputs on the GPU, so code that ran on the CPU-only machine of the legacy author, or that
    moved only under a flag, now fails at the first `.numpy()`, `np.array(...)` or plot.

    ## Example
    ```python
    output = model(x.to(device))
    scores = output.data.numpy()
    plt.imshow(output[0].detach())
    ```

    ## Use instead
    ```python
    output = model(x.to(device))
    scores = output.data.cpu().numpy()
    plt.imshow(output[0].detach().cpu())
    ```

    ## Not rewritten
    A file that moves nothing to a device (no word above): its values stay on the CPU, and so
    do those of functions of other files called from it, as far as this file shows (a helper
    module `def to_np(x): return x.data.numpy()` without device code is left as it is). A value
    shown to be on the CPU: `x.cpu().numpy()`, `x.detach().cpu().numpy()`, a
    `torch.from_numpy(...)` or a torch factory without `device=` (outside an `nn.Module` class,
    where TFD003 gives factories the module's device) that no statement moves, `.data` or an
    element of such a value, `torch.sort(x)`'s parts of such an `x`. An item of a `DataLoader`
    never moved since (no codemod moves a data set's items; not where a `collate_fn` or data set
    class of the file may move them), the loader passed to a parameter too where every call of
    a script no file imports gives one. Anything in the `else:` of `if F:` (or under
    `if not F:`) where every place of the file that may put a value on a device is under
    `if F:`, a flag set once: that is the path where nothing was moved. `np.array(a)` of anything not shown to be a tensor (a list, an
    array, a parameter: `.cpu()` would raise on them). `x.data.numpy()[0]` of a scalar, which
    TFD006 turns into `x.item()`. Axes methods (`ax.plot(t)`) and keyword arguments of plotting
    functions. In a file that also imports a library whose objects have `.numpy()`, `x.numpy()`
    of a value not shown to be a tensor is reported for manual review.

    ## Fix safety
    Safe: `.cpu()` of a tensor on the CPU returns the tensor itself, so on the CPU the program
    does exactly what it did (`x.cpu().numpy()` shares `x`'s memory as `x.numpy()` does); on a
    GPU the conversion, which raised, works on a copy in main memory. The fix is unsafe where the
    array of `x.numpy()` or `np.asarray(x)` is written to (`a = x.numpy()` then `a[0] = 1`,
    `a += 1`, `a.fill(0)`, `out=a`): on the CPU such writes change the tensor too, on the GPU
    they change only the copy.
    """

    code = "TFD018"
    skips_within_statements = True
    name = "host-transfer-without-cpu"
    summary = "`x.numpy()`, `np.array(x)` and plotting fail on a GPU tensor: add `.cpu()` where it may be on the device"
    safe = True
    triggers = ("numpy", "array", *(q.rpartition(".")[2] for q in sorted(PLOTTING)))

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """A torch import and a word with which the file may put a value on a device (every
        answer of :func:`~torchfix_device.facts.devices.moves_to_a_device` comes from one)."""
        moves = bool(facts.names & DEVICE_WORDS) or bool(facts.keywords & devices.DEVICE_KEYWORDS)
        return facts.torch_imported and moves and next(cls.sites(facts), None) is not None

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``x.numpy()`` calls, and calls that may be ``np.array``/``np.asarray`` or plotting."""
        scan = facts.scan
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "numpy" and not node.args and not node.keywords:
                    yield node
                elif node.args and scan.may_name(func, TO_ARRAY | PLOTTING):
                    yield node

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self.values = facts_values.of(self)
        self.sizes = size_evidence(self.values)
        return None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and not original_node.args:
            if not self.values.module_path(func):
                return self._numpy(original_node, updated_node)
            return updated_node
        names = self.qualified_names(func, ending_in=CONVERTER_LAST_PARTS)  # the node visited: the codemod's own answer holds
        if names & TO_ARRAY:
            return self._arguments(original_node, updated_node, "np." + next(iter(names & TO_ARRAY)).rpartition(".")[2], first_only=True)
        if names & PLOTTING:
            return self._arguments(original_node, updated_node, "plt." + next(iter(names & PLOTTING)).rpartition(".")[2], first_only=False)
        return updated_node

    # -- x.numpy() --------------------------------------------------------------------------
    def _numpy(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        receiver = cst.ensure_type(original.func, cst.Attribute).value
        if self._scalar_index(original) or not devices.may_be_on_device(self.values, receiver):
            return updated
        code = nodes.code_of(receiver)
        if not kinds.is_tensor(self.values, receiver):
            doubt = kinds.numpy_doubt(self.values)
            if doubt is not None:
                self.report(
                    original,
                    f"`{code}.numpy()` of a value that may be a tensor on the device ({doubt}): "
                    f"use `{code}.cpu().numpy()` if it is a torch tensor",
                    fixable=False,
                )
                return updated
        message = f"`{code}.numpy()` of a tensor that may be on the device: use `{code}.cpu().numpy()`"
        if not self._fix(original, message, "numpy()"):
            return updated
        func = cst.ensure_type(updated.func, cst.Attribute)
        return updated.with_changes(func=func.with_changes(value=_cpu(func.value)))

    def _scalar_index(self, call: cst.Call) -> bool:
        """``x.data.numpy()[0]`` of a scalar: TFD006 turns it into ``x.item()``."""
        parent = self.parent_of(call)
        if not (isinstance(parent, cst.Subscript) and parent.value is call and zero_index(parent)):
            return False
        subject = numpy_subject(parent)
        size = self.sizes.size(subject) if subject is not None else None
        return size is not None and size is not Size.NUMBER

    # -- np.array(t), plt.plot(t) -----------------------------------------------------------
    def _arguments(self, original: cst.Call, updated: cst.Call, what: str, first_only: bool) -> cst.BaseExpression:
        positional = nodes.positional_args(original)
        if nodes.has_star_args(original):
            return updated
        chosen = {id(a) for a in (positional[:1] if first_only else positional)}
        moved = [
            i for i, arg in enumerate(original.args)
            if id(arg) in chosen and self._shown_tensor(arg.value) and devices.may_be_on_device(self.values, arg.value)
        ]
        if not moved:
            return updated
        shown = ", ".join(f"`{nodes.code_of(original.args[i].value)}`" for i in moved)
        message = f"`{what}(...)` of a tensor that may be on the device ({shown}): add `.cpu()`"
        if not self._fix(original, message, what + "(...)", check_writes=what == "np.asarray"):
            return updated
        args = list(updated.args)
        for i in moved:
            args[i] = args[i].with_changes(value=_cpu(args[i].value))
        return updated.with_changes(args=args)

    def _shown_tensor(self, expr: cst.BaseExpression) -> bool:
        return kinds.is_tensor(self.values, expr) or (
            kinds.tensor_by_method(self.values, expr) and cst.ensure_type(expr, cst.Call).func.attr.value in kinds.TENSOR_METHODS  # type: ignore[attr-defined]
        )

    def _fix(self, original: cst.Call, message: str, what: str, check_writes: bool = True) -> bool:
        written = written_in_place(self.values, original) if check_writes else None
        if written is not None:
            return self.report(
                original,
                f"{message} (unsafe: the array is written to at `{nodes.code_of(written).strip()[:60]}`; on the CPU "
                f"that changes the tensor too, on the device only the copy `.cpu()` makes)",
                safe=False,
            )
        return self.report(original, message)


def _cpu(expr: cst.BaseExpression) -> cst.Call:
    """``expr.cpu()``, in parentheses where ``expr`` is not an atom."""
    if not isinstance(expr, ATOMS) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("cpu")))

