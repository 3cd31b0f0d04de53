from __future__ import annotations

import ast
import string

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.codemods.loss_data_index.accumulated import NOT_SCALAR_ATTRS, Accumulation, plan
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.dims import dims
from torchfix_device.facts.grad import GradEvidence
from torchfix_device.facts.kinds import bound_values
from torchfix_device.facts.sizes import Size, number_in_03
from torchfix_device.facts.sizes import evidence as size_evidence
from torchfix_device.syntax.nodes import numpy_subject, zero_index
from torchfix_device.facts.stores import store_of

DATA = m.Attribute(attr=m.Name("data"))
SAME_TEXT_CONVERSIONS = frozenset("eEfFgGdiu")
"""``%`` conversions giving the same text for a numpy float32 and the Python float of it (both
are converted with ``float()``; ``%s``/``%r`` are not)."""
PASSED_LOSS = (
    "unsafe: the loss comes through a parameter to which every call in this file passes a torch loss; "
    "a call from another file may pass something else"
)


class LossDataIndex(Codemod):
    """
    ## What it does
    Rewrites `x.data[0]` to `x.item()` where the code shows that `x` is a scalar, and so also
    `x.data[0][0]`, `x.data.numpy()[0]`, `x.data.cpu().numpy()[0]`, `x.cpu().data.numpy()[0]` and the same
    with `.tolist()` in place of `.numpy()` (`losses.append(loss.data.tolist()[0])`).
    The evidence, never a name: the result of a torch loss with a scalar reduction
    (`F.cross_entropy(...)`, `F.*_loss(...)`, a call of an `nn.*Loss()` instance bound in scope,
    moved with `.cuda()`/`.to()` or not, or chosen by a condition between two (`A() if c else B()`), or set as `self.x = nn.XLoss()` in this class's
    `__init__` and assigned nothing else); a full reduction (`.sum()`, `.mean()`, `.max()`, ...
    with no dimension, `torch.sum(x)`, `torch.max(x)` with one argument, `torch.dot(a, b)`);
    arithmetic of those with numbers, and methods that keep the shape (`.exp()`, `.float()`,
    `.cpu()`, ...); a function or method of the same file, or a function of another file of the
    run, every `return` of which is one of those; the call of an instance of a project class
    (of this file or another) whose `forward` (an `nn.Module`) or `__call__` returns one
    (`criterion = LabelSmoothing(...)`, `self.criterion = LabelSmoothing(...)`); a name every assignment of which is one of those; a name with one binding on which
    `.backward()` is called with no argument, or that such a name is built from by arithmetic
    (`loss = raw_loss + reg` then `loss.backward()`). Also the call of a parameter
    (`criterion(out, y)` in `def test(loader, model, criterion)`) where every call of the function
    in this file passes it a torch loss: a safe fix where every call in the other files of the run
    is shown to pass one too (the run taken as the project, as for project classes: a script's
    `criterion = nn.CrossEntropyLoss()` passed to `evaluate(model, data, criterion)` of a library
    file, also through up to three files: `lib.train(crit)` → `evaluate(..., crit)`), or where
    no file of the run imports this one; an unsafe one otherwise (a file that spells the
    function's name without calling it, or imports it under another name, shows nothing). So is
    `self.criterion = criterion` in `__init__` where every construction of the class in the run
    (`Trainer(args, model, nn.KLDivLoss(), optimizer)` in the script that imports it) passes a
    torch loss for that parameter, and no class of the file derives from it. An attribute of
    `self`, or an item of one, every value of which its class gives is one of those
    (`self.losses["total"] = cls_loss + box_loss`), and the values of such a dict taken by a
    loop (`for key, var in self.losses.items()`, `.values()`), where no method fills it
    (`update`, `setdefault`, `append`...).

    The dimensions fact (:mod:`torchfix_device.facts.dims`) is evidence too: an item of a tensor
    shown 1-dim (`for s in scores: if s.data[0] > 0`, also where `scores` is a parameter of a
    function of a script no file imports, which every call passes a 1-dim tensor) and
    `x.squeeze()` of a tensor whose sizes are all shown to be 1 are 0-dim. Then `x[0]` itself
    (not only `x.data[0]`) becomes `x.item()` where `x` cannot require grad (`w.data.squeeze()[0]`);
    where it may, it is reported (in 0.3 it was a 1-element `Variable`, not a number).

    The same in two steps: `fval = criterion(out, y).data`, then `fval[0]`, where every binding
    of `fval` that may reach the read is the `.data` of a value shown to be a scalar (both
    branches of an `if`, say), becomes `fval.item()`; a store (`fval[0] = v`) is left alone, and
    a name bound to the `.data` of anything else (`out = net(x).data`, then `out[0]`, a row) is
    real indexing and is not reported.

    Accumulated scalars are one fix over several statements: `total = 0`, then
    `total += loss.data` (or `+= n * criterion(...).data`, `total = total + loss.data`), then
    `total[0]` becomes `total += loss.item()` and `total`: every statement of it rewritten, or
    none (a `# noqa` on any of them keeps them all). The sum may then be rebound to what is
    computed from its number (`total = total[0] / n`, after the loop that accumulates): that
    value is the same before and after the fix, and so are the reads that only it reaches.

    ## Why is this bad?
    Before PyTorch 0.4 a loss was a 1-element tensor and `loss.data[0]` read its value. Since 0.4
    a loss is 0-dimensional, and indexing it raises `IndexError: invalid index of a 0-dim tensor.
    Use tensor.item()`. `.item()` returns the Python number, as the old code meant. On a 0-dim
    tensor `.numpy()` gives a 0-d array, so `.data.numpy()[0]` raises `IndexError: too many
    indices for array`; its `.tolist()` gives the number itself, so `.data.tolist()[0]` raises
    `TypeError: 'float' object is not subscriptable`; and a sum accumulated from `.data` is 0-dim, so `total[0]` raises.

    ## Example
    ```python
    loss = criterion(output, target)
    total_loss += loss.data
    print(loss.data[0], "{:.2f}".format(loss.data.cpu().numpy()[0]), total_loss[0] / n)
    ```

    ## Use instead
    ```python
    loss = criterion(output, target)
    total_loss += loss.item()
    print(loss.item(), "{:.2f}".format(loss.item()), total_loss / n)
    ```

    ## Not rewritten
    `images.data[0]` (the first sample of a batch), `layer.weight.data[0]` and
    `grads.data.numpy()[0]` are real indexing and stay. A loss built with `reduction="none"` or
    `reduce=False` is not a scalar and stays. A name is no evidence: a `criterion` parameter to
    which some call does not pass a loss (or whose function is used otherwise than called), a
    `self.criterion` of another class or rebound elsewhere, `reduce=False` passed by position, a
    parameter named `loss`, `x.sum(1).data[0]`. Where the code does not show that `x` is a
    scalar, it is left as it is and `check` reports it for manual review, naming the evidence
    that is missing; so is `x.data.numpy()[0].mean()` (a Python number has no `.mean()`), and an
    accumulated `total` that does not start from a number or is used otherwise than as
    `total[0]` (`total.cpu()`, `f(total)`), where a number would not do what the tensor does.
    An element of a tensor shown to be 1-dim, or of what a selection returns
    (`pred = out.max(1)[1]`, then `pred.data[0]`), is no scalar: TFD019 decides it (`pred[0].item()`).

    ## Fix safety
    Safe where `x` is shown to be a scalar: on a 0-dim tensor `x.data[0]` raises `IndexError` in
    every PyTorch since 0.4, so no working code changes meaning, and `.item()` gives the number
    the code read in 0.3. Where only `.backward()` shows one element, `x` may be a 1-element
    vector: `x.data[0]` then works today and gives a 0-dim tensor of the same number. The value
    of `.numpy()[0]` was a numpy `float32`; `.item()` gives a Python float of the same value,
    which `format`, f-strings and `%f` print alike but `print`/`str` print with more digits:
    the rewrite is unsafe where `x` may be a 1-element vector (on which `.numpy()[0]` works
    today) and the value is not only formatted. `.tolist()[0]` and `.item()` give the same
    Python number for a 0-dim tensor; the rewrite is unsafe where `x` may be a 1-element tensor
    of two dimensions or more (its `.tolist()[0]` is a list). An accumulated sum becomes a Python float summed
    in double precision instead of a float32 tensor: the same number up to float32 rounding.
    `x[0]` of a tensor shown 0-dim raises in every PyTorch since 0.4 as well.
    The accumulation fix is unsafe where the accumulated value is not shown to be a scalar (on a
    vector, `total[0]` is its first element's sum and `.item()` raises). A loss shown only by the
    calls of this file is unsafe where another file of the run imports it: a call from another
    file may pass a per-element loss. (A file of the project left out of the run is not seen.)
    """

    code = "TFD006"
    skips_within_statements = True
    name = "loss-data-index"
    summary = "`loss.data[0]` raises on 0-dim tensors since PyTorch 0.4: use `loss.item()`"
    safe = True
    triggers = (".data",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """``x.data[0]``, ``x.data.numpy()[0]``, or ``total[0]`` (with a ``.data`` elsewhere)."""
        if "data" not in facts.names:
            return False
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Subscript) and _ast_zero(node.slice):
                value = node.value
                if isinstance(value, ast.Name) or (isinstance(value, ast.Attribute) and value.attr == "data"):
                    return True
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
                    return True  # `.numpy()[0]`, `x.squeeze()[0]`
        return False

    @classmethod
    def sites(cls, facts: FileFacts):
        """Where it rewrites and reports: every ``x[0]``, every ``.data`` (``total += loss.data``)."""
        return (n for n, _, _ in facts.contexts if isinstance(n, ast.Attribute) and n.attr == "data" or isinstance(n, ast.Subscript) and _ast_zero(n.slice))

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self.evidence = size_evidence(facts_values.of(self))
        planned = plan(self, node, self.evidence)
        self._datas = {id(d): p for p in planned for d in p.datas}
        self._reads = {id(r): p for p in planned for r in p.reads}
        return None

    # -- rewrites ---------------------------------------------------------------------------
    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        planned = self._datas.get(id(original_node))
        if planned is not None and self._accumulation_fixed(planned):
            return _item(updated_node.value, updated_node)
        return updated_node

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        planned = self._reads.get(id(original_node))
        if planned is not None:
            if self._accumulation_fixed(planned):
                return cst.Name(planned.name, lpar=updated_node.lpar, rpar=updated_node.rpar)
            return updated_node
        if not zero_index(original_node):
            return updated_node
        value = original_node.value
        if m.matches(value, DATA):
            parent = self.parent_of(original_node)
            if isinstance(parent, cst.Subscript) and parent.value is original_node and zero_index(parent):
                return updated_node  # `x.data[0][0]`: decided on the outer index
            return self._index(original_node, updated_node, ".data[0]", cst.ensure_type(value, cst.Attribute).value)
        if isinstance(value, cst.Subscript) and zero_index(value) and m.matches(value.value, DATA):
            return self._index(original_node, updated_node, ".data[0][0]", cst.ensure_type(value.value, cst.Attribute).value)
        if numpy_subject(original_node) is not None:
            return self._numpy_index(original_node, updated_node)
        items_and_parts, data_names = self._indexed_names()
        if isinstance(value, cst.Name) and value.value in data_names and store_of(self.evidence.values, original_node) is None:
            data_of = self._data_of_scalar(value)
            if data_of is not None:
                return self._index_of_data(original_node, updated_node, data_of)
        if (_squeeze_or_function(value) or (isinstance(value, cst.Name) and value.value in items_and_parts)) and dims(self.evidence.values, value) == 0:
            return self._zero_dim_index(original_node, updated_node)
        return updated_node

    def _indexed_names(self) -> tuple[frozenset[str], frozenset[str]]:
        """Two cheap tests before resolving a name read as ``x[0]`` (one walk of the module):
        names a ``for`` binds whole or an unpacking binds (``for s in scores``, ``prec1, prec5 =
        f(...)``), whose ``x[0]`` may be of a 0-dim tensor that is no full reduction (those are
        TFD006's scalars already); and names some assignment binds to a ``.data``
        (``fval = f(x).data``)."""
        def compute() -> tuple[frozenset[str], frozenset[str]]:
            items: set[str] = set()
            datas: set[str] = set()
            for node in traversal.of_classes(self.evidence.values.module, cst.For, cst.CompFor, cst.AssignTarget, cst.Assign):
                if isinstance(node, (cst.For, cst.CompFor)) and isinstance(node.target, cst.Name):
                    items.add(node.target.value)
                elif isinstance(node, cst.AssignTarget) and isinstance(node.target, (cst.Tuple, cst.List)):
                    items.update(e.value.value for e in node.target.elements if isinstance(e.value, cst.Name))
                elif isinstance(node, cst.Assign) and m.matches(node.value, DATA):
                    datas.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
            return frozenset(items), frozenset(datas)

        return self.evidence.values.facet("names read as x[0]", compute)

    def _zero_dim_index(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        """``x[0]`` of a tensor shown to be 0-dim: in 0.3 a 1-element vector, whose element was a
        number where ``x`` was no ``Variable`` (then a 1-element ``Variable``)."""
        code = _nodes.short_text(_nodes.code_of(original.value))
        message = f"`{code}[0]` of a 0-dim tensor (a 1-element vector in PyTorch 0.3) raises since 0.4"
        why = self._grad().missing(original.value)
        if why is not None:
            self.report(original, f"{message}: use `{code}.item()` for its number or `{code}` for the tensor ({why})", fixable=False)
            return updated
        if self.report(original, f"{message}; it cannot require grad, so in 0.3 it was a number: use `{code}.item()`"):
            return _item(updated.value, updated)
        return updated

    def _data_of_scalar(self, name: cst.Name) -> Size | None:
        """The size shown for ``name`` when every binding of it that may reach this read is
        ``<x>.data`` of an ``x`` shown to be a scalar (``fval = criterion(out, y).data``); None
        otherwise (no report: a name bound to ``.data`` of anything else is real indexing)."""
        bound = bound_values(self.evidence.values, name)
        if not bound or not all(m.matches(v, DATA) for v in bound):
            return None
        sizes = [self._verdict(cst.ensure_type(v, cst.Attribute).value)[0] for v in bound]  # as for `x.data[0]`
        return None if None in sizes else max(sizes)  # type: ignore[type-var]  # the weakest

    def _index_of_data(self, original: cst.Subscript, updated: cst.Subscript, size: Size) -> cst.BaseExpression:
        """``fval[0]`` of ``fval = loss.data``: ``loss.data[0]`` in two steps, ``fval.item()``."""
        code = cst.ensure_type(original.value, cst.Name).value
        message = f"`{code}[0]` where `{code}` is the `.data` of a scalar: use `{code}.item()`"
        if size is Size.LIKELY:
            fixed = self.report(original, f"{message}; {PASSED_LOSS}", safe=False)
        else:
            fixed = self.report(original, message)
        return _item(updated.value, updated) if fixed else updated

    def _grad(self) -> GradEvidence:
        return self.evidence.grad()

    def _index(self, original: cst.Subscript, updated: cst.Subscript, what: str, subject: cst.BaseExpression) -> cst.BaseExpression:
        size, why = self._verdict(subject)
        if size is None:
            if why is not None and number_in_03(self.evidence.values, original) is not None:
                return updated  # an element of a 1-dim tensor or of a selection, not a scalar: TFD019's
            if why is not None:
                self.report(original, f"`{what}`: {why}; use `.item()` if it is a 0-dim loss", fixable=False)
            return updated
        if size is Size.LIKELY:
            fixed = self.report(original, f"`{what}` on a loss: use `.item()`; {PASSED_LOSS}", safe=False)
        else:
            fixed = self.report(original, f"`{what}` on a scalar: use `.item()`")
        if fixed:
            inner = updated.value if what == ".data[0]" else cst.ensure_type(updated.value, cst.Subscript).value
            return _item(cst.ensure_type(inner, cst.Attribute).value, updated)
        return updated

    def _numpy_index(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        size, why = self._verdict(numpy_subject(original))  # type: ignore[arg-type]
        method = cst.ensure_type(cst.ensure_type(original.value, cst.Call).func, cst.Attribute).attr.value  # numpy, tolist
        shown = f"`.{method}()[0]`"
        if size is None:
            if why is not None:
                self.report(original, f"{shown}: {why}; use `.item()` if it is a 0-dim loss", fixable=False)
            return updated
        parent = self.parent_of(original)
        if method == "numpy" and isinstance(parent, cst.Attribute) and parent.value is original:
            self.report(
                original,
                f"`.numpy()[0]` on a scalar, then `.{parent.attr.value}` of the numpy number, which a Python number "
                "lacks: use `.item()` and rewrite what follows by hand",
                fixable=False,
            )
            return updated
        if size is Size.LIKELY:
            fixed = self.report(original, f"{shown} on a loss: use `.item()`; {PASSED_LOSS}", safe=False)
        elif size is Size.ZERO_DIM or formats_alike(self, original):
            fixed = self.report(original, f"{shown} on a scalar: use `.item()`")
        elif method == "tolist":
            fixed = self.report(
                original,
                "`.tolist()[0]` on a one-element tensor: use `.item()`; unsafe: only `.backward()` shows it has one "
                "element, so it may be a 1-element tensor of two dimensions, whose `.tolist()[0]` is a list",
                safe=False,
            )
        else:
            fixed = self.report(
                original,
                "`.numpy()[0]` on a one-element tensor: use `.item()`; unsafe: only `.backward()` shows it has one "
                "element, so it may be a 1-element vector, on which `.numpy()[0]` works today and gives a numpy "
                "float32, which `print` shows with fewer digits than the Python float `.item()` gives",
                safe=False,
            )
        return _item(numpy_subject(updated), updated) if fixed else updated  # type: ignore[arg-type]

    # -- evidence ---------------------------------------------------------------------------
    def _verdict(self, subject: cst.BaseExpression) -> tuple[Size | None, str | None]:
        """(the size shown, None), or (None, why it cannot tell), or (None, None): clearly not
        a scalar (real indexing)."""
        if isinstance(subject, cst.Attribute) and subject.attr.value in NOT_SCALAR_ATTRS:
            return None, None
        size = self.evidence.size(subject) if isinstance(subject, cst.Subscript) else None
        if isinstance(subject, cst.Subscript) and size is not None and size is not Size.NUMBER:
            return size, None  # `self.losses["total"]`: an item shown to be a scalar
        if not isinstance(subject, (cst.Name, cst.Call, cst.Attribute, cst.BinaryOperation, cst.UnaryOperation)):
            return None, None
        size = self.evidence.size(subject)
        if size is not None and size is not Size.NUMBER:
            return size, None
        code = _nodes.code_of(subject)
        if isinstance(subject, cst.Name):
            values = self.evidence.binding_values(subject)
            what = (
                "it is not bound by a plain assignment here"
                if not values or any(not isinstance(v, cst.BaseExpression) for v in values)
                else "not every assignment is a loss or full reduction"
            )
            return None, f"cannot tell whether `{code}` is a scalar ({what}, and `{code}.backward()` is not called on it)"
        if isinstance(subject, cst.Call):
            return None, (
                f"cannot tell whether `{code}` is a scalar (not shown to be a torch loss with a scalar reduction "
                "or a full reduction)"
            )
        return None, f"cannot tell whether `{code}` is a scalar"

    def _accumulation_fixed(self, planned: Accumulation) -> bool:
        """Report ``planned`` once (at its first ``x.data``); whether its fix is applied."""
        if planned.applied is None:
            planned.applied = self._report_accumulation(planned)
        return planned.applied

    def _report_accumulation(self, planned: Accumulation) -> bool:
        anchor, name = planned.datas[0], planned.name
        if planned.problem is not None:
            self.report(anchor, f"`{name}[0]` of a sum of `.data`: {planned.problem}; accumulate `.item()` and read `{name}` by hand", fixable=False)
            return False
        lines = sorted({self.get_metadata(PositionProvider, r).start.line for r in planned.reads})
        message = (
            f"accumulated scalar `{name}`: accumulate `.item()` instead of `.data` and read `{name}` instead of "
            f"`{name}[0]` (line {', '.join(map(str, lines))})"
        )
        held = [n for n in planned.nodes() if n is not anchor and self.is_suppressed(n)]
        if held and not self.is_suppressed(anchor):
            line = self.get_metadata(PositionProvider, held[0]).start.line
            self.report(anchor, f"{message}; left as it is: `# noqa` on line {line} holds back part of this one fix", fixable=False)
            return False
        if planned.unproven:
            unproven = ", ".join(f"`{u}`" for u in planned.unproven)
            return self.report(
                anchor,
                f"{message}; unsafe: {unproven} is not shown to be a scalar, and on a vector `{name}[0]` is the sum "
                "of first elements where `.item()` raises",
                safe=False,
            )
        return self.report(anchor, message)


def _squeeze_or_function(value: cst.BaseExpression) -> bool:
    """``x.squeeze()`` or the call of a function by its name: the calls whose ``[0]`` may be of a
    0-dim tensor that is no full reduction (a cheap test before asking the dimensions)."""
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    return isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and func.attr.value == "squeeze" and not value.args)


def _item(subject: cst.BaseExpression, replaced: cst.BaseExpression) -> cst.Call:
    """``subject.item()``, in the parentheses ``replaced`` had."""
    return cst.Call(func=cst.Attribute(value=subject, attr=cst.Name("item")), lpar=replaced.lpar, rpar=replaced.rpar)


def _ast_zero(index: ast.expr) -> bool:
    if isinstance(index, ast.Tuple) and len(index.elts) == 1:
        index = index.elts[0]
    return isinstance(index, ast.Constant) and type(index.value) is int and index.value == 0


# -- is a numpy number only formatted? ------------------------------------------------------------
def formats_alike(codemod: Codemod, node: cst.BaseExpression) -> bool:
    """``node``'s value only goes through formatting that gives the same text for a numpy
    float32 and the Python float of it: a field without ``!s``/``!r`` of ``"...".format(...)``
    or of an f-string, a ``%f``/``%e``/``%g``/``%d`` operand of ``"..." % ...``."""
    parent = codemod.parent_of(node)
    if isinstance(parent, cst.FormattedStringExpression):
        return parent.expression is node and parent.conversion is None
    if isinstance(parent, cst.Arg):
        call = codemod.parent_of(parent)
        return isinstance(call, cst.Call) and _format_call_alike(call, parent)
    if isinstance(parent, cst.Element):
        holder = codemod.parent_of(parent)
        operation = codemod.parent_of(holder) if isinstance(holder, cst.Tuple) else None
        if isinstance(holder, cst.Tuple) and isinstance(operation, cst.BinaryOperation) and operation.right is holder:
            index = next(i for i, e in enumerate(holder.elements) if e is parent)
            return _percent_alike(operation, index, len(holder.elements))
        return False
    if isinstance(parent, cst.BinaryOperation) and parent.right is node:
        return _percent_alike(parent, 0, 1)
    return False


def _format_call_alike(call: cst.Call, arg: cst.Arg) -> bool:
    func = call.func
    if not (m.matches(func, m.Attribute(attr=m.Name("format"))) and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString))):  # type: ignore[attr-defined]
        return False
    text = func.value.evaluated_value  # type: ignore[attr-defined]
    if not isinstance(text, str) or arg.star or _nodes.has_star_args(call):
        return False
    positional = _nodes.positional_args(call)
    key: int | str = arg.keyword.value if arg.keyword is not None else next(i for i, a in enumerate(positional) if a is arg)
    auto, used = 0, False
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return False
    for _, field_name, spec, conversion in fields:
        if field_name is None:
            continue
        if "{" in (spec or ""):
            return False  # nested fields: not worth following
        first = field_name.split(".")[0].split("[")[0]
        if first == "":
            ref: int | str = auto
            auto += 1
        else:
            ref = int(first) if first.isdigit() else first
        if ref == key:
            if first != field_name or conversion is not None:
                return False
            used = True
    return used


def _percent_alike(operation: cst.BinaryOperation, index: int, count: int) -> bool:
    left = operation.left
    if not isinstance(operation.operator, cst.Modulo) or not isinstance(left, (cst.SimpleString, cst.ConcatenatedString)):
        return False
    text = left.evaluated_value
    conversions = _percent_conversions(text) if isinstance(text, str) else None
    return conversions is not None and len(conversions) == count and conversions[index] in SAME_TEXT_CONVERSIONS


def _percent_conversions(text: str) -> list[str] | None:
    """The conversion of each argument ``text % args`` takes (``*`` for a width or precision
    taken from the arguments); None for a mapping key or a malformed format."""
    found: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] != "%":
            i += 1
            continue
        i += 1
        if i < n and text[i] == "%":
            i += 1
            continue
        if i < n and text[i] == "(":
            return None
        while i < n and text[i] in "#0- +":
            i += 1
        for part in ("width", "precision"):
            if part == "precision":
                if i < n and text[i] == ".":
                    i += 1
                else:
                    continue
            if i < n and text[i] == "*":
                found.append("*")
                i += 1
            while i < n and text[i].isdigit():
                i += 1
        while i < n and text[i] in "hlL":
            i += 1
        if i >= n:
            return None
        found.append(text[i])
        i += 1
    return found
