import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.data_pipeline import is_loader_call, iter_argument
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes

MAX_DEPTH = 4


class IteratorNextMethod(Codemod):
    """
    ## What it does
    Rewrites `it.next()` to `next(it)` where `it` is an iterator made by `iter(...)` or a
    generator function of the file, directly (`iter(loader).next()`) or through a name every assignment of which reaching the call is one
    (`dataiter = iter(trainloader)` then `images, labels = dataiter.next()`, as in PyTorch's
    0.3-era CIFAR tutorial).

    ## Why is this bad?
    `.next()` is the Python 2 spelling of `next(it)`. A `DataLoader`'s iterator kept it as an
    alias for years; torch 2.x dropped it: `AttributeError: '_SingleProcessDataLoaderIter'
    object has no attribute 'next'` before the first batch is read.

    ## Example
    ```python
    dataiter = iter(trainloader)
    images, labels = dataiter.next()
    ```

    ## Use instead
    ```python
    dataiter = iter(trainloader)
    images, labels = next(dataiter)
    ```

    ## Not rewritten
    `.next()` with arguments, of anything not shown to come from `iter(...)` (a generator, a
    project object, `args.next`), and a name that may also hold something else where it is read.

    ## Fix safety
    Safe where the iterable given to `iter` is shown to be a `torch.utils.data.DataLoader`
    (the call, or a name every assignment of which reaching it is one): its iterator's `.next`
    was `__next__` itself; and on a generator made by a function of the file that yields
    (`data = inf_train_gen()`): a generator has no `.next` in Python 3. Unsafe otherwise: an iterator class written for Python 2 may define
    `next` and no `__next__`, and then only `.next()` works.
    """

    code = "TFD022"
    name = "iterator-next-method"
    summary = "`iter(loader).next()` is Python 2: torch 2.x's DataLoader iterator has no `.next`; use `next(it)`"
    safe = True
    triggers = ("next",)

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``x.next()`` calls without arguments, in a file that imports torch."""
        if not (facts.torch_imported and "next" in facts.call_attrs):
            return
        for node, _, _ in facts.contexts:
            func = getattr(node, "func", None)
            if isinstance(node, ast.Call) and isinstance(func, ast.Attribute) and func.attr == "next" and not (node.args or node.keywords):
                yield node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "next" and not original_node.args):
            return updated_node
        made = self._iter_calls(func.value)
        if not made:
            return updated_node
        receiver = nodes.code_of(func.value)
        message = f"`{receiver}.next()` is Python 2's spelling, which torch 2.x's DataLoader iterators and Python 3's generators lack: use `next({receiver})`"
        loaders = all(self._generator(call) or self._iterates_a_loader(call) for call in made)
        if not loaders:
            message += "; unsafe: nothing shows the iterable is a DataLoader, and an iterator written for Python 2 may define only `next`"
        if not self.report(original_node, message, safe=loaders):
            return updated_node
        updated_func = cst.ensure_type(updated_node.func, cst.Attribute)
        return cst.Call(
            func=cst.Name("next"), args=[cst.Arg(updated_func.value)],
            lpar=updated_node.lpar, rpar=updated_node.rpar,
        )

    def _iter_calls(self, expr: cst.BaseExpression) -> list[cst.Call]:
        """The ``iter(x)`` calls, and calls of a generator function of the file, that ``expr``
        is (itself, or every value reaching a name); [] where something else may be it."""
        found = []
        for value in self.values.values_of(expr):
            if not (isinstance(value, cst.Call) and (iter_argument(self.values.names, value) is not None or self._generator(value))):
                return []
            found.append(value)
        return found

    def _generator(self, call: cst.Call) -> bool:
        """``inf_train_gen()``: a call of a module-level function of the file that yields (a
        generator object has no ``.next`` in Python 3, whatever it yields)."""
        if not isinstance(call.func, cst.Name):
            return False
        reach = self.values.reach(call.func)
        return bool(reach.bindings) and reach.why is None and all(
            isinstance(node, cst.FunctionDef) and _yields(node) for node in reach.bindings
        )

    def _iterates_a_loader(self, call: cst.Call) -> bool:
        iterable = iter_argument(self.values.names, call)
        return iterable is not None and self._is_loader(iterable)

    def _is_loader(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """``expr`` is a ``DataLoader(...)`` call, or a name every value reaching which is one."""
        if is_loader_call(self.values.names, expr):
            return True
        if depth >= MAX_DEPTH or not isinstance(expr, cst.Name):
            return False
        values = list(self.values.values_of(expr))
        return bool(values) and all(v is not None and v is not expr and self._is_loader(v, depth + 1) for v in values)

def _yields(function: cst.FunctionDef) -> bool:
    """``function``'s own body holds a ``yield`` (not one of a function or class inside it)."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Yield(self, node: cst.Yield) -> bool:
            nonlocal found
            found = True
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    function.visit(Finder())
    return found
