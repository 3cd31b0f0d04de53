"""What a name read in a file means when a star import of the file may bind it: the answers of
:meth:`Codemod.qualified_names <torchfix_device.codemods.base.Codemod.qualified_names>` widened with
what :mod:`torchfix_device.facts.star_imports` resolved for the file.

libcst knows nothing of star imports: a name bound only by ``from network import *`` gets no
qualified name, so the codemods left it alone without a word. Here, for a name whose read
resolves at module level (no function, class or comprehension around binds it):

- a star import that binds it to an import adds that import's name (``Variable`` →
  ``torch.autograd.Variable``, ``torch.zeros`` → ``torch.zeros``), exactly as if the file
  imported it itself;
- a star import that binds it to something else, or may bind it without proof, adds the
  spelling itself (libcst's name for a module-level binding that is no import) where the name
  has some other answer: the name is then no longer *only* a torch object, so no fix keys on
  it. :func:`star_doubt` says why, for the codemods' review messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import libcst as cst
from libcst.metadata.scope_provider import BuiltinAssignment, GlobalScope
from torchfix_device.syntax import nodes
from torchfix_device.syntax.qualified_names import BUILTIN_NAMES

if TYPE_CHECKING:
    from torchfix_device.facts.star_imports import FileStars

LOCAL, IN_FILE, NOT_IN_FILE = "local", "in file", "not in file"
"""Where a name read at a place resolves: to a binding of a function, class or comprehension
around it; to a module-level binding of the file; to none of the file's (a builtin, or nothing)."""

Where = Callable[[str, cst.CSTNode], str]
"""``(name, node)`` → where ``name`` read at ``node`` resolves (one of the three above)."""


def where_bound(bindings: "set[Any]") -> str:
    """Where a name resolves, from libcst's bindings of it visible at the read."""
    if any(not isinstance(a, BuiltinAssignment) and not isinstance(getattr(a, "scope", None), GlobalScope) for a in bindings):
        return LOCAL
    return IN_FILE if any(not isinstance(a, BuiltinAssignment) for a in bindings) else NOT_IN_FILE


def _lookup(
    stars: "FileStars", node: cst.CSTNode, where: Where, spelt: str | None = None
) -> tuple[str, str, frozenset[str], list[str], bool] | None:
    spelt = spelt or nodes.dotted_name(node)
    if spelt is None:
        return None
    root, dot, tail = spelt.partition(".")
    if not stars.may_bind(root):
        return None
    if root in BUILTIN_NAMES and not stars.named_by_a_table(root):
        return None  # what it answers for a builtin no known star binds: nothing to add
    found = where(root, node)
    if found == LOCAL:
        return None  # a local of a function, class or comprehension around the read
    in_file = found == IN_FILE or root in BUILTIN_NAMES
    proven, doubts, other = stars.lookup(root, in_file)
    return spelt, dot + tail, proven, doubts, other


def widened(stars: "FileStars | None", node: cst.CSTNode, answer: set[str], where: Where) -> set[str]:
    """``answer`` (libcst's qualified names of ``node``) with what the file's star imports bind
    the first name of ``node`` to (see the module docstring)."""
    if stars is None:
        return answer
    found = _lookup(stars, node, where)
    if found is None:
        return answer
    spelt, tail, proven, doubts, other = found
    if not proven and not ((doubts or other) and answer):
        return answer
    names = set(answer) | {q + tail for q in proven}
    if doubts or other:
        names.add(spelt)
    return names


def star_doubt(stars: "FileStars | None", node: cst.CSTNode, where: Where, spelt: str | None = None) -> str | None:
    """Why a star import may bind the first name of ``node`` (or ``spelt``, read where ``node``
    is) to something not shown to be what an import names: the star import and what could not
    be resolved; None where no star import leaves a doubt."""
    if stars is None:
        return None
    found = _lookup(stars, node, where, spelt)
    if found is None or not found[3]:
        return None
    return "; ".join(found[3][:2])
