"""What the lower layers ask of the codemod being run: :class:`CodemodView`.

The facts and device layers answer questions about names and places (what ``T.load`` is, which
bindings reach a read, the class and function being visited) by asking the codemod that runs:
the engine's subclass answers them fast, libcst's own analysis exactly. They are typed against
this protocol, not against :class:`~torchfix_device.codemods.base.Codemod`, so that they import
nothing of the layer above them.
"""

from __future__ import annotations

from typing import Any, Protocol

import libcst as cst
from libcst.codemod import CodemodContext


class CodemodView(Protocol):
    """The parts of a running :class:`~torchfix_device.codemods.base.Codemod` the lower layers use."""

    context: CodemodContext
    class_stack: list[cst.ClassDef]
    """The classes around the node being visited (original nodes), outermost first."""
    function_stack: list[cst.FunctionDef]
    """The functions around the node being visited (original nodes), outermost first."""
    visited_module: cst.Module
    device_expression: str | None
    own_move_classes: frozenset[str]
    cuda_taking_nothing: frozenset[str]
    known_classes: frozenset[str]
    star_imports: Any
    device_source: Any
    """The codemod's :class:`~torchfix_device.devices.source.DeviceSource`."""

    def qualified_names(self, node: cst.CSTNode, *, ending_in: frozenset[str] | None = None, in_module_scope: bool = False) -> set[str]: ...

    def bindings_visible_at(self, name: str, node: cst.CSTNode) -> set[Any]: ...

    def exact_bindings(self, name: str, node: cst.CSTNode) -> set[Any]: ...

    def exact_qualified_names(self, node: cst.CSTNode) -> set[str]: ...

    def scope_of(self, node: cst.CSTNode) -> Any: ...

    def scopes_of_function_alone(self, function: cst.FunctionDef) -> Any: ...

    def function_locals(self, function: cst.FunctionDef) -> Any: ...

    def parent_of(self, node: cst.CSTNode) -> cst.CSTNode | None: ...

    def get_metadata(self, key: Any, node: cst.CSTNode, default: Any = ...) -> Any: ...

    def spelt_nowhere(self, name: str) -> bool: ...

    def free_at_module_level(self, name: str) -> bool: ...

    @property
    def replaced_a_node(self) -> bool: ...
