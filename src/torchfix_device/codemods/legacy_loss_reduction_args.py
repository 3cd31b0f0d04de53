from __future__ import annotations

import ast
from typing import Iterator
import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.facts.methods import attributes_named
from torchfix_device.facts.sizes import evidence as loss_evidence

# Index of ``size_average`` among the positional parameters (after ``self`` for classes), as in
# torch 2.x; an argument at or past it passed positionally may be a legacy argument.
LOSS_CLASSES = {
    "BCELoss": 1, "BCEWithLogitsLoss": 1, "CosineEmbeddingLoss": 1, "CrossEntropyLoss": 1,
    "HingeEmbeddingLoss": 1, "KLDivLoss": 0, "L1Loss": 0, "MSELoss": 0, "MarginRankingLoss": 1,
    "MultiLabelMarginLoss": 0, "MultiLabelSoftMarginLoss": 1, "MultiMarginLoss": 3, "NLLLoss": 1,
    "NLLLoss2d": 1, "PoissonNLLLoss": 2, "SmoothL1Loss": 0, "SoftMarginLoss": 0,
    "TripletMarginLoss": 4,
}
LOSS_FUNCTIONS = {
    "binary_cross_entropy": 3, "binary_cross_entropy_with_logits": 3, "cosine_embedding_loss": 4,
    "cross_entropy": 3, "hinge_embedding_loss": 3, "kl_div": 2, "l1_loss": 2,
    "margin_ranking_loss": 4, "mse_loss": 2, "multi_margin_loss": 5, "multilabel_margin_loss": 2,
    "multilabel_soft_margin_loss": 3, "nll_loss": 3, "poisson_nll_loss": 4, "smooth_l1_loss": 2,
    "soft_margin_loss": 2, "triplet_margin_loss": 7,
}
LOSS_NAMES = frozenset(LOSS_FUNCTIONS) | frozenset(LOSS_CLASSES)
LEGACY = ("size_average", "reduce")
LITERALS = {"True": True, "False": False, "None": None}


def legacy_reduction(size_average: bool | None, reduce: bool | None) -> str | None:
    """What torch does with literal legacy arguments: the ``reduction`` string they force, or
    None when both are None (then torch uses the ``reduction=`` argument as given).

    Mirrors ``torch.nn._reduction.legacy_get_string``, which torch calls only when one of them is
    not None.
    """
    if size_average is None and reduce is None:
        return None
    if reduce is False:
        return "none"
    return "mean" if size_average in (None, True) else "sum"


def _reduction_of_a_value(variables: dict[str, str], values: dict[str, bool | None], reduction: cst.Arg | None) -> str | None:
    """The ``reduction=`` expression torch computes when one legacy argument is a name (read
    twice: a name or an attribute, no call) and the other a literal or absent; None when both
    are names, or a ``reduction=`` other than ``"mean"`` is given (it counts when the name is
    ``None``)."""
    if len(variables) != 1:
        return None
    given = reduction.value if reduction is not None else None
    if given is not None and not (isinstance(given, cst.SimpleString) and given.evaluated_value in ("mean", "elementwise_mean")):
        return None
    (key, name), = variables.items()
    if key == "size_average":  # reduce: None or True (mean/sum on the name) or False (none)
        if values["reduce"] is False:
            return '"none"'
        low, high = "sum", "mean"
    else:  # size_average: None or True (mean) or False (sum); a false reduce gives none
        low, high = "none", "mean" if values["size_average"] in (None, True) else "sum"
    return f'"{low}" if {name} is not None and not {name} else "{high}"'


class LegacyLossReductionArgs(Codemod):
    """
    ## What it does
    Replaces the deprecated `size_average=` and `reduce=` arguments of the `nn.*Loss` classes and
    the `F.*` loss functions by the `reduction=` they stand for, with torch's own mapping
    (`torch.nn._reduction.legacy_get_string`): `reduce=False` → `reduction="none"`; otherwise
    `size_average=False` → `reduction="sum"`, else `reduction="mean"`. When both are `None`
    they are dropped and the `reduction=` given (or its default) stays. A `reduction=` passed
    together with them is replaced, since torch ignores it. `reduction="elementwise_mean"`
    becomes `reduction="mean"`. A literal written to the attribute of a torch loss module
    (`loss_fn.size_average = False`) becomes the `reduction` it stands for
    (`loss_fn.reduction = "sum"`).

    ## Why is this bad?
    `size_average` and `reduce` have been deprecated since PyTorch 0.4.1; every call prints
    `UserWarning: size_average and reduce args will be deprecated, please use
    reduction='sum' instead.`, and the two flags interact in a way that is easy to misread
    (`reduce=False` silently overrides `size_average`). `"elementwise_mean"` is likewise a
    deprecated spelling of `"mean"`. Worse, since 0.4 a loss module reads only the `reduction`
    it was built with: `loss_fn.size_average = False` after building it changes nothing, and the
    loss silently averages where the code sums.

    ## Example
    ```python
    criterion = nn.MSELoss(size_average=False)
    loss = F.cross_entropy(logits, target, reduce=False)
    kl = nn.KLDivLoss(reduction="elementwise_mean")
    ```

    ## Use instead
    ```python
    criterion = nn.MSELoss(reduction="sum")
    loss = F.cross_entropy(logits, target, reduction="none")
    kl = nn.KLDivLoss(reduction="mean")
    ```

    `size_average` passed by position (`nn.MSELoss(False)`, `nn.MSELoss(self.size_average)`,
    `nn.CrossEntropyLoss(weights, False)`: the place it has had since 0.3) is rewritten the same
    way. One of them given by a name (`size_average=size_average`, `reduce=args.reduce`) becomes the
    expression torch evaluates: `reduction="sum" if size_average is not None and not
    size_average else "mean"` (`None` and true values give the mean, a false one the sum).

    ## Not rewritten
    Both given by names, a value that is neither a name nor a literal (`size_average=f()`,
    evaluated once where the rewrite reads it twice), or a name together with a `reduction=`
    other than `"mean"` (which counts when the name is `None`): reported for manual review. Calls
    with `*args`, or passing more than `size_average` by position (what follows it differs between
    losses), are reported too. Calls with `**kwargs` and no legacy keyword,
    and functions or classes that are not torch losses, are left alone. An attribute write is
    left alone unless every value the receiver may hold is a torch loss built without a reduction
    argument (`nn.CrossEntropyLoss(w)`, moved or not; `self.loss_fn` set to one by every
    `.loss_fn = ...` of the file), the file writes only one of the two legacy attributes, and
    reads neither (a loss has no such attribute since 0.4).

    ## Fix safety
    Safe: for literal values the new `reduction=` is exactly the one torch computes from the
    legacy arguments (checked against `legacy_get_string` for every combination in the
    test-suite), so the loss returns the same values, minus the deprecation warning; for a name,
    the expression gives what torch gives for `None`, `True`, `False`, `0` and `1` (executed in
    the test-suite too). An attribute write is an unsafe fix: it gives the loss the reduction
    PyTorch 0.3 computed from the attribute (`legacy_get_string` of the one flag written), where
    on 2.x the write does nothing, so the values the program computes today change to those the
    code was written for.
    """

    code = "TFD010"
    name = "legacy-loss-reduction-args"
    summary = "`size_average=`/`reduce=` on losses are deprecated: use the equivalent `reduction=`"
    safe = True
    triggers = ("size_average", "reduce", "elementwise_mean", "Loss(", "_loss(")

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """A ``torch.nn`` loss class or ``torch.nn.functional`` loss called with a legacy
        reduction argument (a keyword, or ``size_average`` by position under the loss's own
        name); a literal written to a legacy attribute (``loss_fn.size_average = False``)."""
        if not (facts.torch_imported and facts.names & LOSS_NAMES):
            return
        words = bool(facts.keywords & {"size_average", "reduce"} or any(word in facts.text for word in ("elementwise_mean", *LEGACY)))
        scan = facts.scan
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Assign):
                if words and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) \
                        and node.targets[0].attr in LEGACY and isinstance(node.value, ast.Constant) and isinstance(node.value.value, bool):
                    yield node
                continue
            if not isinstance(node, ast.Call) or not (words and _legacy_reduction_call(node) or _by_position(node, _spelt_last(node.func))):
                continue
            if scan.opaque or any(q.startswith("torch.nn.") and q.rpartition(".")[2] in LOSS_NAMES for q in scan.qualified(node.func)):
                yield node

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.BaseSmallStatement:
        """``loss_fn.size_average = False``: since 0.4 a loss reads ``reduction``, set when it is
        built, so the write changes nothing; ``loss_fn.reduction = "sum"`` does what it did."""
        target = original_node.targets[0].target if len(original_node.targets) == 1 else None
        value = original_node.value
        if not (isinstance(target, cst.Attribute) and target.attr.value in LEGACY and isinstance(value, cst.Name) and value.value in ("True", "False")):
            return updated_node
        other, losses = "reduce" if target.attr.value == "size_average" else "size_average", loss_evidence(self.values)
        if losses.assigned_to_attribute().get(other) or not losses.holds_made_torch_loss(target.value):
            return updated_node  # both written: their order decides; or not shown to be a torch loss
        if any(not isinstance(self.values.parent(a), cst.AssignTarget) for a in attributes_named(self.values, target.attr.value)):
            return updated_node  # read somewhere: a loss has no such attribute since 0.4
        flag = LITERALS[value.value]
        reduction = legacy_reduction(flag, None) if other == "reduce" else legacy_reduction(None, flag)
        shown = nodes.code_of(target.value)
        message = (f"`{shown}.{target.attr.value} = {value.value}` changes nothing since PyTorch 0.4, where a loss reads the "
                   f"`reduction` it was built with: `{shown}.reduction = \"{reduction}\"` does what it did in 0.3, "
                   "which changes the values the loss gives today")
        if not self.report(original_node, message, safe=False):
            return updated_node
        return updated_node.with_changes(
            targets=[updated_node.targets[0].with_changes(target=updated_node.targets[0].target.with_changes(attr=cst.Name("reduction")))],
            value=cst.SimpleString(f'"{reduction}"'),
        )

    def _legacy_position(self, func: cst.BaseExpression) -> int | None:
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return None  # `nn.MSELoss(...)(x, y)` calls the loss built, not its class
        for q in self.qualified_names(func, ending_in=LOSS_NAMES):
            parts = q.split(".")
            if q.startswith("torch.nn.functional.") and len(parts) == 4 and parts[-1] in LOSS_FUNCTIONS:
                return LOSS_FUNCTIONS[parts[-1]]
            if q.startswith("torch.nn.") and parts[-1] in LOSS_CLASSES and parts[2] in (parts[-1], "modules"):
                return LOSS_CLASSES[parts[-1]]
        return None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        position = self._legacy_position(original_node.func)
        if position is None:
            return updated_node
        legacy = {k: nodes.keyword_arg(original_node, k) for k in LEGACY}
        reduction = nodes.keyword_arg(original_node, "reduction")
        positional = nodes.positional_args(original_node)
        by_position = positional[position:]  # `nn.MSELoss(self.size_average)`: the legacy ones, in order
        if not any(legacy.values()) and not by_position:
            return self._elementwise_mean(original_node, updated_node, reduction)
        shown = ", ".join([*(f"{k}=" for k, a in legacy.items() if a), *(["size_average"] if by_position else [])])
        shown = f"`{shown}`" + (" (passed by position)" if by_position else "")
        if any(a.star for a in original_node.args) or len(by_position) > 1 or by_position and legacy["size_average"] is not None:
            # what follows `size_average` differs between losses (`ignore_index` comes first in some)
            self.report(original_node, f"deprecated {shown}: arguments passed positionally; use `reduction=` by hand", fixable=False)
            return updated_node
        if by_position:
            legacy["size_average"] = by_position[0]
        values: dict[str, bool | None] = {}
        variables: dict[str, str] = {}
        for key, arg in legacy.items():
            if arg is None:
                values[key] = None
            elif isinstance(arg.value, cst.Name) and arg.value.value in LITERALS:
                values[key] = LITERALS[arg.value.value]
            elif nodes.dotted_name(arg.value) is not None:
                variables[key] = nodes.code_of(arg.value)
            else:
                self.report(original_node, f"deprecated `{key}={nodes.code_of(arg.value)}`: not a name or a literal; use `reduction=` by hand", fixable=False)
                return updated_node
        if variables:
            new_code = _reduction_of_a_value(variables, values, reduction)
            if new_code is None:
                self.report(original_node, f"deprecated {shown} given by values: use `reduction=` by hand", fixable=False)
                return updated_node
            message = f"deprecated {shown}: use `reduction={new_code}`, what torch computes from them"
        else:
            new_value = legacy_reduction(values["size_average"], values["reduce"])
            new_code = f'"{new_value}"' if new_value is not None else None
            message = f"deprecated {shown} with `None` has no effect: remove it" if new_value is None else f"deprecated {shown}: use `reduction={new_code}`"
        if not self.report(original_node, message):
            return updated_node
        drop = {k for k, a in legacy.items() if a is not None}
        if new_code is not None:
            drop.add("reduction")
        new_arg = None
        if new_code is not None:
            new_arg = cst.parse_expression(f"f(reduction={new_code})").args[0]  # type: ignore[attr-defined]
        if not by_position:
            return _replace_keywords(updated_node, drop, new_arg)
        # the keyword takes the place of the first argument passed by position (keywords follow)
        first = next(i for i, a in enumerate(original_node.args) if a is by_position[0])
        updated_node = _replace_keywords(updated_node, drop, None)
        kept = [a for i, a in enumerate(updated_node.args) if not first <= i < first + len(by_position)]
        if new_arg is not None:
            kept.insert(first, new_arg.with_changes(comma=updated_node.args[first + len(by_position) - 1].comma))
        return updated_node.with_changes(args=_with_last_comma(kept, updated_node.args[-1]))

    def _elementwise_mean(
        self, original: cst.Call, updated: cst.Call, reduction: cst.Arg | None
    ) -> cst.BaseExpression:
        if reduction is None or not isinstance(reduction.value, cst.SimpleString):
            return updated
        if reduction.value.evaluated_value != "elementwise_mean":
            return updated
        if not self.report(original, 'deprecated `reduction="elementwise_mean"`: use `"mean"`'):
            return updated
        old = reduction.value
        quote = old.quote
        new_string = old.with_changes(value=f"{old.prefix}{quote}mean{quote}")
        args = [
            a.with_changes(value=new_string) if a.keyword is not None and a.keyword.value == "reduction" else a
            for a in updated.args
        ]
        return updated.with_changes(args=args)


def _with_last_comma(args: list[cst.Arg], original_last: cst.Arg) -> list[cst.Arg]:
    """``args`` whose last one ends as ``original_last`` did (a trailing comma or none)."""
    if args and args[-1] is not original_last:
        args[-1] = args[-1].with_changes(comma=original_last.comma)
    return args


def _replace_keywords(call: cst.Call, drop: set[str], new_arg: cst.Arg | None) -> cst.Call:
    """Remove the keyword arguments in ``drop``; ``new_arg`` takes the place of the first one."""
    args: list[cst.Arg] = []
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in drop:
            if new_arg is not None:
                args.append(arg.with_changes(keyword=new_arg.keyword, value=new_arg.value))
                new_arg = None
            continue
        args.append(arg)
    return call.with_changes(args=_with_last_comma(args, call.args[-1]))


# -- stage 1 ---------------------------------------------------------------------------------
def _spelt_last(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _by_position(call: ast.Call, loss: str | None) -> bool:
    """``call`` of the torch loss ``loss`` (a class's or function's last name) passes an argument
    by position at or past ``size_average``'s place."""
    position = LOSS_CLASSES.get(loss) if loss in LOSS_CLASSES else LOSS_FUNCTIONS.get(loss or "")
    return position is not None and len(call.args) > position


def _legacy_reduction_call(call: ast.Call) -> bool:
    """The codemod's own test on the arguments: ``size_average=`` / ``reduce=``, or
    ``reduction="elementwise_mean"``."""
    for keyword in call.keywords:
        if keyword.arg in ("size_average", "reduce"):
            return True
        if keyword.arg == "reduction" and isinstance(keyword.value, ast.Constant) and keyword.value.value == "elementwise_mean":
            return True
    return False
