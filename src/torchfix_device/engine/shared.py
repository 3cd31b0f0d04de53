"""What the codemods run on one file share: one metadata wrapper per module version, and the
pieces of metadata computed piecewise (statement positions, function-alone scopes, names)."""

from __future__ import annotations

from typing import Any, Callable

import libcst as cst
from libcst.metadata import MetadataWrapper

from torchfix_device.syntax import batched_visitors  # noqa: F401  (libcst's hooks found once per class)
from torchfix_device.syntax import visits  # noqa: F401  (libcst's visits build only what a hook changed)
from torchfix_device.syntax import traversal
from torchfix_device.syntax.traversal import TRIVIA
from torchfix_device.syntax import qualified_names as fast_names
from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES
from torchfix_device.facts.tree import tree_facts


def _holds_no_node_twice(module: cst.Module) -> bool:
    """No node other than :data:`TRIVIA` stands in two places of ``module``."""
    seen: set[int] = set()
    for node in traversal.walk(module):
        if id(node) in seen and not isinstance(node, TRIVIA):
            return False
        seen.add(id(node))
    return True


class NodeMemo:
    """Values computed from one node, remembered while the node lives (keyed by identity; the
    node is kept with its value, so its ``id`` cannot be reused meanwhile)."""

    def __init__(self) -> None:
        self._values: dict[int, tuple[cst.CSTNode, Any]] = {}

    def get(self, node: cst.CSTNode, compute: Callable[[], Any]) -> Any:
        known = self._values.get(id(node))
        if known is None or known[0] is not node:
            known = self._values[id(node)] = (node, compute())
        return known[1]


class SharedWrapper:
    """One ``MetadataWrapper`` per module, shared by the codemods that run on that module, so
    scopes, qualified names and positions are computed once instead of once per codemod.

    It keeps the wrapper of every module version of one file's transform: the runner goes back
    to the original tree (for findings' positions) after rewrites, and must not pay for its
    metadata twice. ``parsed`` is the tree ``libcst.parse_module`` returned, wrapped without a
    copy. It also keeps each module version's :class:`~torchfix_device.syntax.qualified_names.FastNames`,
    and the statement positions and function scopes the codemods compute piecewise."""

    def __init__(self, parsed: cst.Module | None = None) -> None:
        self._wrappers: dict[int, tuple[cst.Module, MetadataWrapper]] = {}
        self._parsed = parsed
        self._names: dict[int, tuple[MetadataWrapper, "fast_names.FastNames | None"]] = {}
        self.statement_positions = NodeMemo()
        """Top-level statement or member of a top-level class → the positions of its nodes,
        rendered on its own with its indentation in the file, from line 1."""
        self.function_scopes = NodeMemo()
        """Function → libcst's scopes from an analysis of it alone (``scopes_of_function_alone``)."""
        self.function_locals = NodeMemo()
        """Function → what its own scope binds (``function_locals``)."""
        self.function_names = NodeMemo()
        """Function → the identifiers spelt as names in it."""
        self.skeletons = NodeMemo()
        """Module → its module-level bindings (:class:`~torchfix_device.syntax.scopes.ModuleSkeleton`)."""

    def wrapper_for(self, module: cst.Module) -> MetadataWrapper:
        known = self._wrappers.get(id(module))
        if known is None or known[0] is not module:
            # libcst's wrapper deep-copies a tree (about a parse's cost) because metadata is
            # keyed by node identity, which a node standing in two places would confuse. A tree
            # fresh from the parser holds no node twice; a rewritten one's tree facts tell
            # (derived from the tree it came from), tokens no metadata is asked of aside.
            unique = module is self._parsed or tree_facts(module).once
            if CHECK_FAST_NAMES:
                assert unique == (module is self._parsed or _holds_no_node_twice(module)), "a tree's facts miss a node in two places"
            known = self._wrappers[id(module)] = (module, MetadataWrapper(module, unsafe_skip_copy=unique))
        return known[1]

    def names_for(self, wrapper: MetadataWrapper, code: str | None) -> "fast_names.FastNames | None":
        """The :class:`~torchfix_device.syntax.qualified_names.FastNames` of the module ``wrapper`` holds,
        whose code is ``code`` (rendered here when not given); None when ``symtable`` cannot
        read it."""
        known = self._names.get(id(wrapper))
        if known is None or known[0] is not wrapper:
            try:
                names = fast_names.FastNames(wrapper.module, wrapper.module.code if code is None else code)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                names = None
            known = self._names[id(wrapper)] = (wrapper, names)
        return known[1]
