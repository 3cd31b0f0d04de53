"""The libcst side of TFD017: a legacy Function class made new-style, and a call made
``apply``. What may be rewritten is decided on the stdlib ``ast``
(:mod:`torchfix_device.facts.legacy_functions`); these functions only carry it out."""

from __future__ import annotations

import libcst as cst

from torchfix_device.facts.legacy_function_uses import fit_state
from torchfix_device.facts.legacy_functions import KEPT, KEPT_PARAMETER, LegacyClass


def migrate_class(node: cst.ClassDef, legacy: LegacyClass) -> cst.ClassDef:
    """``forward`` and ``backward`` become static methods whose first parameter (and every
    read of it) is renamed as :attr:`LegacyClass.renames` says; an ``__init__`` that only
    called the base's is removed (nothing makes an instance any more)."""
    renames = {method: (old, new) for method, old, new in legacy.renames}
    if legacy.state == KEPT:
        return _keep_instances(node, renames)
    body: list[cst.BaseStatement] = []
    lines_of_removed: list[cst.EmptyLine] | None = None
    init = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    for statement in node.body.body:
        if isinstance(statement, cst.FunctionDef):
            method = statement.name.value
            if method == "__init__" and legacy.drop_init:
                lines_of_removed = [line for line in statement.leading_lines if line.comment is None]
                continue
            if legacy.state and init is not None and method in ("forward", "backward"):
                statement = _with_state(statement, init, legacy)
            if method in renames:
                statement = _static(statement, *renames[method])
        if lines_of_removed is not None and isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            own = list(statement.leading_lines)
            while own and own[0].comment is None:
                own.pop(0)  # the blank lines that parted it from the removed one
            statement = statement.with_changes(leading_lines=[*lines_of_removed, *own])
            lines_of_removed = None
        body.append(statement)
    return node.with_changes(body=node.body.with_changes(body=body))


def _with_state(method: cst.FunctionDef, init: cst.FunctionDef, legacy: LegacyClass) -> cst.FunctionDef:
    """``forward`` takes ``__init__``'s arguments first (after its own first parameter) and sets
    what ``__init__`` set, on its first parameter (renamed later with the rest); each ``return``
    of ``backward`` gives one ``None`` more per argument, first."""
    count = len(legacy.state)
    if method.name.value == "backward":
        return cst.ensure_type(method.visit(_MoreNones(count)), cst.FunctionDef)
    me = method.params.params[0].name.value
    init_self = init.params.params[0].name.value
    params = list(method.params.params)
    params[1:1] = [cst.Param(cst.Name(name)) for name, _ in legacy.state]
    kept = [  # each line keeps its comments (above it and after it); `super().__init__()` goes
        cst.ensure_type(s.with_changes(
            body=[b.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for b in assigns] if len(assigns) < len(s.body) else s.body,
            leading_lines=[line for line in s.leading_lines if line.comment is not None],
        ).visit(_Rename(init_self, me)), cst.SimpleStatementLine)
        for s in init.body.body if isinstance(s, cst.SimpleStatementLine)
        for assigns in [[b for b in s.body if isinstance(b, cst.Assign)]] if assigns
    ]
    body = list(method.body.body)
    at = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
        and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)) else 0
    body[at:at] = kept
    return method.with_changes(params=method.params.with_changes(params=params), body=method.body.with_changes(body=body))


def _keep_instances(node: cst.ClassDef, renames: dict[str, tuple[str, str]]) -> cst.ClassDef:
    """:data:`~torchfix_device.facts.legacy_functions.KEPT`: ``__init__`` stays (less a call of
    the base's, which warns since PyTorch 2.x), ``__call__`` follows it and runs
    ``F.apply(self, *args)``; ``forward`` and ``backward`` become static, ``forward`` taking the
    instance after ``ctx`` and copying its attributes onto ``ctx`` first, each ``return`` of
    ``backward`` giving one ``None`` more, first."""
    body: list[cst.BaseStatement] = []
    for statement in node.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            kept, carried = [], []  # a removed line's comments go with the next line
            for line in statement.body.body:
                if _calls_an_init(line):
                    trailing = cst.ensure_type(line, cst.SimpleStatementLine).trailing_whitespace.comment
                    carried += [e for e in line.leading_lines if e.comment is not None]
                    carried += [cst.EmptyLine(comment=trailing)] if trailing is not None else []
                    continue
                kept.append(line.with_changes(leading_lines=[*carried, *line.leading_lines]) if carried else line)
                carried = []
            block = statement.body
            footer = [*carried, *block.footer] if isinstance(block, cst.IndentedBlock) else []
            statement = statement.with_changes(body=block.with_changes(body=kept or [cst.SimpleStatementLine([cst.Pass()])], **(
                {"footer": footer} if carried else {})))
            call = cst.parse_statement(f"def __call__(self, *args):\n    return {node.name.value}.apply(self, *args)\n")
            body += [statement, cst.ensure_type(call, cst.FunctionDef).with_changes(leading_lines=[cst.EmptyLine(indent=False)])]
            continue
        if isinstance(statement, cst.FunctionDef) and statement.name.value in renames:
            old, new = renames[statement.name.value]
            if statement.name.value == "backward":
                statement = cst.ensure_type(statement.visit(_MoreNones(1)), cst.FunctionDef)
            else:
                statement = _copies_instance(statement, old)
            statement = _static(statement, old, new)
        body.append(statement)
    return node.with_changes(body=node.body.with_changes(body=body))


def _calls_an_init(statement: cst.BaseStatement) -> bool:
    """``super(F, self).__init__()`` or ``Function.__init__(self)`` as a statement of its own."""
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr) \
        and isinstance(call := statement.body[0].value, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__"


def _copies_instance(forward: cst.FunctionDef, me: str) -> cst.FunctionDef:
    """``forward(me, instance, ...)`` whose first statement (after a docstring) puts the
    instance's attributes on ``me`` (renamed ``ctx`` later, with the rest)."""
    params = list(forward.params.params)
    params[1:1] = [cst.Param(cst.Name(KEPT_PARAMETER))]
    copy = cst.parse_statement(f"{me}.__dict__.update(vars({KEPT_PARAMETER}))  # what `__init__` kept on the instance\n")
    body = list(forward.body.body)
    at = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
        and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)) else 0
    body[at:at] = [copy]
    return forward.with_changes(params=forward.params.with_changes(params=params), body=forward.body.with_changes(body=body))


class _MoreNones(cst.CSTTransformer):
    """``return a, b`` → ``return None, None, a, b``; ``return g`` → ``return None, None, g``
    (the analysis has made sure a single value is one gradient); nested functions keep theirs."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count, self.depth = count, 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return self.depth == 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        return updated_node

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        value = updated_node.value
        nones = [cst.Element(cst.Name("None")) for _ in range(self.count)]
        if isinstance(value, cst.Tuple):
            return updated_node.with_changes(value=value.with_changes(elements=[*nones, *value.elements]))
        assert value is not None
        return updated_node.with_changes(value=cst.Tuple([*nones, cst.Element(value)], lpar=[], rpar=[]))


def _static(method: cst.FunctionDef, old: str, new: str) -> cst.FunctionDef:
    decorated = method.with_changes(decorators=[cst.Decorator(decorator=cst.Name("staticmethod")), *method.decorators])
    if old == new:
        return decorated
    renamed = decorated.with_changes(params=decorated.params.visit(_Rename(old, new)), body=decorated.body.visit(_Rename(old, new)))
    assert isinstance(renamed, cst.FunctionDef)
    return renamed


class _Rename(cst.CSTTransformer):
    """Every name ``old`` becomes ``new`` (attribute names and keywords of calls are not names
    of variables: they stay). The analysis has made sure nothing binds ``old`` again inside."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=self.new) if updated_node.value == self.old else updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)


def apply_call(call: cst.Call, state: list[cst.BaseExpression]) -> cst.Call:
    """``F()(args)`` → ``F.apply(args)``, ``F(a)(x)`` → ``F.apply(a, x)`` (``call`` is the outer
    call; ``state``: :func:`state_values` of the inner one)."""
    inner = call.func
    assert isinstance(inner, cst.Call)
    args = [*_state_args(inner, state), *call.args]
    return call.with_changes(func=cst.Attribute(value=inner.func, attr=cst.Name("apply")), args=args)


def _state_args(inner: cst.Call, state: list[cst.BaseExpression]) -> list[cst.Arg]:
    """The arguments of ``F(...)`` (``inner``) as ``state`` orders them, each keeping its own
    spacing and line breaks where it was already in place (a keyword becomes positional; a
    default filled in is new), each followed by a comma."""
    given = {id(a.value): a for a in inner.args}
    found = []
    for value in state:
        arg = given.get(id(value))
        arg = cst.Arg(value) if arg is None else arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        if not isinstance(arg.comma, cst.Comma):
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        found.append(arg)
    return found


def partial_call(inner: cst.Call, state: list[cst.BaseExpression]) -> cst.Call:
    """``F(a)`` kept and called later → ``functools.partial(F.apply, a)``."""
    apply = cst.Attribute(value=inner.func, attr=cst.Name("apply"))
    args = [cst.Arg(apply, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), *_state_args(inner, state)]
    if len(args) > 1:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    else:
        args[0] = args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return cst.Call(cst.Attribute(cst.Name("functools"), cst.Name("partial")), args)


def state_values(inner: cst.Call, legacy_state: tuple[tuple[str, str | None], ...]) -> list[cst.BaseExpression] | None:
    """The values ``F(...)`` (``inner``) gives ``__init__``'s arguments, in their order (defaults
    filled in); None where they do not fit (:func:`~..legacy_functions.fit_state`)."""
    positional = [a for a in inner.args if a.keyword is None]
    if any(a.star for a in inner.args) or len(positional) != len([a for a in inner.args if a.keyword is None and not a.star]):
        return None
    keywords = {a.keyword.value: a.value for a in inner.args if a.keyword is not None}
    fitted = fit_state(len(positional), list(keywords), legacy_state)
    if fitted is None:
        return None
    return [
        positional[f].value if isinstance(f, int) else cst.parse_expression(f[1:]) if f.startswith("=") else keywords[f]
        for f in fitted
    ]
