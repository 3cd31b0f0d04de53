"""The codemod base class and the registry it fills.

A codemod is a libcst ``VisitorBasedCodemodCommand`` carrying a code (``TFD`` + 3 digits), a
name, a one-line summary, whether its fixes are safe, and the substrings a file must contain for
it to match at all (the runner's prefilter). Defining a subclass with a ``code`` registers it:
there is no hand-kept list.

Findings are recorded with :meth:`Codemod.report`; the rewrite itself is ordinary libcst.
"""

from __future__ import annotations

import argparse
import functools
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Sequence

import libcst as cst
from libcst._typed_visitor import CSTTypedBaseFunctions, CSTTypedTransformerFunctions
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider, QualifiedNameProvider, ScopeProvider
from libcst.helpers import get_full_name_for_node
from libcst.metadata.base_provider import LazyValue
from libcst.metadata.position_provider import PositionProvidingCodegenState

from torchfix_device import _cst, fast_names, scopes
from torchfix_device.fast_names import CHECK_FAST_NAMES
from torchfix_device.catalog import UnknownRuleError, lookup_ref, select_refs  # noqa: F401  (UnknownRuleError: re-exported)
from torchfix_device.device_source import DeviceSource
from torchfix_device.finding import Finding
from torchfix_device.suppressions import Suppressions

if TYPE_CHECKING:
    import ast

    from torchfix_device.candidates import ClassOutline, FileFacts, StatementSites

DOC_SECTIONS = (
    "What it does",
    "Why is this bad?",
    "Example",
    "Use instead",
    "Not rewritten",
    "Fix safety",
)

_CODE_RE = re.compile(r"^TFD\d{3}$")

FixFilter = Callable[[str, int, int, cst.Module], bool]
FIX_FILTER: ContextVar["FixFilter | None"] = ContextVar("torchfix_device_fix_filter", default=None)
"""Set by interactive review: given a fixable finding's code, line, column and the module being
transformed, says whether to apply its fix. Unset (None): every fix is applied."""

REGISTRY: dict[str, type["Codemod"]] = {}


class Codemod(VisitorBasedCodemodCommand):
    """Base class of every torchfix-device codemod.

    Subclasses set ``code``, ``name``, ``summary``, ``safe`` and ``triggers`` and write their
    documentation in the docstring, in the sections of :data:`DOC_SECTIONS` (Markdown, each
    section headed ``## <name>``).

    ``self.device_source`` (a :class:`DeviceSource`) chooses the device expression for a site;
    a binding it inserts is added when the module is left (subclasses overriding
    ``visit_Module``/``leave_Module`` must call ``super()``).

    The base class tracks the classes and functions being visited (``class_stack`` and
    ``function_stack`` hold the original nodes); subclasses overriding ``visit_ClassDef``,
    ``leave_ClassDef``, ``visit_FunctionDef`` or ``leave_FunctionDef`` must call ``super()``.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    safe: ClassVar[bool] = True
    """Whether this codemod's fixes are applied without ``--unsafe-fixes``. A codemod with
    ``safe = False`` never marks one finding safe (``report(..., safe=True)``): without
    ``--unsafe-fixes`` it only reports (see :meth:`may_change`)."""
    triggers: ClassVar[tuple[str, ...]] = ()
    """Substrings of which at least one must occur in a file's text for this codemod to match."""
    suppressions: "Suppressions | None" = None
    """The ``# noqa`` comments of the tree being transformed (set by the runner): a finding on a
    suppressed line is recorded in ``suppressed_findings`` and its fix declined."""
    device_expression: str | None = None
    """The value of an inserted device binding (set by the runner; None for the default)."""
    source_code: str | None = None
    """The code of the tree about to be transformed (set by the runner: saves rendering it)."""
    keeps_findings: bool = True
    """False (set by the runner) for a run whose findings are thrown away: a run on a rewritten
    tree, whose findings come from a run on the original. :meth:`report` then records nothing and
    computes no position unless a ``noqa`` comment or interactive review needs one to decide."""
    statements_with_sites: "StatementSites | None" = None
    """Set by the runner from stage 1's parse: the top-level statements (as CPython's ``ast``
    counts them) that hold a site (all of them for a codemod without a stage-1 site function,
    ``candidates.SITES``), the members of the top-level classes that do, and the first line of
    every top-level statement. The others are neither visited nor rebuilt, and positions inside
    a visited one are computed for that statement alone."""

    _inside_skipped: cst.CSTNode | None = None
    """In checking mode: the statement without a stage-1 site being visited anyway."""

    stage1_classes: "dict[int, ClassOutline]" = {}
    """Set by the runner with ``statements_with_sites``: the outline of each top-level class of
    stage 1's ``ast`` of the same code, by statement index, whose line numbers place class
    members (for positions computed one method at a time)."""

    METADATA_DEPENDENCIES = ()
    """Nothing is resolved up front: :meth:`get_metadata` resolves a provider the first time a
    codemod asks for it, through a wrapper the runner shares between codemods (positions are
    only computed for files with a finding, scopes only for files with a candidate site)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return
        if not _CODE_RE.match(cls.code):
            raise ValueError(f"{cls.__name__}: code {cls.code!r} is not TFD + 3 digits")
        for attr in ("name", "summary", "triggers"):
            if attr not in cls.__dict__:
                raise ValueError(f"{cls.__name__}: missing class attribute {attr!r}")
        for other in REGISTRY.values():
            if other.code == cls.code or other.name == cls.name:
                if other.__qualname__ != cls.__qualname__ or other.__module__ != cls.__module__:
                    raise ValueError(f"{cls.__name__}: code or name already used by {other.__name__}")
        REGISTRY[cls.code] = cls
        cls.DESCRIPTION = f"{cls.code} {cls.name}: {cls.summary}"  # `python -m libcst.tool list`

    DESCRIPTION: ClassVar[str] = "torchfix-device's base class (not a codemod by itself)"

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        """Options of ``python -m libcst.tool codemod``, passed to ``__init__``."""
        arg_parser.add_argument(
            "--unsafe-fixes", action="store_true", default=False, help="Also apply fixes marked unsafe."
        )

    def __init__(
        self, context: CodemodContext, unsafe_fixes: bool = False, shared: "SharedWrapper | None" = None
    ) -> None:
        if _MATCHER_DECORATED.get(type(self)) is False:
            self._init_libcst_state(context)
        else:
            super().__init__(context)
            _MATCHER_DECORATED[type(self)] = bool(self._matchers or self._extra_visit_funcs or self._extra_leave_funcs)
        self._matcher_decorated = _MATCHER_DECORATED[type(self)]
        self._no_attribute_hooks = not self._matcher_decorated and not _has_attribute_hooks(type(self))
        self.unsafe_fixes = unsafe_fixes
        self.shared = shared
        self._metadata_cache: dict[Any, Any] = {}
        self.findings: list[Finding] = []
        self.class_stack: list[cst.ClassDef] = []
        self.function_stack: list[cst.FunctionDef] = []
        self.checkpoint_notes: list[str] = []
        """Lines for the run's output about ``state_dict`` keys this rewrite adds."""
        self.suppressed_findings: list[Finding] = []
        self._skipped_statements: set[int] = set()
        self._statement_lines: dict[int, int] = {}
        """``id`` of each visited top-level statement → the file line its rendering starts on."""
        self._current_statement: cst.CSTNode | None = None
        self._member_lines: dict[int, int] = {}
        """``id`` of each member of the top-level class being visited → its first line."""
        self._member_indent: tuple[str, ...] = ()
        """The indentation of those members (the class body's)."""
        self._current_member: cst.CSTNode | None = None
        self._member_indices: dict[int, int] = {}
        """``id`` of each of those members → its index in stage 1's class body."""
        self._inner_lines: dict[int, int] = {}
        """The same for the members of a class that is a member being visited (one level down)."""
        self._inner_indent: tuple[str, ...] = ()
        self._current_inner: cst.CSTNode | None = None
        memos = shared if shared is not None else SharedWrapper()
        self._local_positions = memos.statement_positions
        self._alone_scopes = memos.function_scopes
        self._skeletons = memos.skeletons
        self._function_names = memos.function_names
        self._replacements = 0
        """How many times a hook has returned something other than the node it was given, in
        the current (or last) :meth:`transform_module`."""

    # -- stage 1: where this codemod can act, decided with the stdlib ``ast`` ---------------
    @classmethod
    def may_match(cls, facts: "FileFacts") -> bool:
        """False only when this codemod can neither report nor change anything in the file that
        ``facts`` (:class:`~torchfix_device.candidates.FileFacts`) describes: then libcst never
        runs it there. A *necessary* condition, written next to the libcst code it mirrors;
        ``tests/test_candidates.py`` checks it on every fixture. The default asks :meth:`sites`."""
        sites = cls.sites(facts)
        return sites is None or next(iter(sites), None) is not None

    @classmethod
    def sites(cls, facts: "FileFacts") -> "Iterable[ast.AST] | None":
        """The ``ast`` nodes at which this codemod may report or rewrite (a superset), for a
        codemod whose visit of one statement does not depend on the others; the engine then
        does not visit the statements holding none. None (the default): visit everything."""
        return None

    @classmethod
    def may_change(cls, unsafe_fixes: bool) -> bool:
        """False when every fix of this codemod is unsafe and unsafe fixes are off: it then only
        reports, so the engine runs it on the original tree alone (for its findings), never on
        a rewrite it could not change."""
        return cls.safe or unsafe_fixes

    def transform_module(self, tree: cst.Module) -> cst.Module:
        self._replacements = 0
        self._replacements_before: dict[int, int] = {}
        self._inside_skipped = None
        return super().transform_module(tree)

    @property
    def replaced_a_node(self) -> bool:
        """During or after :meth:`transform_module`: some hook has returned something other
        than the node it was given."""
        return self._replacements > 0

    @property
    def changed_tree(self) -> bool:
        """After :meth:`transform_module`: False when no hook returned anything but the node it
        was given and no import was scheduled, so the result renders exactly as the input did
        (libcst rebuilds every node it walks, so the result is never the input object itself).
        True means "maybe changed": the caller compares the code."""
        scratch = self.context.scratch
        return self.replaced_a_node or any(key in scratch for key in _IMPORT_SCRATCH_KEYS)

    def _init_libcst_state(self, context: CodemodContext) -> None:
        """What libcst's ``__init__`` chain leaves on an instance of a class without matcher
        decorators, set directly. libcst looks for ``@m.visit``/``@m.leave``/``@m.call_if_inside``
        decorators by calling ``getattr`` on every attribute of every new instance: about 30 ms a
        codemod, three quarters of the time of a small file (a codemod is created per file and
        pass). The first instance of each class goes through libcst's own ``__init__``, which
        tells whether the class has any (``tests/test_engine.py`` compares both states)."""
        self.metadata = {}
        self.context = context
        self._matchers = {}
        self._extra_visit_funcs = {}
        self._extra_leave_funcs = {}

    # -- dispatch ---------------------------------------------------------------------------
    # libcst calls on_visit / on_leave (and the per-attribute hooks) for every node of every
    # transform, looking the hook up by name each time and going through the matcher machinery
    # (``@m.visit`` decorators), which no codemod here uses. Looking each hook up once per class
    # and node type, and skipping libcst's empty default hooks, gives the same calls in the same
    # order at a fraction of the cost. A codemod that does use matcher decorators gets libcst's
    # own dispatch.
    def _uses_matcher_decorators(self) -> bool:
        return self._matcher_decorated

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self._skipped_statements:
            if not CHECK_FAST_NAMES:
                return False
            if self._inside_skipped is None:  # visit it anyway: nothing may be reported or changed there
                self._inside_skipped = node
            self._replacements_before[id(node)] = self._replacements  # and keep it as it was
        if id(node) in self._statement_lines:
            self._current_statement = node
            self._current_member = self._current_inner = None
            self._member_lines, self._member_indent, self._member_indices = self._class_members(
                node, self.stage1_classes.get(self._ast_indices.get(id(node), -1)), ()
            )
            self._replacements_before[id(node)] = self._replacements
        elif id(node) in self._member_lines:
            self._current_member, self._current_inner = node, None
            outer = self.stage1_classes.get(self._ast_indices.get(id(self._current_statement), -1))
            inner = outer.classes.get(self._member_indices.get(id(node), -1)) if outer is not None else None
            self._inner_lines, self._inner_indent, _ = self._class_members(node, inner, self._member_indent)
            self._replacements_before[id(node)] = self._replacements
        elif id(node) in self._inner_lines:
            self._current_inner = node
        if self._uses_matcher_decorators():
            return super().on_visit(node)
        hook = _hook(type(self), "visit_", type(node))
        return hook is None or hook(self, node) is not False

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        if id(original_node) in self._skipped_statements:
            if not CHECK_FAST_NAMES:
                return updated_node
            if self._inside_skipped is original_node:
                self._inside_skipped = None
        if self._uses_matcher_decorators():
            left = super().on_leave(original_node, updated_node)
        else:
            hook = _hook(type(self), "leave_", type(original_node))
            left = updated_node if hook is None else hook(self, original_node, updated_node)
        if left is not updated_node:
            self._replacements += 1
            if CHECK_FAST_NAMES:
                assert self._inside_skipped is None, f"{self.code} changed a statement without a stage-1 site"
        elif self._replacements_before.pop(id(original_node), -1) == self._replacements:
            # A top-level statement or class member in which no hook replaced anything: its
            # original, not libcst's copy, so that the next codemod, the positions and the
            # rendering of the rewrite find the same object (see ``_cst.module_code``).
            return original_node
        return left

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if self._no_attribute_hooks:
            return None  # libcst calls these for every field of every node walked
        if self._uses_matcher_decorators():
            return super().on_visit_attribute(node, attribute)
        hook = _hook(type(self), "visit_", type(node), attribute)
        if hook is not None:
            hook(self, node)
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if self._no_attribute_hooks:
            return None
        if self._uses_matcher_decorators():
            return super().on_leave_attribute(original_node, attribute)
        hook = _hook(type(self), "leave_", type(original_node), attribute)
        if hook is not None:
            hook(self, original_node)
        return None

    # -- context tracking -------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> bool | None:
        self.device_source = DeviceSource(self, node)
        self.visited_module = node
        self._skipped_statements, self._statement_lines, self._ast_indices = _statements_without_sites(
            node, self.statements_with_sites
        )
        return None

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self.device_source.finish(updated_node)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        self.class_stack.append(node)
        return None

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.CSTNode:
        self.class_stack.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self.function_stack.append(node)
        return None

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.CSTNode:
        self.function_stack.pop()
        return updated_node

    # -- metadata, shared and lazy ----------------------------------------------------------
    def _handle_metadata_reference(self, module: cst.Module):  # type: ignore[override]
        if self.shared is None:
            return super()._handle_metadata_reference(module)
        return self._use_wrapper(self.shared.wrapper_for(module))

    @contextmanager
    def _use_wrapper(self, wrapper: MetadataWrapper) -> Iterator[cst.Module]:
        old = self.context.wrapper
        self.context = replace(self.context, wrapper=wrapper)
        self._metadata_cache = {}
        try:
            yield wrapper.module
        finally:
            self.context = replace(self.context, wrapper=old)

    def get_metadata(self, key: Any, node: cst.CSTNode, default: Any = ...) -> Any:  # type: ignore[override]
        if key is PositionProvider and self._current_statement is not None:
            local = self._statement_position(node)
            if local is not None:
                if CHECK_FAST_NAMES:
                    whole = self._whole_module_metadata(key)[node]
                    assert whole == local, f"statement-local position {local} != {whole}"
                return local
        mapping = self._whole_module_metadata(key)
        value = mapping[node] if default is ... else mapping.get(node, default)
        return value() if isinstance(value, LazyValue) else value

    def _statement_position(self, node: cst.CSTNode) -> Any:
        """The position of ``node`` from the method of a top-level class, or else the top-level
        statement, being visited alone (rendered on its own with the indentation it has in the
        file, its lines shifted to where it starts), or None when ``node`` is not in it. Costs
        the size of that method or statement, not the file's."""
        statement = self._current_statement
        assert statement is not None
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

    def _whole_module_metadata(self, key: Any) -> Any:
        mapping = self._metadata_cache.get(key)
        if mapping is None:
            wrapper = self.context.wrapper
            if wrapper is None:
                raise KeyError(f"no metadata for {key.__name__}: not inside a transform")
            mapping = self._metadata_cache[key] = wrapper.resolve(key)
        return mapping

    # -- findings ---------------------------------------------------------------------------
    def report(self, node: cst.CSTNode, message: str, *, fixable: bool = True, safe: bool | None = None) -> bool:
        """Record a finding at ``node``; return True when the caller should apply its fix.

        ``fixable=False`` records a place left for manual review. ``safe`` overrides the
        codemod's own safety for this one finding (weaker evidence makes a finding unsafe).
        """
        if safe and not self.safe:
            raise ValueError(f"{self.code}: a codemod with safe = False marks no finding safe (see may_change)")
        if CHECK_FAST_NAMES:
            assert self._inside_skipped is None, f"{self.code} reports in a statement without a stage-1 site: {message}"
        is_safe = self.safe if safe is None else safe
        apply = fixable and (is_safe or self.unsafe_fixes)
        chosen = FIX_FILTER.get()
        if not (self.keeps_findings or self._has_noqa() or (apply and chosen is not None)):
            return apply  # nothing to record, nothing that depends on where the node is
        position = self.get_metadata(PositionProvider, node).start
        suppressed = self._has_noqa() and self.suppressions.suppresses(position.line, self.code)  # type: ignore[union-attr]
        if apply and not suppressed and chosen is not None and not chosen(self.code, position.line, position.column + 1, self.visited_module):
            return False  # declined in interactive review: recorded as nothing, changes nothing
        if self.keeps_findings:
            (self.suppressed_findings if suppressed else self.findings).append(
                Finding(
                    line=position.line,
                    column=position.column + 1,
                    code=self.code,
                    message=message,
                    fixed=apply,
                    held_back=fixable and not apply,
                )
            )
            if not apply and not suppressed:  # shown by `python -m libcst.tool codemod`; the runner reports findings itself
                self.warn(f"{position.line}:{position.column + 1} {self.code} {message}")
        return apply and not suppressed

    def _has_noqa(self) -> bool:
        """The tree being transformed holds a ``# noqa`` comment that can suppress this
        codemod's findings (then positions decide); another tool's ``# noqa: F401`` cannot."""
        return self.suppressions is not None and self.suppressions.may_suppress(self.code)

    def is_suppressed(self, node: cst.CSTNode) -> bool:
        """True when a finding of this codemod at ``node`` would be suppressed by ``# noqa``:
        for a rewrite that is only correct if the rewrites at other places all happen."""
        if not self._has_noqa():
            return False
        line = self.get_metadata(PositionProvider, node).start.line
        return self.suppressions.suppresses(line, self.code)  # type: ignore[union-attr]

    # -- helpers ----------------------------------------------------------------------------
    def qualified_names(
        self, node: cst.CSTNode, *, ending_in: frozenset[str] | None = None, in_module_scope: bool = False
    ) -> set[str]:
        """The fully qualified names ``node`` may refer to (``torch.load`` for ``T.load``).

        With ``ending_in`` (last parts: ``{"load"}``), a caller that only looks at names ending
        in one of them may get the empty set instead of the others: a name spelt ``x.save``
        is then answered without any scope analysis.

        Names local to a function, class or comprehension (libcst's ``f.<locals>.x``) never name
        a module's object and may be left out, and a name used where it is unbound (code that
        raises ``NameError``) may be given what the file's imports elsewhere make it:
        :mod:`torchfix_device.fast_names` answers without libcst's scope analysis where it can.
        ``in_module_scope``: ``node`` is evaluated in the module's own scope (the base of a
        class defined at module level) although the codemod is visiting something else."""
        fast = self._fast_names()
        if ending_in is not None and fast is not None and not fast.may_end_in(node, ending_in):
            if CHECK_FAST_NAMES:
                exact = {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}
                wrong = [q for q in exact if q.rpartition(".")[2] in ending_in]
                assert not wrong, f"{cst.Module([]).code_for_node(node)!r} has names {wrong} ending in {sorted(ending_in)}"
            return set()
        answer = fast.qualified_names(node) if fast is not None else None
        if answer is None and fast is not None:
            answer = self._qualified_names_by_scope(node, fast, in_module_scope)
        if answer is not None and not CHECK_FAST_NAMES:
            return answer
        try:
            exact = {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}
        except KeyError:
            exact = set()
        if answer is None:
            return exact
        if not fast.agrees(answer, exact, node):  # type: ignore[union-attr]
            raise AssertionError(f"fast qualified names {sorted(answer)} != libcst's {sorted(exact)} for {cst.Module([]).code_for_node(node)!r}")
        return answer

    def scopes_of_function_alone(self, function: cst.FunctionDef) -> Any:
        """libcst's scopes for the nodes of ``function``, from a scope analysis of that function
        alone (a module holding only it), not of the whole file; None when it declares names
        ``global`` or ``nonlocal`` (they reach outside it). Exact for the names the function and
        the functions, lambdas and comprehensions inside it bind; the caller makes sure the
        names it asks about are bound nowhere outside (``FastNames.bound_in_functions_only``),
        or uses :func:`~torchfix_device.scopes.resolution_in_function`."""
        return self._alone_scopes.get(function, lambda: scopes.scopes_of_function_alone(function))

    def _resolution_in_function(self, name: str, node: cst.CSTNode) -> tuple[str, set[Any]] | None:
        """Where ``name`` read at ``node`` resolves, from the analysis of the outermost function
        being visited alone (:func:`~torchfix_device.scopes.resolution_in_function`); None
        outside functions or where that analysis cannot tell."""
        if not self.function_stack:
            return None
        function = self.function_stack[0]
        fast = self._fast_names()
        if fast is not None and not fast.bound_in_blocks(name) and name not in self._names_in(function):
            # Nothing in the function spells it, so nothing there binds it; nor does a class
            # body (where a decorator or default of the function would read it).
            return scopes.MODULE, set()
        return scopes.resolution_in_function(self.scopes_of_function_alone(function), node, name)

    def _names_in(self, function: cst.FunctionDef) -> frozenset[str]:
        """Every identifier spelt as a name in ``function`` (parameters, targets, reads)."""
        return self._function_names.get(function, lambda: frozenset(_cst.all_names(function)))

    def _module_skeleton(self) -> scopes.ModuleSkeleton:
        module = self.visited_module
        return self._skeletons.get(module, lambda: scopes.ModuleSkeleton(module))

    def _qualified_names_by_scope(
        self, node: cst.CSTNode, fast: "fast_names.FastNames", in_module_scope: bool
    ) -> set[str] | None:
        """The qualified names of ``node`` where ``FastNames`` alone cannot tell (its first name
        is bound at module level and inside some function or class too), from where that name
        resolves: at module level for code in the module's own scope (``in_module_scope``, or
        visited outside any class or function, no lambda or comprehension binding the name);
        in a function, a local of a function around ``node`` (no module's object) where one
        binds it, else the module-level binding's."""
        spelt = get_full_name_for_node(node)
        root = spelt.partition(".")[0] if spelt is not None else None
        if root is None or not fast.may_resolve_at_module_level(root):
            return None
        if in_module_scope or not (self.function_stack or self.class_stack):
            return None if fast.bound_in_blocks(root) else fast.module_level_names(node)
        where = self._resolution_in_function(root, node)
        if where is None:
            return None
        kind, found = where
        if kind == scopes.MODULE:
            return fast.module_level_names(node)
        if fast.locals_named_like_modules:
            return None
        if all(scopes.is_plain_assignment(a) for a in found):
            return set()
        if all(isinstance(a, scopes.ImportAssignment) for a in found):
            return fast_names.names_from(sorted(found, key=lambda a: a.name), spelt)  # type: ignore[arg-type]
        return None

    def bindings_visible_at(self, name: str, node: cst.CSTNode) -> set[Any]:
        """libcst's bindings of ``name`` visible at ``node`` (``scope[name]``), ``node`` being
        in the function being visited or at module level. Where ``symtable`` shows that only
        functions bind ``name``, from a scope analysis of the outermost function being visited
        alone (none at module level); else from the whole file's."""
        local = self._bindings_from_functions(name, node)
        if local is None:
            local = self._bindings_past_functions(name, node)
        if local is not None and not CHECK_FAST_NAMES:
            return local
        try:
            scope = self.get_metadata(ScopeProvider, node)
        except KeyError:
            scope = None
        whole = set(scope[name]) if scope is not None else set()
        if local is not None:
            assert {(type(a), id(a.node)) for a in local} == {(type(a), id(a.node)) for a in whole}, name
        return whole

    def _bindings_from_functions(self, name: str, node: cst.CSTNode) -> set[Any] | None:
        """The bindings of ``name`` visible at ``node`` without a scope analysis of the whole
        file, where ``symtable`` shows that only functions bind ``name``: none at module level
        or in a class body, else a scope analysis of the outermost function being visited
        alone. None when that cannot be told so."""
        fast = self._fast_names()
        if fast is None or not fast.bound_in_functions_only(name):
            return None
        if not self.function_stack or name not in self._names_in(self.function_stack[0]):
            return set()  # no function around binds it
        if any(f.name.value == name for f in self.function_stack):
            return None  # the outermost one's name would be bound in the module made of it
        scopes = self.scopes_of_function_alone(self.function_stack[0])
        scope = scopes.get(node) if scopes is not None else None
        return None if scope is None else set(scope[name])

    def _bindings_past_functions(self, name: str, node: cst.CSTNode) -> set[Any] | None:
        """The bindings of ``name`` visible at ``node`` in a function, where something at module
        level or in a class body binds it too: those of a function around ``node`` that binds
        it, else the module's own (from the module's skeleton, :mod:`torchfix_device.scopes`).
        None when that cannot be told so."""
        fast = self._fast_names()
        if fast is None or not fast.may_resolve_at_module_level(name):
            return None
        where = self._resolution_in_function(name, node)
        if where is None:
            return None
        kind, found = where
        return found if kind == scopes.LOCAL else self._module_skeleton().bindings(name)

    def _fast_names(self) -> "fast_names.FastNames | None":
        wrapper = self.context.wrapper
        if self.shared is None or wrapper is None:
            return None
        return self.shared.names_for(wrapper, self.source_code)

    @classmethod
    def documentation(cls) -> dict[str, str]:
        """The docstring's sections, by heading."""
        return parse_doc_sections(cls.__doc__ or "")


_IMPORT_SCRATCH_KEYS = (AddImportsVisitor.CONTEXT_KEY, RemoveImportsVisitor.CONTEXT_KEY)
"""Where ``add_needed_import``/``remove_unused_import`` schedule the import passes libcst runs
after a codemod's own transform."""


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


_MATCHER_DECORATED: dict[type, bool] = {}
"""Codemod class → whether it uses libcst's matcher decorators (learnt from its first instance)."""

_LIBCST_DEFAULT_HOOKS = (CSTTypedBaseFunctions, CSTTypedTransformerFunctions)
_HOOKS: dict[tuple[type, str, type, str | None], Callable[..., Any] | None] = {}


_ATTRIBUTE_HOOK_RE = re.compile(r"(visit|leave)_[A-Za-z]+_\w+")


@functools.lru_cache(maxsize=None)
def _has_attribute_hooks(cls: type) -> bool:
    """Whether ``cls`` defines a per-field hook (``visit_Call_func``, ``leave_If_test``)
    anywhere above libcst's own empty defaults."""
    return any(
        _ATTRIBUTE_HOOK_RE.fullmatch(name)
        for klass in cls.__mro__
        if klass not in _LIBCST_DEFAULT_HOOKS and klass is not object
        for name in vars(klass)
    )


def _hook(cls: type, prefix: str, node_type: type, attribute: str | None = None) -> Callable[..., Any] | None:
    """The function ``cls`` runs for ``visit_Call`` (or ``visit_Call_func`` with an attribute),
    or None where only libcst's empty default would run. Looked up once per class and node type."""
    key = (cls, prefix, node_type, attribute)
    try:
        return _HOOKS[key]
    except KeyError:
        pass
    name = prefix + node_type.__name__ + ("" if attribute is None else "_" + attribute)
    found: Callable[..., Any] | None = None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            found = None if klass in _LIBCST_DEFAULT_HOOKS else klass.__dict__[name]
            break
    _HOOKS[key] = found
    return found


def _holds_no_node_twice(module: cst.Module) -> bool:
    seen: set[int] = set()
    for node in _cst.walk(module):
        if id(node) in seen:
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
    copy. It also keeps each module version's :class:`~torchfix_device.fast_names.FastNames`,
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
        self.function_names = NodeMemo()
        """Function → the identifiers spelt as names in it."""
        self.skeletons = NodeMemo()
        """Module → its module-level bindings (:class:`~torchfix_device.scopes.ModuleSkeleton`)."""

    def wrapper_for(self, module: cst.Module) -> MetadataWrapper:
        known = self._wrappers.get(id(module))
        if known is None or known[0] is not module:
            # libcst's wrapper deep-copies a tree (about a parse's cost) because metadata is
            # keyed by node identity, which a node standing in two places would confuse. A tree
            # fresh from the parser holds no node twice; a rewritten one is checked (a walk).
            unique = module is self._parsed or _holds_no_node_twice(module)
            known = self._wrappers[id(module)] = (module, MetadataWrapper(module, unsafe_skip_copy=unique))
        return known[1]

    def names_for(self, wrapper: MetadataWrapper, code: str | None) -> "fast_names.FastNames | None":
        """The :class:`~torchfix_device.fast_names.FastNames` of the module ``wrapper`` holds,
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


def parse_doc_sections(doc: str) -> dict[str, str]:
    """Split a rule docstring into ``{heading: body}`` on ``## heading`` lines."""
    import inspect

    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def all_codemods() -> list[type[Codemod]]:
    """Every registered codemod, ordered by code."""
    import torchfix_device.codemods  # noqa: F401  (importing fills the registry)

    return [REGISTRY[c] for c in sorted(REGISTRY)]


def lookup(code_or_name: str) -> type[Codemod]:
    """The codemod with this code (``TFD005``) or name (``torch-load-without-map-location``)."""
    return lookup_ref(code_or_name).load()


def select_codemods(select: Iterable[str] | None, ignore: Iterable[str] | None) -> list[type[Codemod]]:
    """The codemods that ``--select`` / ``--ignore`` leave, ordered by code."""
    return [ref.load() for ref in select_refs(select, ignore)]
