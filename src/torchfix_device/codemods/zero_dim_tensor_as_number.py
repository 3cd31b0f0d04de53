import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.sizes import METHOD_REDUCTIONS, TORCH_REDUCTIONS, Number03, number_in_03
from torchfix_device.facts.refusals import refused_first
from torchfix_device.facts.uses import FLOWING_BUILTINS, GROWING, KEY_METHODS, MEANT, Place, Use, uses_of
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes

TORCH_REDUCTION_NAMES = frozenset(f"torch.{f}" for f in TORCH_REDUCTIONS)


class ZeroDimTensorAsNumber(Codemod):
    """
    ## What it does
    Adds `.item()` where a value that was a Python number in PyTorch 0.3 is used as a number:
    a full reduction of a tensor (`pred.eq(y).sum()`, `(pred == y).sum()`, `x.max()`,
    `torch.sum(x)`) and an element of a 1-dim tensor (`torch.max(x, 1)[1][0]`, `t.data[i]`,
    which becomes `t[i].item()`). Since 0.4 these are 0-dim tensors.

    It acts where the code shows that a number was meant: the value (directly, through
    arithmetic, a name bound to it, the elements of a literal, the `return` of a function of
    the file to its calls, a returned tuple unpacked by every call: `loss, n = f()`, or a list
    that starts empty and grows by it: `accs += [acc]`) is a key of a dict (`d[v]`, `d[v] += 1`, `d.get(v)`, `v in d`), is
    written with `json.dump`/`json.dumps`, is the action of a `gym` environment's `step`, or is
    added to a counter that starts from a number literal (`correct = 0`, then
    `correct += pred.eq(y).sum()` becomes `correct += pred.eq(y).sum().item()`); or it is read
    with the 0.3 idiom `t.data[i]`. Every other use must take a number as well as the tensor
    (arithmetic, formatting, `print`, comparisons, `float()`...).

    ## Why is this bad?
    A 0-dim tensor is not the number the code was written for. Tensors hash by identity, so
    `vocab.idx2word[word_id]` raises `KeyError: tensor(12)` and `votes[best] += 1` adds a new
    key; `json.dump` raises `TypeError: Object of type Tensor is not JSON serializable`;
    gym's `env.step(action)` fails its check that the action is in the action space; a counter
    `correct += pred.eq(y).sum()` becomes a tensor that prints as `tensor(45)`, stays on the GPU
    and is saved as a tensor in a checkpoint.

    ## Example
    ```python
    correct = 0
    for x, y in loader:
        pred = model(x).max(1)[1]
        correct += pred.eq(y).sum()
    best = torch.max(scores, 1)[1][0]
    print(classes[best], correct)
    ```

    ## Use instead
    ```python
    correct = 0
    for x, y in loader:
        pred = model(x).max(1)[1]
        correct += pred.eq(y).sum().item()
    best = torch.max(scores, 1)[1][0].item()
    print(classes[best], correct)
    ```

    ## Not rewritten
    A value used as a tensor anywhere it reaches (`loss = x.sum(); loss.backward()`,
    `row = x[0]; row.sum()`, `s.item()` already), a counter that starts as a tensor
    (`correct = torch.zeros(1)`), a value that is only printed or computed with (nothing shows a
    number was meant: `print(x.sum())` shows `tensor(...)` and keeps working), an element of a
    tensor of two or more dimensions (a row), and an element of a value shown to be a scalar
    (`loss.data[0]`: TFD006 rewrites it to `loss.item()`). A full reduction of a value not shown
    to be a tensor (a NumPy array's `.sum()` is already a number).

    ## Fix safety
    Safe where the value is shown to be 0-dim (a full reduction of a tensor, an element of a
    tensor shown to be 1-dim) and every use takes a number: `.item()` gives the number PyTorch 0.3
    gave, what the code was written for (a sum accumulated from float reductions is then summed
    in double precision: the same up to float32 rounding). The fix is unsafe where the element
    is of a tensor whose dimensions are not shown (`torch.multinomial(p, 1)[0]`,
    `q.max(1)[1].data[0]` of a `q` of unknown shape: on a 2-dim tensor it is a row, which
    `.item()` refuses), or where the value reaches a use that is not shown to take a number (an
    argument of another function, the index of a container not shown to be a dict or a
    sequence, a `return` of a function whose callers are not all shown: the calls of this file
    and, in a run over a project, those of the other files that import it, each read in its own
    file; a caller that uses the result as a tensor keeps it one).

    Safe also where the first thing the program does with the value fails for a tensor of any
    shape, on every path: it is the action of `env.step` of a gym environment that checks its
    action is in its discrete action space (`gym.make("CartPole-v0")`, also through a name, its
    `.unwrapped`, or the `return` of a function or method whose calls bind it and step with it in
    the very next statement: `action = model.act(state)` then `env.step(action)`), or the key of
    a lookup in a plain dict (`idx2word[word_id]` of `idx2word = {}`: a new tensor is no key of
    it). The original fails there whatever the dimensions, so `.item()` changes only a run that
    failed: the one the 0.3 code meant runs, and where the tensor has more than one element the
    run still fails, at `.item()`. Other environments (`make_atari(...)`, a wrapper of the
    project) and a `defaultdict` or `Counter` (which adds the tensor as a new key) keep the fix
    unsafe.
    """

    code = "TFD019"
    skips_within_statements = True
    name = "zero-dim-tensor-as-number"
    summary = "A 0.3 Python number (`x.sum()`, `t[0]` of a 1-dim tensor) is a 0-dim tensor since 0.4: use `.item()`"
    safe = True
    triggers = ("[", *sorted(METHOD_REDUCTIONS | TORCH_REDUCTIONS))

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """A torch import (every evidence of a tensor needs one) and a site."""
        return facts.torch_imported and next(cls.sites(facts), None) is not None

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """Subscripts with one index (not a slice) and calls that may be full reductions, read
        with ``.data[i]`` or whose value may reach a use that shows a number was meant
        (:func:`_may_reach_a_meant_use`): the codemod reports nothing else."""
        if not facts.torch_imported:
            return
        scan = facts.scan
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Subscript) and _ast_element_form(node):
                base = node.value
                if (isinstance(base, ast.Attribute) and base.attr == "data") or _may_reach_a_meant_use(facts, node):
                    yield node
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in METHOD_REDUCTIONS and not node.args and not node.keywords:
                    if _may_reach_a_meant_use(facts, node):
                        yield node
                elif len(node.args) == 1 and not node.keywords and scan.may_name(func, TORCH_REDUCTION_NAMES):
                    if _may_reach_a_meant_use(facts, node):
                        yield node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        return self._decide(original_node, updated_node)

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        return self._decide(original_node, updated_node)

    def _decide(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        number = number_in_03(self.values, original)
        if number is None:
            return updated
        places = uses_of(self.values, original)
        if any(p.use is Use.TENSOR for p in places):
            return updated  # used as a tensor somewhere: a number would break it
        meant = [p for p in places if p.use in MEANT]
        if not meant and not number.data:
            return updated  # nothing shows that a number was meant
        code = nodes.code_of(original)
        fixed = _fixed_code(original, number)
        why = _why(meant, number)
        doubts = _doubts(places, number)
        if doubts:
            refused = refused_first(self.values, original)
            if refused is not None:  # the original fails there whatever the shape
                doubts = []
                why = f"{refused.use.value} (`{_short(refused.node)}`), which fails for a tensor of any shape"
        message = f"`{code}` was a Python number in PyTorch 0.3 ({number.what}) and is a 0-dim tensor since 0.4, {why}: use `{fixed}`"
        if doubts:
            applied = self.report(original, f"{message} (unsafe: {'; '.join(doubts)})", safe=False)
        else:
            applied = self.report(original, message)
        return _item(updated, number) if applied else updated


AST_BASES = (ast.Name, ast.Call, ast.Subscript)
AST_INDICES = (ast.Name, ast.UnaryOp, ast.BinOp, ast.Call, ast.Subscript)


def _ast_element_form(node: ast.Subscript) -> bool:
    """:func:`~torchfix_device.syntax.nodes.element_form` on the stdlib ``ast``."""
    index = node.slice
    if not (isinstance(index, AST_INDICES) or (isinstance(index, ast.Constant) and type(index.value) is int)):
        return False
    base = node.value
    if isinstance(base, ast.Attribute) and base.attr in ("data", "values", "indices"):
        base = base.value if base.attr == "data" else base
        return isinstance(base, AST_BASES) or isinstance(base, ast.Attribute) and base.attr in ("values", "indices")
    return isinstance(base, AST_BASES)


def _may_reach_a_meant_use(facts: FileFacts, site: ast.AST) -> bool:
    """Whether the value of ``site`` may reach a use that shows a number was meant
    (:data:`~torchfix_device.facts.uses.MEANT`) as :func:`~torchfix_device.facts.uses.uses_of`
    follows it, over-approximated on the stdlib ``ast``: up through arithmetic, boolean
    operations, a conditional's branches, the builtins a value flows through and the literals
    holding it; to every read of a name it is bound to (by spelling, in any scope) and of a list
    it is appended to; a ``return`` may reach the calls of any file, a counter is one. A site it
    says no for cannot be reported: TFD019 acts only where a use shows a number was meant, or on
    ``t.data[i]``, which :meth:`ZeroDimTensorAsNumber.sites` keeps whatever its uses."""
    parents, reads, scan = facts.parents, facts.name_reads, facts.scan
    work: list[ast.AST] = [site]
    followed: set[str] = set()
    returned: set[int] = set()
    while work:
        expr = work.pop()
        names: list[ast.Name] = []
        while True:
            parent = parents.get(id(expr))
            kind = type(parent)
            if kind is ast.keyword:  # an argument by keyword: as one by position (a superset)
                expr, parent = parent, parents.get(id(parent))
                kind = type(parent)
            if kind in _FLOWING or (kind is ast.UnaryOp and not isinstance(parent.op, ast.Not)) or (kind is ast.IfExp and parent.test is not expr):
                expr = parent
            elif kind in _LITERALS:
                holder = parents.get(id(parent))
                if type(holder) is ast.Subscript and holder.slice is parent:
                    if _parenthesized(parent):
                        return True  # `d[(a, v)]`: part of a key
                    break  # `x[a, v]`: two indices, whose container is not followed
                expr = parent
            elif kind is ast.Dict:
                if any(key is expr for key in parent.keys):
                    return True
                expr = parent
            elif kind is ast.Subscript:
                if parent.slice is expr:
                    return True  # an index or a key (`v[0]`: only a tensor has elements)
                break
            elif kind is ast.Compare:
                if parent.left is expr and any(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
                    return True
                break
            elif kind is ast.Call and parent.func is not expr:
                func = parent.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if name in _MEANT_METHODS or scan.may_name(func, _JSON_WRITERS):
                    return True
                if name in FLOWING_BUILTINS:
                    expr = parent
                elif name in GROWING and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    names = [func.value]  # the list's reads hold it
                    break
                else:
                    break
            elif kind is ast.Assign or kind is ast.AnnAssign:
                names = [n for t in (parent.targets if kind is ast.Assign else [parent.target]) for n in _bound_names(t)]
                break
            elif kind is ast.AugAssign:
                return True  # a counter, a list grown
            elif kind is ast.Return:
                function = _enclosing_function(parents, parent)
                if function is None or id(function) in returned:
                    break
                returned.add(id(function))
                calls = _calls_of(facts, function)
                if calls is None:
                    return True  # a module's function: the calls of any file of the run
                work.extend(calls)
                break
            else:
                break
        for name in names:
            if name.id not in followed:
                followed.add(name.id)
                work.extend(reads.get(name.id, ()))
    return False


def _parenthesized(literal: ast.AST) -> bool:
    """A tuple written in parentheses (``d[(a, v)]``, one index) rather than bare (``x[a, v]``)."""
    elements = getattr(literal, "elts", None)
    return not elements or (literal.lineno, literal.col_offset) != (elements[0].lineno, elements[0].col_offset)


def _enclosing_function(parents: dict[int, ast.AST], statement: ast.Return) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function a ``return`` returns from, where its calls are followed (not decorated)."""
    function = parents.get(id(statement))
    while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        function = parents.get(id(function))
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.decorator_list:
        return None
    return function


def _calls_of(facts: FileFacts, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call] | None:
    """The calls a value ``function`` returns may reach, as :func:`~torchfix_device.facts.uses.calls_of`
    finds them, over-approximated: a module's function may be called from any file of the run
    (None); a method, by every ``x.<name>(...)`` of the file; a nested function, by every call of
    its name."""
    parents = facts.parents
    owner = parents.get(id(function))
    if isinstance(owner, ast.Module):
        return None
    reads: list[ast.AST] = list(facts.attributes.get(function.name, ()) if isinstance(owner, ast.ClassDef) else facts.name_reads.get(function.name, ()))
    return [call for read in reads if isinstance(call := parents.get(id(read)), ast.Call) and call.func is read]


def _bound_names(target: ast.AST) -> Iterator[ast.Name]:
    """The names an assignment target binds (not ``self.x``, not ``d[k]``)."""
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _bound_names(element)
    elif isinstance(target, ast.Starred):
        yield from _bound_names(target.value)


_FLOWING = (ast.BinOp, ast.BoolOp, ast.Starred)
_LITERALS = (ast.Tuple, ast.List, ast.Set)
_MEANT_METHODS = KEY_METHODS | {"step"}
"""Methods that take a value as a key or as a gym action (by their last name)."""
_JSON_WRITERS = frozenset({"json.dump", "json.dumps"})


def _why(meant: list[Place], number: Number03) -> str:
    if not meant:
        return "read with the 0.3 idiom `.data[i]`"
    first = meant[0]
    return f"{first.use.value} (`{_short(first.node)}`)"


def _doubts(places: list[Place], number: Number03) -> list[str]:
    doubts = []
    if not number.zero_dim:
        doubts.append("its dimensions are not shown: of a tensor of two or more, it is a row, which `.item()` refuses")
    unknown = [p for p in places if p.use is Use.UNKNOWN]
    if unknown:
        doubts.append(f"`{_short(unknown[0].node)}` is not shown to take a number as it took the tensor")
    elif any(p.use is Use.INDEX for p in places):
        index = next(p for p in places if p.use is Use.INDEX)
        doubts.append(f"the container of `{_short(index.node)}` is not shown to be a dict or a sequence, which a number indexes as the 0.3 code meant")
    return doubts


def _short(node: cst.CSTNode) -> str:
    text = " ".join(nodes.code_of(node).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _fixed_code(original: cst.BaseExpression, number: Number03) -> str:
    return nodes.code_of(_item(original, number))


def _item(expr: cst.BaseExpression, number: Number03) -> cst.BaseExpression:
    """``expr.item()``; ``t.data[i]`` becomes ``t[i].item()`` (``.data`` changes no number)."""
    if number.data and isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        inner = expr.with_changes(value=expr.value.value, lpar=[], rpar=[])
        return cst.Call(func=cst.Attribute(value=inner, attr=cst.Name("item")), lpar=expr.lpar, rpar=expr.rpar)
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("item")))
