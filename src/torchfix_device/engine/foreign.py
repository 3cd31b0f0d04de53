"""What the functions another file of the run defines return, summarised from that file's own
code: the engine's service to :meth:`torchfix_device.facts.values.ModuleValues.call_returns`.

The runner tells each file which functions it imports from which files of the run
(``FileAttributes.functions``, :mod:`torchfix_device.facts.project_functions`). Where a fact asks
about a call of one of them, the defining file is read and parsed with libcst once per process
(memoised by path and code), and a visitor that changes nothing asks
:func:`~torchfix_device.facts.returns.returned` of each of its module-level functions, with the
same facts every codemod asks, in that file's own module. A file that cannot be read or parsed
shows nothing. The importing file's cached answer is keyed with a digest of the defining files'
code (:func:`~torchfix_device.facts.project_functions.imported_functions`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import libcst as cst
from libcst.codemod import CodemodContext

from torchfix_device.codemods.base import Codemod
from torchfix_device.engine.visiting import engine_class
from torchfix_device.facts.losses import LossEvidence
from torchfix_device.facts.project_functions import MAX_HOPS, Callers
from torchfix_device.facts.returns import Returned, made_by_class, returned
from torchfix_device.syntax import nodes, traversal
from torchfix_device.files.sources import SourceError, read_source
from torchfix_device.syntax.legacy import readable
from torchfix_device.syntax.suppressions import NO_SUPPRESSIONS

MAX_FOREIGN_BYTES = 1_000_000
"""A defining file larger than this is not summarised (a caller's answer waits on it)."""


class _Summary(Codemod):
    """Visits a module and summarises its module-level functions and classes (not a rule: no code)."""

    summaries: dict[str, Returned]

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        values = self.values
        self.summaries = {
            statement.name.value: returned(values, statement)
            for statement in node.body
            if isinstance(statement, cst.FunctionDef) and not statement.decorators and statement.asynchronous is None
        }
        self.summaries.update(
            (statement.name.value, made_by_class(values, statement))
            for statement in node.body if isinstance(statement, cst.ClassDef) and not statement.decorators
        )
        return False  # nothing else to visit


def _parsed(path: str) -> tuple[str, cst.Module] | None:
    """The code of another file of the run and its tree (a Python 2 file's, or one with ``async=``:
    of its token fixes' copy, :func:`~torchfix_device.syntax.legacy.readable`); None where it
    cannot be read or parsed."""
    try:
        text = read_source(Path(path)).text
    except (SourceError, OSError, ValueError):
        return None
    try:
        return text, cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        fixed = readable(text)  # only where the file as written does not parse
    try:
        return (fixed, cst.parse_module(fixed)) if fixed is not None else None
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None


class ForeignReturns:
    """``foreign(qualified)``: the summary of the function of another file of the run that a use
    named ``qualified`` calls, None where it is not one or nothing is shown."""

    def __init__(self, functions: Mapping[str, tuple[str, str]]) -> None:
        self._functions = functions

    def __call__(self, qualified: str) -> Returned | None:
        where = self._functions.get(qualified)
        if where is None:
            return None
        path, name = where
        return _summaries(path, _stamp(path)).get(name)


def _stamp(path: str) -> tuple[int, int]:
    try:
        stat = Path(path).stat()
    except OSError:
        return (-1, -1)
    return (stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=32)
def _summaries(path: str, stamp: tuple[int, int]) -> dict[str, Returned]:
    if stamp[1] < 0 or stamp[1] > MAX_FOREIGN_BYTES:
        return {}
    parsed = _parsed(path)
    if parsed is None:
        return {}
    text, module = parsed
    summary = engine_class(_Summary)(CodemodContext(filename=path))
    summary.configure(  # type: ignore[attr-defined]
        text, suppressions=NO_SUPPRESSIONS, device_expression=None, keeps_findings=False,
    )
    summary.transform_module(module)
    return getattr(summary, "summaries", {})


class ForeignCallers:
    """``callers(name, position, keyword)``: how many calls the other files of the run make of
    the function ``name`` of this file, where every one of them passes a loss module at its
    parameter ``keyword`` (by that keyword, or by ``position``); None where a file spells the
    name otherwise (not only to call this file's function) or a call passes anything else
    (:class:`~torchfix_device.facts.project_functions.Callers` names the files; ``run``: the
    run's ``RunAttributes``, for the callers' own callers)."""

    def __init__(self, callers: Callers, run: Any = None, hops: int = 0) -> None:
        self._callers, self._run, self._hops = callers, run, hops

    def __call__(self, name: str, position: int, keyword: str) -> int | None:
        if name in self._callers.unsure or self._hops >= MAX_HOPS:
            return None
        calls = 0
        for path, shown, qualified in self._callers.files.get(name, ()):
            attributes = self._run.of(shown) if self._run is not None else None
            found = _passed(path, _stamp(path), frozenset(qualified), (name, position, keyword),
                            getattr(attributes, "callers", None), self._run, self._hops + 1)
            if found is None:
                return None
            calls += found
        return calls


_PASSED: dict[tuple, int | None] = {}
""":func:`_passed`'s answers, by the caller file's path and stamp, the question and its own
callers' digest (the run's other facts are the same for the same files)."""


def _passed(path: str, stamp: tuple[int, int], qualified: frozenset[str], question: tuple[str, int, str],
            callers: Callers | None, run: Any, hops: int) -> int | None:
    key = (path, stamp, qualified, question, hops, callers.digest if callers is not None else None)
    if key not in _PASSED:
        if len(_PASSED) > 256:
            _PASSED.clear()
        _PASSED[key] = None  # while it is being found: a cycle of callers shows nothing
        _PASSED[key] = _find_passed(path, stamp, qualified, question, callers, run, hops)
    return _PASSED[key]


def _find_passed(path: str, stamp: tuple[int, int], qualified: frozenset[str], question: tuple[str, int, str],
                 callers: Callers | None, run: Any, hops: int) -> int | None:
    if stamp[1] < 0 or stamp[1] > MAX_FOREIGN_BYTES:
        return None
    parsed = _parsed(path)
    if parsed is None:
        return None
    text, module = parsed
    caller = engine_class(_Callers)(CodemodContext(filename=path))
    caller.configure(  # type: ignore[attr-defined]
        text, suppressions=NO_SUPPRESSIONS, device_expression=None, keeps_findings=False,
        foreign_callers=ForeignCallers(callers, run, hops) if callers is not None else None,
        imported_by_none=callers is None,
    )
    caller.question = (qualified, *question)
    caller.transform_module(module)
    return caller.answer


class _Callers(Codemod):
    """Counts the calls of one imported function in a module, each passing a loss module at one
    parameter (:meth:`~torchfix_device.facts.losses.LossEvidence.is_loss_argument`); None where a
    use is no such call (not a rule: no code)."""

    question: tuple[frozenset[str], str, int, str]
    answer: int | None = None

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        qualified, name, position, keyword = self.question
        values = self.values
        losses = LossEvidence(values)
        calls, uses = 0, []
        for found in traversal.walk(node):  # `x.name` (its `.name` is no read of its own), and aliases
            if isinstance(found, cst.ImportAlias) and found.asname is not None and (nodes.dotted_name(found.name) or "").rpartition(".")[2] == name:
                return False  # `from utils import f as g`: its calls spell `g`
            if isinstance(found, cst.Attribute) and found.attr.value == name:
                uses.append(found)
        binders = (cst.ImportAlias, cst.FunctionDef, cst.ClassDef, cst.Param)
        uses += [read for read in values.name_reads(node).get(name, ()) if not isinstance(values.parent(read), binders)]
        for use in uses:
            if _listed_in_all(values, use):
                continue  # a package's `__all__ = [Trainer]` names what it hands on, calling nothing
            if not values.names(use) & qualified:
                return False  # the file's own `name`, or one this question cannot follow
            call = values.parent(use)
            if not (isinstance(call, cst.Call) and call.func is use) or nodes.has_star_args(call):
                return False
            arg = nodes.argument(call, position, keyword)
            if arg is None or not losses.is_loss_argument(arg.value):
                return False
            calls += 1
        self.answer = calls
        return False


def _listed_in_all(values: Any, use: cst.BaseExpression) -> bool:
    """``use`` is an element of the list or tuple a module assigns to ``__all__``."""
    element = values.parent(use)
    listed = values.parent(element) if isinstance(element, cst.Element) else None
    statement = values.parent(listed) if isinstance(listed, (cst.List, cst.Tuple)) else None
    if isinstance(statement, cst.Assign):
        targets = [t.target for t in statement.targets]
    else:
        targets = [statement.target] if isinstance(statement, cst.AugAssign) else []
    return any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets) and isinstance(
        values.parent(values.parent(statement)), cst.Module)
