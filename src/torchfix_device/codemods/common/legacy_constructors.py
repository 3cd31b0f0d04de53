"""Legacy typed constructors rewritten to factories (TFD003, TFD008, TFD008's aliases):
``torch.FloatTensor(2, 3)`` → ``torch.empty(2, 3, dtype=torch.float32, device=...)``,
``torch.LongTensor([1, 2])`` → ``torch.tensor([1, 2], dtype=torch.int64, device=...)``,
``torch.FloatTensor(np.ones(3))`` → ``torch.as_tensor(...)`` (which, like the legacy
constructor, shares a NumPy array's memory on the CPU where the dtypes match). Which one is
decided on the original call, by what the facts show its argument is
(:func:`~torchfix_device.facts.data_or_size.argument_kind`)."""

from __future__ import annotations

import libcst as cst

from torchfix_device.facts import values as facts_values
from torchfix_device.facts.data_or_size import ARRAY, DATA, SIZE, argument_kind
from torchfix_device.syntax.nodes import add_keyword_arg, code_of

_FACTORIES = {SIZE: "empty", DATA: "tensor", ARRAY: "as_tensor"}


def factory(codemod, call: cst.Call) -> tuple[str | None, str | None]:  # noqa: ANN001
    """For the original ``call`` of a legacy constructor (or of an alias of one): the factory
    that makes what it made (``"empty"``, ``"tensor"``, ``"as_tensor"``) and None, or None and
    why none is shown. No argument, or two and more (sizes, a ``*shape`` after the first among
    them): ``empty``; one: what the facts show it is."""
    args = list(call.args)
    if any(a.keyword is not None or a.star == "**" for a in args):
        return None, "keyword arguments"
    if args and args[0].star:
        return None, "it starts with `*`: sizes or data?"
    if len(args) != 1:
        return "empty", None
    kind = argument_kind(facts_values.of(codemod), args[0].value)
    if kind is None:
        return None, f"nothing shows whether `{code_of(args[0].value)}` is a size or data"
    return _FACTORIES[kind], None


def rewritten(updated: cst.Call, torch_name: str, made_by: str, dtype: str, device_code: str) -> cst.Call:
    """``updated`` as a call of the factory ``made_by`` (:func:`factory`) with ``dtype`` and ``device``."""
    args = list(updated.args) or [cst.Arg(cst.Integer("0"))]
    new = updated.with_changes(func=cst.parse_expression(f"{torch_name}.{made_by}"), args=args)
    new = add_keyword_arg(new, "dtype", f"{torch_name}.{dtype}")
    return add_keyword_arg(new, "device", device_code)
