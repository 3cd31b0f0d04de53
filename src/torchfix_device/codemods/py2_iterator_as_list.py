import ast
import re
from typing import Iterator

import libcst as cst
from libcst.metadata.scope_provider import BuiltinAssignment
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts import values as facts_values
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes

BUILTINS = frozenset({"zip", "map", "filter"})
"""Python 2 builtins that returned a list and return a one-shot iterator in Python 3."""
SPELT = re.compile(r"\b(?:zip|map|filter)\b")
"""One of the names as a whole word (``map`` in ``map_location`` is none): stage 1's first test."""
INDEXED, ITERATED = "indexed", "iterated"
"""What a read of the value does: subscripted or given to ``len()`` (a site: raises on Python 3),
or goes through it once as a list would be gone through (the same on a list)."""
FIRST_ITERATED = frozenset({
    "builtins.list", "builtins.tuple", "builtins.sorted", "builtins.set", "builtins.frozenset", "builtins.dict",
    "builtins.enumerate", "builtins.sum", "builtins.min", "builtins.max", "builtins.any", "builtins.all",
    "builtins.reversed", "builtins.iter",
    "numpy.array", "numpy.asarray", "numpy.concatenate", "numpy.stack", "numpy.vstack", "numpy.hstack",
    "torch.tensor", "torch.as_tensor", "torch.cat", "torch.stack",
})
"""Functions whose first argument is gone through as a sequence (a list is what they take)."""
ANY_ITERATED = frozenset({"builtins.zip", "builtins.print"})
LATER_ITERATED = frozenset({"builtins.map", "builtins.filter"})
"""Functions whose arguments, all of them or all after the first, are gone through (``print``
shows the list Python 2 showed, where Python 3 shows ``<zip object at 0x...>``)."""
LIST_METHODS = frozenset({"sort", "reverse", "index", "count", "append", "extend", "insert", "pop", "remove"})
"""A list's methods: Python 3's iterators have none of them (AttributeError), Python 2 meant these."""
MAX_DEPTH = 4
"""How many calls deep a value is followed into the functions of the file."""
MAX_CODE = 48
"""Longest code quoted in a message; longer code is described instead."""


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

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self.values = facts_values.of(self)
        return None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        if not (isinstance(func, cst.Name) and func.value in BUILTINS and self._is_builtin(func)):
            return updated_node
        builtin = func.value
        parent = self.values.parent(original_node)
        use = self._use(original_node)
        if use is not None and use[0] == INDEXED:
            what = _quoted(use[1], f"a `{builtin}` call used as a list")
            message = f"{what} raises TypeError on Python 3, where `{builtin}` returns a one-shot iterator"
            return self._wrap(original_node, updated_node, message, builtin, "", True)
        if not (isinstance(parent, cst.Assign) and parent.value is original_node and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return updated_node
        target = cst.ensure_type(parent.targets[0].target, cst.Name)
        uses = self._uses_of(target)
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

    def _uses_of(self, binding: cst.Name | cst.Param, depth: int = 0) -> list[tuple[str, cst.CSTNode]]:
        """What each read of the name bound at ``binding`` (a plain name assigned, or a parameter
        of a function given the value) does with the value, in source order (:meth:`_use`); a
        read that may hold it but whose bindings cannot be told, a doubt."""
        found: list[tuple[str, cst.CSTNode]] = []
        name = binding.name.value if isinstance(binding, cst.Param) else binding.value
        scope = facts_values.scope_of(binding, self.values.parent)
        if isinstance(binding, cst.Param) and isinstance(scope, cst.FunctionDef):
            scope = scope.body
        for read in self.values.name_reads(scope).get(name, ()):
            if read is binding or self.values.is_target(read):
                continue
            reach = self.values.reach(read)
            if reach.why is not None:
                found.append((f"`{name}` is also read where this file cannot tell which value it holds", read))
            elif any(b is binding for b in reach.bindings):
                found.append(self._use(read, depth) or (self._unknown(read, name), read))
        return found

    def _use(self, value: cst.BaseExpression, depth: int = 0) -> tuple[str, cst.CSTNode] | None:
        """What the code around ``value`` does with it, where that is the same on a list: ``INDEXED``
        (with the subscript or ``len`` call) or ``ITERATED`` (also for an argument of a function
        of this file that does only such things with it); for ``next(value)`` and such a function
        doing something else, the reason a list may not do; None for anything else."""
        parent = self.values.parent(value)
        if isinstance(parent, cst.Subscript) and parent.value is value:
            return INDEXED, parent
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is value:
            return ITERATED, parent
        if isinstance(parent, cst.StarredElement) and isinstance(self.values.parent(parent), (cst.List, cst.Tuple, cst.Set)):
            return ITERATED, parent  # `[*batch]`
        if isinstance(parent, cst.Assign) and parent.value is value and all(isinstance(t.target, (cst.Tuple, cst.List)) for t in parent.targets):
            return ITERATED, parent  # `states, actions = batch`
        if isinstance(parent, cst.Attribute) and parent.value is value and parent.attr.value in LIST_METHODS:
            return ITERATED, parent  # `batch.sort()`: no method of the iterator, the list's own
        if isinstance(parent, cst.ComparisonTarget) and parent.comparator is value and isinstance(parent.operator, (cst.In, cst.NotIn)):
            return ITERATED, parent
        call = self.values.parent(parent) if isinstance(parent, cst.Arg) else None
        if not (isinstance(call, cst.Call) and isinstance(parent, cst.Arg) and parent.value is value):
            return None
        if parent.star == "*":
            return ITERATED, call  # `f(*batch)`
        if parent.star or parent.keyword is not None:
            return None
        index = next(i for i, a in enumerate(call.args) if a is parent)
        if any(a.star or a.keyword is not None for a in call.args[:index]):
            return None  # which parameter takes it is not shown
        if isinstance(call.func, cst.Name) and call.func.value == "len" and len(call.args) == 1 and self.values.names(call.func) == {"builtins.len"}:
            return INDEXED, call
        names = self.values.names(call.func)
        if names == {"builtins.next"}:
            return f"`{_code(call) or 'next()'}` needs an iterator and a list is not one", call
        if names and (names <= ANY_ITERATED or (index and names <= LATER_ITERATED) or (not index and names <= FIRST_ITERATED)):
            return ITERATED, call
        return self._passed(call, index, depth)

    def _passed(self, call: cst.Call, index: int, depth: int) -> tuple[str, cst.CSTNode] | None:
        """The value is the ``index``-th positional argument of ``call``: where that calls a plain
        function of this file, what its parameter's reads do with the value, taken together."""
        function = self._function_called(call)
        params = [*function.params.posonly_params, *function.params.params] if function is not None else []
        if depth >= MAX_DEPTH or index >= len(params):
            return None
        uses = self._uses_of(params[index], depth + 1)
        doubt = next(((kind, node) for kind, node in uses if kind not in (INDEXED, ITERATED)), None)
        return doubt or (ITERATED, call)

    def _function_called(self, call: cst.Call) -> cst.FunctionDef | None:
        """The one undecorated function of this file, not a method, that ``call`` calls by name."""
        if not isinstance(call.func, cst.Name):
            return None
        reach = self.values.reach(call.func)
        function = reach.bindings[0] if reach.why is None and len(reach.bindings) == 1 else None
        if not isinstance(function, cst.FunctionDef) or function.decorators or function.asynchronous:
            return None
        return None if isinstance(self.values.parent(self.values.parent(function) or function), cst.ClassDef) else function

    def _unknown(self, read: cst.Name, name: str) -> str:
        """Why a read that is neither subscripted nor gone through leaves the fix unsafe."""
        parent = self.values.parent(read)
        if isinstance(parent, cst.Arg):
            parent = self.values.parent(parent)
        shown = _code(parent) if isinstance(parent, (cst.Call, cst.Attribute, cst.Assign, cst.Return)) else None
        where = f"`{shown}`" if shown else f"a read of `{name}`"
        return f"{where} may need the iterator, and this file does not show that a list does the same there"


def _code(node: cst.CSTNode | None) -> str | None:
    """``node``'s code where it is short enough to quote, on one line."""
    if node is None:
        return None
    text = nodes.code_of(node).strip()
    return text if len(text) <= MAX_CODE and "\n" not in text else None


def _quoted(node: cst.CSTNode, otherwise: str) -> str:
    code = _code(node)
    return f"`{code}`" if code else otherwise


def _builtin_call(node: ast.AST) -> bool:
    """``zip(...)``, ``map(...)``, ``filter(...)`` spelt as the plain names (stage 1's test)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILTINS
