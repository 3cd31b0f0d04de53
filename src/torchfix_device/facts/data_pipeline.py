"""What a loop goes through: items that cannot require grad, where this file shows them.

:meth:`DataPipelineEvidence.elements_missing` says whether every element of an iterable is
grad-free: through ``enumerate``, ``zip``, ``iter``, ``tqdm`` (and ``next(iter(...))``), the
elements of a grad-free value, or the batches of a ``DataLoader`` / items of a data set below.

A batch of ``torch.utils.data.DataLoader`` with the default ``collate_fn`` is its data set's
items stacked (``torch.stack``, which keeps grad): it requires grad only if an item does. The
evidence accepted that no item does (:class:`DataPipelineEvidence` is mixed into
:class:`~torchfix_device.facts.grad.GradEvidence`):

- the ``DataLoader(...)`` call has no ``collate_fn`` (or ``collate_fn=None``) and no ``*args``;
- its data set is a ``torchvision.datasets`` class given only grad-free arguments and
  transforms of ``torchvision.transforms`` (``Lambda`` excluded: it runs any code), or a
  ``torch.utils.data.TensorDataset`` of grad-free tensors;
- a name stands for one of those where every binding reaching it is one (plain assignments).

A data set of the project's own (a ``Dataset`` subclass, a custom ``loader=`` or transform) is
not followed: its ``__getitem__`` may return anything.
"""

from __future__ import annotations

from typing import Callable, Iterator

import libcst as cst
from torchfix_device.syntax import nodes

DATALOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
NOT_A_LOADER = "not a `DataLoader`"
ITERATION_BUILTINS = {"enumerate", "zip", "reversed", "iter", "list", "sorted", "tuple"}
PASSING_ITERATORS = {"tqdm.tqdm", "tqdm.std.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.tqdm_notebook"}
"""Callables whose iteration yields the elements of their first argument (progress bars)."""
TENSOR_DATASETS = {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}


class DataPipelineEvidence:
    """The iteration half of :class:`GradEvidence` (which supplies ``names``, ``missing``,
    ``args_missing`` and ``_values_of``)."""

    def names(self, node: cst.CSTNode) -> set[str]:  # pragma: no cover - supplied by GradEvidence
        raise NotImplementedError

    def missing(self, expr: cst.BaseExpression) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def args_missing(self, call: cst.Call) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def _values_of(self, expr: cst.BaseExpression) -> Iterator[cst.BaseExpression | None]:  # pragma: no cover
        raise NotImplementedError

    def elements_missing(self, iterable: cst.BaseExpression, name: str) -> str | None:
        """None when every element of ``iterable`` is grad-free (each part of it too)."""
        through = iterated(self.names, iterable)
        if through is not None:
            return _first(self.elements_missing(a, name) for a in through)
        loader = self.loader_missing(iterable)
        if loader is None or self.dataset_missing(iterable) is None:
            return None
        found = self.missing(iterable)
        if found is None:
            return None
        return f"`{name}` is an item of `{nodes.code_of(iterable)}`: {found if loader == NOT_A_LOADER else loader}"

    def next_missing(self, iterator: cst.BaseExpression) -> str | None:
        """``next(iter(loader))``, ``next(it)`` with ``it = iter(loader)``: an element."""
        for value in self._values_of(iterator):
            iterable = iter_argument(self.names, value)
            if iterable is None:
                return f"`{nodes.code_of(iterator)}` is not shown to iterate over grad-free values"
            found = self.elements_missing(iterable, nodes.code_of(iterator))
            if found is not None:
                return found
        return None

    def loader_missing(self, expr: cst.BaseExpression) -> str | None:
        """None when ``expr`` is a ``DataLoader`` whose batches are grad-free."""
        for value in self._values_of(expr):
            if not is_loader_call(self.names, value):
                return NOT_A_LOADER
            if any(a.star for a in value.args):
                return "a `DataLoader` given `*args`/`**kwargs`"
            collate = nodes.keyword_arg(value, "collate_fn")
            if collate is not None and not nodes.is_none(collate.value):
                return "a `DataLoader` with a `collate_fn=` of its own, which may return anything"
            dataset = nodes.keyword_arg(value, "dataset")
            if dataset is None:
                positional = [a for a in value.args if a.keyword is None]
                dataset = positional[0] if positional else None
            found = "no data set" if dataset is None else self.dataset_missing(dataset.value)
            if found is not None:
                return f"a `DataLoader` over a data set whose items are not shown to be grad-free ({found})"
        return None

    def dataset_missing(self, expr: cst.BaseExpression) -> str | None:
        """None when ``expr`` is a data set whose items are grad-free."""
        for value in self._values_of(expr):
            if not isinstance(value, cst.Call) or any(a.star for a in value.args):
                return f"`{nodes.code_of(expr)}` is not shown to be a torchvision data set or a `TensorDataset`"
            qualified = self.names(value.func)
            if qualified & TENSOR_DATASETS:
                found = self.args_missing(value)
            elif qualified and all(q.startswith("torchvision.datasets.") for q in qualified):
                found = _first(self._argument_missing(a) for a in value.args)
            else:
                found = f"`{nodes.code_of(value.func)}` is not a torchvision data set or a `TensorDataset`"
            if found is not None:
                return found
        return None

    def transform_missing(self, expr: cst.BaseExpression) -> str | None:
        """None when ``expr`` is a transform of torchvision's own (or a list of them)."""
        if nodes.is_none(expr):
            return None
        if isinstance(expr, (cst.List, cst.Tuple)):
            return _first(self.transform_missing(e.value) for e in expr.elements)
        for value in self._values_of(expr):
            if not isinstance(value, cst.Call):
                return f"`{nodes.code_of(expr)}` is not shown to be a torchvision transform"
            qualified = self.names(value.func)
            if any(q.endswith(".Lambda") for q in qualified):
                return f"`{nodes.code_of(value.func)}` runs any code"
            if not qualified or not all(q.startswith("torchvision.transforms.") for q in qualified):
                return f"`{nodes.code_of(value.func)}` is not a torchvision transform"
            found = _first(self._argument_missing(a) for a in value.args)
            if found is not None:
                return found
        return None

    def _argument_missing(self, arg: cst.Arg) -> str | None:
        """An argument of a torchvision data set or transform: a transform, or grad-free."""
        transform = self.transform_missing(arg.value)
        if transform is None:
            return None
        value = self.missing(arg.value)
        if value is None:
            return None
        given = (arg.keyword is not None and "transform" in arg.keyword.value) or isinstance(arg.value, (cst.List, cst.Tuple))
        return transform if given else value  # a list of transforms (`Compose`): the step's own gap


def iterated(names: Callable[[cst.CSTNode], set[str]], iterable: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """What iterating ``iterable`` goes through, where it passes the elements of its positional
    arguments on (``enumerate(x)``, ``zip(a, b)``, ``iter(x)``, ``tqdm(x, total=n)``): those
    arguments; None for anything else."""
    if not (isinstance(iterable, cst.Call) and iterable.args and not any(a.star for a in iterable.args)):
        return None
    found = names(iterable.func)
    passing = found & PASSING_ITERATORS or (
        isinstance(iterable.func, cst.Name) and found == {f"builtins.{iterable.func.value}"} and iterable.func.value in ITERATION_BUILTINS
    )
    return [a.value for a in iterable.args if a.keyword is None] if passing else None


def iter_argument(names: Callable[[cst.CSTNode], set[str]], value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``x`` where ``value`` is the builtin ``iter(x)`` (one plain argument); None otherwise."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and len(value.args) == 1):
        return None
    arg = value.args[0]
    if arg.keyword is not None or arg.star or names(value.func) != {"builtins.iter"}:
        return None
    return arg.value


def is_loader_call(names: Callable[[cst.CSTNode], set[str]], value: cst.BaseExpression | None) -> bool:
    """``value`` is a ``torch.utils.data.DataLoader(...)`` call."""
    return isinstance(value, cst.Call) and bool(names(value.func) & DATALOADERS)


def _first(found: Iterator[str | None]) -> str | None:
    for item in found:
        if item is not None:
            return item
    return None
