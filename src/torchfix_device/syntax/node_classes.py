"""libcst's node classes answer ``isinstance`` and ``issubclass`` as plain classes do.

Every libcst node class is an abstract base class (``CSTNode`` derives from ``abc.ABC``), so
``isinstance(node, cst.Name)`` is answered by ``ABCMeta.__instancecheck__`` whenever ``node`` is
not exactly a ``Name``: a Python-level call that asks the class's registry of virtual subclasses
and its caches. The engine and the codemods ask such questions some twelve million times over
the fixtures, and the ABC path was about a tenth of the engine's time.

libcst registers no virtual subclass and defines no ``__subclasshook__``: for its classes the
ABC answer is the answer of the class hierarchy alone, which ``type``'s own checks give. So
:func:`install` gives every libcst node class a metaclass (:class:`PlainChecks`, a subclass of
``ABCMeta``) whose checks are ``type``'s. It does so only while that equivalence holds, checked
class by class when installing: no virtual subclass registered, no ``__subclasshook__`` (else it
installs nothing). A class that later calls ``register`` puts every class back first
(:func:`uninstall`), so a virtual subclass is never ignored. ``tests/test_node_classes.py``
compares both answers for every pair of libcst node classes.
"""

from __future__ import annotations

import abc

import libcst as cst


class PlainChecks(abc.ABCMeta):
    """``ABCMeta`` whose instance and subclass checks are ``type``'s (see the module's text)."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__

    def register(cls, subclass):  # noqa: ANN001, ANN201 - ABCMeta's signature
        uninstall()
        return abc.ABCMeta.register(cls, subclass)


def node_classes() -> list[type]:
    """libcst's node classes: ``CSTNode`` and every class derived from it, once each."""
    seen: dict[type, None] = {}
    stack = [cst.CSTNode]
    while stack:
        cls = stack.pop()
        if cls not in seen:
            seen[cls] = None
            stack.extend(cls.__subclasses__())
    return list(seen)


def _plain(cls: type) -> bool:
    """Whether the ABC machinery answers for ``cls`` what its hierarchy answers."""
    dump = getattr(abc, "_get_dump", None)  # CPython's C implementation of abc
    if dump is None:
        return False
    registry = dump(cls)[0]
    return not registry and "__subclasshook__" not in vars(cls)


def install() -> bool:
    """Give every libcst node class :class:`PlainChecks` (idempotent); False where the
    equivalence does not hold, and then nothing is changed."""
    classes = node_classes()
    if not all(type(c) is PlainChecks or (type(c) is abc.ABCMeta and _plain(c)) for c in classes):
        return False
    done = []
    try:
        for cls in classes:
            if type(cls) is abc.ABCMeta:
                cls.__class__ = PlainChecks
                done.append(cls)
    except TypeError:  # an interpreter that does not allow it: as it was
        for cls in done:
            cls.__class__ = abc.ABCMeta
        return False
    return True


def uninstall() -> None:
    """Every libcst node class back to ``ABCMeta``."""
    for cls in node_classes():
        if type(cls) is PlainChecks:
            cls.__class__ = abc.ABCMeta


install()
