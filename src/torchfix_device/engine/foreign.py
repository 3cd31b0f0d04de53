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

The other way round, :class:`ForeignCallers` reads the files that may call a file's function and
answers, from each call read in its own module: does every call pass a loss module at a
parameter (TFD006), and where is what the calls return used (TFD019's ``return``)?
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
from torchfix_device.facts.uses import Place, uses_of_call
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
        found = self._each_file(_Callers, name, (name, position, keyword))
        return None if found is None else sum(found)

    def return_uses(self, name: str, position: int | None, length: int) -> list[Place] | None:
        """Where the other files of the run use what their calls of the function ``name`` return
        (:func:`~torchfix_device.facts.uses.uses_of_call`: the element at ``position`` of a
        returned tuple of ``length`` elements, every call unpacking it so); [] where no other
        file calls it; None where that is not shown."""
        found = self._each_file(_ReturnUses, name, (name, position, length))
        return None if found is None else [place for places in found for place in places]

    def _each_file(self, asking: type, name: str, question: tuple) -> list | None:
        """The answer of each file that may call ``name``; None where one is not shown."""
        if name in self._callers.unsure or self._hops >= MAX_HOPS:
            return None
        answers = []
        for path, shown, qualified in self._callers.files.get(name, ()):
            attributes = self._run.of(shown) if self._run is not None else None
            found = _asked(asking, path, _stamp(path), frozenset(qualified), question,
                           getattr(attributes, "callers", None), self._run, self._hops + 1)
            if found is None:
                return None
            answers.append(found)
        return answers


_ASKED: dict[tuple, Any] = {}
""":func:`_asked`'s answers, by the question's kind, the caller file's path and stamp, the
question and its own callers' digest (the run's other facts are the same for the same files)."""


def _asked(asking: type, path: str, stamp: tuple[int, int], qualified: frozenset[str], question: tuple,
           callers: Callers | None, run: Any, hops: int) -> Any:
    key = (asking, path, stamp, qualified, question, hops, callers.digest if callers is not None else None)
    if key not in _ASKED:
        if len(_ASKED) > 256:
            _ASKED.clear()
        _ASKED[key] = None  # while it is being found: a cycle of callers shows nothing
        _ASKED[key] = _find(asking, path, stamp, qualified, question, callers, run, hops)
    return _ASKED[key]


def _find(asking: type, path: str, stamp: tuple[int, int], qualified: frozenset[str], question: tuple,
          callers: Callers | None, run: Any, hops: int) -> Any:
    if stamp[1] < 0 or stamp[1] > MAX_FOREIGN_BYTES:
        return None
    parsed = _parsed(path)
    if parsed is None:
        return None
    text, module = parsed
    caller = engine_class(asking)(CodemodContext(filename=path))
    caller.configure(  # type: ignore[attr-defined]
        text, suppressions=NO_SUPPRESSIONS, device_expression=None, keeps_findings=False,
        foreign_callers=ForeignCallers(callers, run, hops) if callers is not None else None,
        imported_by_none=callers is None,
    )
    caller.question = (qualified, *question)
    caller.transform_module(module)
    return caller.answer


class _Calls(Codemod):
    """Asks one question of every call of one imported function in a module (not a rule: no
    code); the answer is None where a use of the function's name is no call of it."""

    question: tuple[frozenset[str], str, Any, Any]
    answer: Any = None

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        qualified, name = self.question[0], self.question[1]
        values = self.values
        uses = []
        for found in traversal.walk(node):  # `x.name` (its `.name` is no read of its own), and aliases
            if isinstance(found, cst.ImportAlias) and found.asname is not None and (nodes.dotted_name(found.name) or "").rpartition(".")[2] == name:
                return False  # `from utils import f as g`: its calls spell `g`
            if isinstance(found, cst.Attribute) and found.attr.value == name:
                uses.append(found)
        binders = (cst.ImportAlias, cst.FunctionDef, cst.ClassDef, cst.Param)
        uses += [read for read in values.name_reads(node).get(name, ()) if not isinstance(values.parent(read), binders)]
        calls = []
        for use in uses:
            if _listed_in_all(values, use):
                continue  # a package's `__all__ = [Trainer]` names what it hands on, calling nothing
            if not values.names(use) & qualified:
                return False  # the file's own `name`, or one this question cannot follow
            call = values.parent(use)
            if not (isinstance(call, cst.Call) and call.func is use):
                return False
            calls.append(call)
        self.answer = self.answer_for(calls)
        return False

    def answer_for(self, calls: list[cst.Call]) -> Any:
        raise NotImplementedError


class _Callers(_Calls):
    """How many calls pass a loss module at one parameter
    (:meth:`~torchfix_device.facts.losses.LossEvidence.is_loss_argument`); None where one may not."""

    def answer_for(self, calls: list[cst.Call]) -> int | None:
        _, _, position, keyword = self.question
        losses = LossEvidence(self.values)
        for call in calls:
            arg = None if nodes.has_star_args(call) else nodes.argument(call, position, keyword)
            if arg is None or not losses.is_loss_argument(arg.value):
                return None
        return len(calls)


class _ReturnUses(_Calls):
    """Where what the calls return is used (:func:`~torchfix_device.facts.uses.uses_of_call`)."""

    def answer_for(self, calls: list[cst.Call]) -> list[Place] | None:
        _, _, position, length = self.question
        places: list[Place] = []
        for call in calls:
            found = uses_of_call(self.values, call, position, length)
            if found is None:
                return None
            places.extend(found)
        return places


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
