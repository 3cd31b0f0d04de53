import ast
import re
from typing import Iterator

import libcst as cst
from libcst.metadata.scope_provider import BuiltinAssignment
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.sequence_uses import INDEXED, ITERATED, MAX_CODE, code_or_none, sequence_use, uses_of_sequence
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes

BUILTINS = frozenset({"zip", "map", "filter"})
"""Python 2 builtins that returned a list and return a one-shot iterator in Python 3."""
SPELT = re.compile(r"\b(?:zip|map|filter)\b")
"""One of the names as a whole word (``map`` in ``map_location`` is none): stage 1's first test."""


class Py2IteratorAsList(Codemod):
    """
    ## What it does
    Wraps a call of the builtin `zip`, `map` or `filter` in `list(...)` where the code uses the
    result as the list Python 2 returned: subscripted or sliced directly (`zip(a, b)[0]`), given
    to `len()` (`len(map(f, xs))`), or assigned to a plain name some read of which is subscripted
    or given to `len()` (`batch = zip(*samples)` then `batch[0]`: the assignment becomes
    `batch = list(zip(*samples))`, as in RL-Adventure's prioritized replay buffer). Inside a
    comprehension, a lambda or a nested function alike.

    ## Why is this bad?
    In Python 3 these builtins return one-shot iterators: `batch[0]` raises
    `TypeError: 'zip' object is not subscriptable` and `len(batch)` raises
    `TypeError: object of type 'zip' has no len()`, the first time a replay buffer is sampled.

    ## Example
    ```python
    batch = zip(*samples)
    states = np.concatenate(batch[0])
    actions = batch[1]
    ```

    ## Use instead
    ```python
    batch = list(zip(*samples))
    states = np.concatenate(batch[0])
    actions = batch[1]
    ```

    ## Not rewritten
    A result only gone through (`for a, b in zip(x, y):`, `list(zip(...))`, `dict(zip(...))`),
    a file that binds its own `zip`, `map` or `filter` (`from itertools import izip as zip`,
    `from future.builtins import map`, `def map(...)`), `itertools.izip` and `imap`, and an
    assignment to more than one name or to an attribute. Only reported: a site in a file that
    rebinds `list`, and Python 2's `map(None, a, b)`, which pads like `itertools.zip_longest`
    and which Python 3's `map` cannot do.

    ## Fix safety
    Safe where every read the assignment reaches is subscripted, given to `len()`, gone through
    once or more (`for`, a comprehension, `*batch`, `a, b = batch`, `x in batch`, `list()`,
    `sorted()`, `np.concatenate()`, `torch.stack()` and the like, a function of this file whose
    parameter gets it and does only these), printed or asked for a list's method (`batch.sort()`,
    which the iterator lacks): all of these do on a list what the Python 2 code meant, iterating
    twice included, and `print` shows the list Python 2 showed instead of `<zip object at 0x...>`. Python 3 code never subscripts these iterators, as that raises, so the rewrite
    only turns a failing program into a running one. Unsafe where a read may reach something
    this file does not show takes a list: a project function, an attribute, a `return`, a read
    whose binding cannot be told, or `next(batch)`, since a list is not an iterator.
    """

    code = "TFD023"
    name = "py2-iterator-as-list"
    summary = "`zip`/`map`/`filter` return iterators in Python 3: `zip(a, b)[0]` raises TypeError; use `list(zip(a, b))`"
    safe = True
    triggers = tuple(sorted(BUILTINS))

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``zip``/``map``/``filter`` calls subscripted or given to ``len``, and those assigned
        to a name that is subscripted or given to ``len`` somewhere in the file."""
        if facts.tree is None or not SPELT.search(facts.text):
            return
        indexed: set[str] = set()
        assigned: list[ast.Assign] = []
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Subscript):
                if _builtin_call(node.value):
                    yield node.value
                elif isinstance(node.value, ast.Name):
                    indexed.add(node.value.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
                for arg in node.args:
                    if _builtin_call(arg):
                        yield arg
                    elif isinstance(arg, ast.Name):
                        indexed.add(arg.id)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and _builtin_call(node.value):
                assigned.append(node)
        for statement in assigned:
            if statement.targets[0].id in indexed:  # type: ignore[attr-defined]
                yield statement.value

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        if not (isinstance(func, cst.Name) and func.value in BUILTINS and self._is_builtin(func)):
            return updated_node
        builtin = func.value
        parent = self.values.parent(original_node)
        use = sequence_use(self.values, original_node)
        if use is not None and use[0] == INDEXED:
            what = _quoted(use[1], f"a `{builtin}` call used as a list")
            message = f"{what} raises TypeError on Python 3, where `{builtin}` returns a one-shot iterator"
            return self._wrap(original_node, updated_node, message, builtin, "", True)
        if not (isinstance(parent, cst.Assign) and parent.value is original_node and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return updated_node
        target = cst.ensure_type(parent.targets[0].target, cst.Name)
        uses = uses_of_sequence(self.values, target)
        indexed = [node for kind, node in uses if kind == INDEXED]
        if not indexed:
            return updated_node
        doubt = next((kind for kind, _ in uses if kind not in (INDEXED, ITERATED)), None)
        what = _quoted(indexed[0], f"subscripting it or `len({target.value})`")
        message = f"`{target.value}` holds a `{builtin}` iterator on Python 3 and {what} raises TypeError on it"
        return self._wrap(original_node, updated_node, message, builtin, f"; unsafe: {doubt}" if doubt else "", doubt is None)

    def _wrap(self, original: cst.Call, updated: cst.Call, message: str, builtin: str, unsafe: str, safe: bool) -> cst.BaseExpression:
        if builtin == "map" and original.args and isinstance(original.args[0].value, cst.Name) and original.args[0].value.value == "None":
            self.report(original, f"{message}, and Python 3's `map` takes no `None` function: write `itertools.zip_longest` or a list by hand", fixable=False)
            return updated
        if any(not isinstance(b, BuiltinAssignment) for b in self.values.bindings("list", original)):
            self.report(original, f"{message}, and `list` is rebound in this file: make it a list by hand", fixable=False)
            return updated
        wrapped = f"list({nodes.code_of(original.with_changes(lpar=[], rpar=[]))})"
        fix = f"`{wrapped}`" if len(wrapped) <= MAX_CODE and "\n" not in wrapped else "a `list()` of it"
        if not self.report(original, f"{message}: make it {fix}, the list Python 2's `{builtin}` returned{unsafe}", safe=safe):
            return updated
        return cst.Call(
            func=cst.Name("list"), args=[cst.Arg(updated.with_changes(lpar=[], rpar=[]))],
            lpar=updated.lpar, rpar=updated.rpar,
        )

    def _is_builtin(self, func: cst.Name) -> bool:
        """``func`` names the builtin of its name, which this file does not bind itself."""
        return self.values.names(func) == {f"builtins.{func.value}"} and all(
            isinstance(b, BuiltinAssignment) for b in self.values.bindings(func.value, func)
        )


def _quoted(node: cst.CSTNode, otherwise: str) -> str:
    code = code_or_none(node)
    return f"`{code}`" if code else otherwise


def _builtin_call(node: ast.AST) -> bool:
    """``zip(...)``, ``map(...)``, ``filter(...)`` spelt as the plain names (stage 1's test)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILTINS
