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
from typing import Mapping

import libcst as cst
from libcst.codemod import CodemodContext

from torchfix_device.codemods.base import Codemod
from torchfix_device.engine.visiting import engine_class
from torchfix_device.facts.returns import Returned, made_by_class, returned
from torchfix_device.files.sources import SourceError, read_source
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
    try:
        text = read_source(Path(path)).text
        module = cst.parse_module(text)
    except (SourceError, OSError, cst.ParserSyntaxError, RecursionError, ValueError):
        return {}
    summary = engine_class(_Summary)(CodemodContext(filename=path))
    summary.configure(  # type: ignore[attr-defined]
        text, suppressions=NO_SUPPRESSIONS, device_expression=None, keeps_findings=False,
    )
    summary.transform_module(module)
    return getattr(summary, "summaries", {})
