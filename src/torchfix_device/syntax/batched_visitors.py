"""libcst's batched metadata visitors, found once per class instead of once per analysis.

Every ``MetadataWrapper.resolve`` (scopes, positions, parents) asks each provider for its hooks
with ``BatchableCSTVisitor.get_visitors``, which runs ``inspect.getmembers`` over the ~1,700
attributes of the visitor class (most of them libcst's empty typed hooks). The engine resolves
the scopes of small pieces (one function alone, a module skeleton) thousands of times a run, and
that search was a third of the time spent in them. Which attributes are hooks depends only on the
class; :func:`install` makes ``get_visitors`` remember their names per class and return the same
mapping (the same names, bound to the instance, in the same order). An instance carrying a hook
of its own in ``__dict__`` gets libcst's own search. ``tests/test_engine.py`` compares both.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from libcst._batched_visitor import BatchableCSTVisitor

_LIBCST_GET_VISITORS = BatchableCSTVisitor.get_visitors
_HOOK_NAMES: dict[type, tuple[str, ...]] = {}


def libcst_get_visitors(visitor: BatchableCSTVisitor) -> Mapping[str, Callable[..., Any]]:
    """libcst's own answer (``inspect.getmembers`` over the instance)."""
    return _LIBCST_GET_VISITORS(visitor)


def get_visitors(visitor: BatchableCSTVisitor) -> Mapping[str, Callable[..., Any]]:
    if any(name.startswith(("visit_", "leave_")) for name in getattr(visitor, "__dict__", ())):
        return _LIBCST_GET_VISITORS(visitor)
    names = _HOOK_NAMES.get(type(visitor))
    if names is None:
        names = _HOOK_NAMES[type(visitor)] = tuple(_LIBCST_GET_VISITORS(visitor))
    return {name: getattr(visitor, name) for name in names}


def install() -> None:
    """Make every batched visitor's ``get_visitors`` the remembering one (idempotent)."""
    BatchableCSTVisitor.get_visitors = get_visitors  # type: ignore[method-assign]


install()
