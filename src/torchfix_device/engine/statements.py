"""Which statements a codemod visits, and positions computed one statement at a time.

Stage 1 tells, for a codemod with a site function, which top-level statements (and which
members of a top-level class, one level further into a nested class) hold a site
(:class:`~torchfix_device.prefilter.candidates.StatementSites`). :class:`StatementTracking` matches those
``ast`` statements with libcst's, skips the others, and tracks the statement, class member and
nested member being visited, so that a position is computed by rendering that piece alone
(with the indentation it has in the file) instead of the whole module. For a codemod with
``skips_within_statements``, it also skips, inside a statement it visits, the statements of
its blocks (at any depth) that stage 1's outline shows to hold no site
(:func:`statements_within_without_sites`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES

if TYPE_CHECKING:
    from torchfix_device.prefilter.candidates import ClassOutline, StatementSites
    from torchfix_device.prefilter.nested_sites import Outline
    from torchfix_device.engine.shared import SharedWrapper


class StatementTracking:
    """The statement-skipping and positioning half of the engine's codemod subclass."""

    statements_with_sites: "StatementSites | None" = None
    """Stage 1's sites of this codemod in the code being transformed (None: visit everything)."""
    stage1_classes: "dict[int, ClassOutline]" = {}
    """Stage 1's outline of each top-level class of the same code, by statement index."""
    _inside_skipped: cst.CSTNode | None = None
    """In checking mode: the statement without a stage-1 site being visited anyway."""
    visited_module: cst.Module

    def init_statement_tracking(self, memos: "SharedWrapper") -> None:
        self._local_positions = memos.statement_positions
        self._skipped_statements: set[int] = set()
        self._statement_lines: dict[int, int] = {}
        """``id`` of each visited top-level statement → the file line its rendering starts on."""
        self._ast_indices: dict[int, int] = {}
        self._current_statement: cst.CSTNode | None = None
        self._member_lines: dict[int, int] = {}
        """``id`` of each member of the top-level class being visited → its first line."""
        self._member_indent: tuple[str, ...] = ()
        self._current_member: cst.CSTNode | None = None
        self._member_indices: dict[int, int] = {}
        """``id`` of each of those members → its index in stage 1's class body."""
        self._inner_lines: dict[int, int] = {}
        """The same for the members of a class that is a member being visited (one level down)."""
        self._inner_indent: tuple[str, ...] = ()
        self._current_inner: cst.CSTNode | None = None
        self._within: dict[int, Outline] = {}
        """``id`` of each statement to visit whose own statements stage 1 outlined → that outline."""

    @property
    def current_statement(self) -> cst.CSTNode | None:
        """The top-level statement being visited (None before the first)."""
        return self._current_statement

    def enter_module(self, module: cst.Module) -> None:
        self._skipped_statements, self._statement_lines, self._ast_indices = _statements_without_sites(
            module, self.statements_with_sites
        )
        nested = self.statements_with_sites.nested if self.statements_with_sites is not None else {}
        self._within = {id(s): nested[i] for s in module.body if (i := self._ast_indices.get(id(s), -1)) in nested}

    def enter_statement(self, node: cst.CSTNode) -> bool:
        """Called before ``node`` is visited: False to skip it. Marks the top-level statements
        and members whose visit replaces nothing, to be kept as they were."""
        if id(node) in self._skipped_statements:
            if not CHECK_FAST_NAMES:
                return False
            if self._inside_skipped is None:  # visit it anyway: nothing may be reported or changed there
                self._inside_skipped = node
            self._replacements_before[id(node)] = self._replacements  # type: ignore[attr-defined]
        if id(node) in self._statement_lines:
            self._current_statement = node
            self._current_member = self._current_inner = None
            self._member_lines, self._member_indent, self._member_indices = self._class_members(
                node, self.stage1_classes.get(self._ast_indices.get(id(node), -1)), ()
            )
            self._replacements_before[id(node)] = self._replacements  # type: ignore[attr-defined]
        elif id(node) in self._member_lines:
            self._current_member, self._current_inner = node, None
            outer = self.stage1_classes.get(self._ast_indices.get(id(self._current_statement), -1))
            inner = outer.classes.get(self._member_indices.get(id(node), -1)) if outer is not None else None
            self._inner_lines, self._inner_indent, _ = self._class_members(node, inner, self._member_indent)
            self._replacements_before[id(node)] = self._replacements  # type: ignore[attr-defined]
        elif id(node) in self._inner_lines:
            self._current_inner = node
        outline = self._within.get(id(node))
        if outline is not None:
            skipped, deeper = statements_within_without_sites(node, outline)
            self._skipped_statements.update(skipped)
            self._within.update(deeper)
        return True

    def leaving_skipped(self, original_node: cst.CSTNode) -> bool:
        """True when ``original_node`` is a skipped statement (returned as it was)."""
        if id(original_node) not in self._skipped_statements:
            return False
        if not CHECK_FAST_NAMES:
            return True
        if self._inside_skipped is original_node:
            self._inside_skipped = None
        return False

    def statement_position(self, node: cst.CSTNode) -> Any:
        """The position of ``node`` from the method of a top-level class, or else the top-level
        statement, being visited alone (rendered on its own with the indentation it has in the
        file, its lines shifted to where it starts), or None when ``node`` is not in it. Costs
        the size of that method or statement, not the file's."""
        statement = self._current_statement
        if statement is None:
            return None
        inner = self._current_inner
        if inner is not None:
            found = self._local_position(node, inner, self._inner_lines[id(inner)], self._inner_indent)
            if found is not None:
                return found
        member = self._current_member
        if member is not None:
            found = self._local_position(node, member, self._member_lines[id(member)], self._member_indent)
            if found is not None:
                return found
        return self._local_position(node, statement, self._statement_lines[id(statement)], ())

    def _local_position(self, node: cst.CSTNode, statement: cst.CSTNode, first_line: int, indent: Sequence[str]) -> Any:
        module = self.visited_module
        positions = self._local_positions.get(statement, lambda: _positions_alone(statement, module, indent))
        found = positions.get(node)
        if found is None:
            return None
        shift = first_line - 1
        return CodeRange(CodePosition(found.start.line + shift, found.start.column), CodePosition(found.end.line + shift, found.end.column))

    def _class_members(
        self, statement: cst.CSTNode, outline: "ClassOutline | None", indent: tuple[str, ...]
    ) -> tuple[dict[int, int], tuple[str, ...], dict[int, int]]:
        """For a class, ``statement``, whose outline in stage 1's ``ast`` is ``outline`` and
        which stands in blocks indented by ``indent``: ``id`` → first rendered line of each
        statement of its body (from stage 1's line numbers), the body's indentation, and ``id``
        → each one's index in stage 1's body; nothing for any other statement, or when the two
        parsers' statements cannot be matched up."""
        if not isinstance(statement, cst.ClassDef) or not isinstance(statement.body, cst.IndentedBlock) or outline is None:
            return {}, (), {}
        block = statement.body
        own = block.indent if block.indent is not None else self.visited_module.default_indent
        indices, lines = _rendered_starts(block.body, outline.member_lines)
        return lines, (*indent, own), indices


def _statements_without_sites(
    module: cst.Module, sites: "StatementSites | None"
) -> tuple[set[int], dict[int, int], dict[int, int]]:
    """``id``s of the top-level statements of ``module`` holding none of the ``ast`` statement
    indices in ``sites`` (a ``a; b`` line is one libcst statement, two ``ast`` ones), and of the
    members without one of the classes ``sites`` has member sites for; for the top-level
    statements kept, the file line their rendering starts on (their leading comment lines
    included) and the index of their first ``ast`` statement. Nothing to skip when the two
    parsers count the statements differently."""
    if sites is None:
        return set(), {}, {}
    indices, lines = _rendered_starts(module.body, sites.starts)
    if not lines:
        return set(), {}, {}
    skipped = set()
    for statement in module.body:
        index = indices[id(statement)]
        if not any(i in sites.wanted for i in range(index, index + _ast_statement_count(statement))):
            skipped.add(id(statement))
            del lines[id(statement)]
        elif index in sites.members and isinstance(statement, cst.ClassDef):
            nested = {member: found for (outer, member), found in sites.inner.items() if outer == index}
            skipped.update(_members_without_sites(statement, *sites.members[index], nested))
    return skipped, lines, indices


def statements_within_without_sites(statement: cst.CSTNode, outline: "Outline") -> tuple[list[int], "dict[int, Outline]"]:
    """``id``s of the statements in the blocks of ``statement`` that hold no site by stage 1's
    ``outline`` of it (:mod:`~torchfix_device.prefilter.nested_sites`), and the outlines of those
    that hold one in some of their own statements; nothing in a block that is a suite (``if x:
    a; b``) or whose statements the two parsers count differently."""
    blocks = _blocks(statement)
    skipped: list[int] = []
    deeper: dict[int, Outline] = {}
    if blocks is None or len(blocks) != len(outline):
        return skipped, deeper
    for block, entries in zip(blocks, outline):
        if block is None:
            continue
        planned, index = [], 0
        for child in block:
            count = _ast_statement_count(child)
            planned.append((child, entries[index:index + count]))
            index += count
        if index != len(entries):
            continue
        for child, found in planned:
            if not any(found):
                skipped.append(id(child))
            elif len(found) == 1 and isinstance(found[0], tuple):
                deeper[id(child)] = found[0]
    return skipped, deeper


def _blocks(statement: cst.CSTNode) -> "list[Sequence[cst.BaseStatement] | None] | None":
    """The statements of each block of a compound ``statement``, in the order of CPython's
    ``ast`` (an ``elif`` is a block holding one ``if``); None for a suite's; None for any other
    statement."""
    def own(block: cst.BaseSuite) -> Sequence[cst.BaseStatement] | None:
        return block.body if isinstance(block, cst.IndentedBlock) else None

    if isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.With)):
        return [own(statement.body)]
    if isinstance(statement, (cst.For, cst.While)):
        return [own(statement.body), *([own(statement.orelse.body)] if statement.orelse is not None else [])]
    if isinstance(statement, cst.If):
        orelse = statement.orelse
        rest = [] if orelse is None else [[orelse]] if isinstance(orelse, cst.If) else [own(orelse.body)]
        return [own(statement.body), *rest]
    if isinstance(statement, (cst.Try, cst.TryStar)):
        return [
            own(statement.body), *(own(h.body) for h in statement.handlers),
            *([own(statement.orelse.body)] if statement.orelse is not None else []),
            *([own(statement.finalbody.body)] if statement.finalbody is not None else []),
        ]
    return None


def _members_without_sites(
    cls: cst.ClassDef, wanted: set[int], ast_count: int, nested: dict[int, tuple[set[int], int]] | None = None
) -> list[int]:
    """``id``s of the statements of the body of ``cls`` holding none of the ``ast`` member
    indices ``wanted`` (``ast_count`` members in all) and, for a member that is a class with an
    entry in ``nested`` (its ``wanted`` and count), of its own members without one; none when
    the body is on the class's line (``class A: x = 1``) or the two parsers count its
    statements differently."""
    if not isinstance(cls.body, cst.IndentedBlock):
        return []
    skipped: list[int] = []
    index = 0
    for member in cls.body.body:
        count = _ast_statement_count(member)
        if not any(i in wanted for i in range(index, index + count)):
            skipped.append(id(member))
        elif nested and index in nested and isinstance(member, cst.ClassDef):
            skipped.extend(_members_without_sites(member, *nested[index]))
        index += count
    return skipped if index == ast_count else []


def _rendered_starts(
    statements: Sequence[cst.BaseStatement], starts: list[int]
) -> tuple[dict[int, int], dict[int, int]]:
    """For libcst ``statements`` and the first lines ``starts`` CPython's ``ast`` gives the same
    block's statements: ``id`` → index of the first ``ast`` statement, and ``id`` → the line the
    statement's rendering starts on (its leading comment lines included). Both empty when the
    two parsers count the statements differently."""
    indices: dict[int, int] = {}
    lines: dict[int, int] = {}
    index = 0
    for statement in statements:
        if index >= len(starts):
            return {}, {}
        indices[id(statement)] = index
        lines[id(statement)] = starts[index] - _lines_before_first_token(statement)
        index += _ast_statement_count(statement)
    return (indices, lines) if index == len(starts) else ({}, {})


def _ast_statement_count(statement: cst.BaseStatement) -> int:
    """How many ``ast`` statements a libcst statement is (``a; b`` is one line, two statements)."""
    return len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1


def _positions_alone(statement: cst.CSTNode, module: cst.Module, indent: Sequence[str]) -> Any:
    """libcst's positions of the nodes of ``statement`` rendered on its own, inside blocks
    indented by ``indent`` (as it is in the file), from line 1: ``PositionProvider``'s own
    codegen state, started where the statement stands. Continuation lines keep their own
    whitespace in libcst, so every column is the file's; lines are to be shifted."""
    provider = PositionProvider()
    state = PositionProvidingCodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline, provider=provider
    )
    state.indent_tokens = list(indent)
    statement._codegen(state)
    return provider._computed


def _lines_before_first_token(statement: cst.BaseStatement) -> int:
    """How many lines of ``statement``'s rendering come before the line CPython's ``ast`` gives
    as its first (the first decorator's, for a decorated definition)."""
    before = len(statement.leading_lines)
    decorators = getattr(statement, "decorators", ())
    if decorators:
        before += len(decorators[0].leading_lines)
    return before
