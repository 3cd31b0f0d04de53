"""How the engine runs a codemod fast: the subclass it makes of each codemod class.

:func:`engine_class` gives, for a codemod class, a subclass whose instances answer the same
questions as :class:`~torchfix_device.codemods.base.Codemod` (the exact, libcst-metadata answers) but
cheaper, and which the engine configures in one call (:meth:`EngineVisiting.configure`):

- **which statements to visit**: with stage 1's sites (``StatementSites``), the top-level
  statements and class members holding none are neither visited nor rebuilt, and what a visit
  left untouched is returned as the same object (:mod:`.statements`);
- **hook dispatch**: each ``visit_``/``leave_`` hook looked up once per class and node type,
  libcst's per-instance matcher scan skipped after a class's first instance;
- **positions** computed for the statement or method being visited alone (:mod:`.statements`);
- **names and scopes** from ``symtable`` and function-alone scope analyses
  (:class:`~.names.FastNameAnswers`), shared with every codemod of the same file through
  :class:`~.shared.SharedWrapper`.

With ``TORCHFIX_DEVICE_CHECK_NAMES=1`` (``CHECK_FAST_NAMES``) every shortcut is checked against
the base class's exact answer, and skipped statements are visited anyway and must stay
unreported and unchanged.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from torchfix_device.options import RunOptions
from torchfix_device.engine.names import FastNameAnswers
from torchfix_device.engine.shared import SharedWrapper
from torchfix_device.engine.statements import StatementTracking
from torchfix_device.syntax import visits
from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES

if TYPE_CHECKING:
    from torchfix_device.prefilter.candidates import ClassOutline, StatementSites
    from torchfix_device.facts.star_imports import FileStars
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.syntax.suppressions import Suppressions

_IMPORT_SCRATCH_KEYS = (AddImportsVisitor.CONTEXT_KEY, RemoveImportsVisitor.CONTEXT_KEY)
"""Where ``add_needed_import``/``remove_unused_import`` schedule the import passes libcst runs
after a codemod's own transform."""


def import_block_end(module: cst.Module) -> int:
    """How many of ``module``'s first statements ``AddImportsVisitor`` may read or change: the
    first one (where it is a docstring or ``__strict__``, the imports go after it), the import
    lines that follow, and the statement after those (it may get a blank line above)."""
    end = 1
    while end < len(module.body) and _import_line(module.body[end]):
        end += 1
    return min(end + 1, len(module.body))


def on_first_statements(run: Callable[[cst.Module], cst.Module], module: cst.Module) -> cst.Module:
    """``run`` (an ``AddImportsVisitor``'s transform) on the first statements of ``module``
    (:func:`import_block_end`), the rest following as it was."""
    end = import_block_end(module)
    if end >= len(module.body):
        return run(module)
    head = run(module.with_changes(body=module.body[:end]))
    return head.with_changes(body=(*head.body, *module.body[end:]))


def _import_line(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))


@functools.lru_cache(maxsize=None)
def engine_class(codemod: type["Codemod"]) -> type["Codemod"]:
    """The subclass of ``codemod`` the engine runs (made once per class)."""
    if issubclass(codemod, EngineVisiting):
        return codemod
    namespace = {"__module__": codemod.__module__, "__qualname__": codemod.__qualname__, "__doc__": codemod.__doc__}
    return type(codemod.__name__, (EngineVisiting, codemod), namespace)  # type: ignore[return-value]


class EngineVisiting(FastNameAnswers, StatementTracking):
    """Mixed in before a codemod class by :func:`engine_class` (see the module docstring)."""

    def __init__(self, context: CodemodContext, options: RunOptions | None = None, shared: SharedWrapper | None = None) -> None:
        self.shared = shared
        memos = shared if shared is not None else SharedWrapper()
        self._memos = memos
        super().__init__(context, options)  # type: ignore[call-arg]
        self._matcher_decorated = _MATCHER_DECORATED[type(self)]
        self._no_attribute_hooks = not self._matcher_decorated and not visits.defines_field_hooks(type(self))
        self._replacements = 0
        """How many times a hook has returned something other than the node it was given, in
        the current (or last) :meth:`transform_module`."""
        self._replacements_before: dict[int, int] = {}
        self.init_statement_tracking(memos)

    def configure(
        self,
        code: str,
        *,
        suppressions: "Suppressions",
        device_expression: str | None,
        keeps_findings: bool,
        keeps_fixes: bool = False,
        sites: "StatementSites | None" = None,
        classes: "dict[int, ClassOutline] | None" = None,
        own_move_classes: frozenset[str] = frozenset(),
        cuda_taking_nothing: frozenset[str] = frozenset(),
        known_classes: frozenset[str] = frozenset(),
        star_imports: "FileStars | None" = None,
        project_attributes: Any = None,
        imported_by_none: bool = False,
        foreign_returns: Any = None,
        foreign_callers: Any = None,
    ) -> None:
        """What the engine tells a codemod before a transform: the code of the tree (saves
        rendering it), its ``noqa`` comments, the run's device expression and classes that move
        themselves, what the file's star imports bind, whether its findings are kept, and stage 1's
        sites and class outlines."""
        self.source_code = code
        self.suppressions = suppressions
        self.device_expression = device_expression
        self.keeps_findings = keeps_findings
        self.keeps_fixes = keeps_fixes
        self.own_move_classes = own_move_classes
        self.cuda_taking_nothing = cuda_taking_nothing
        self.known_classes = known_classes
        self.star_imports = star_imports
        self.project_attributes = project_attributes
        self.imported_by_none = imported_by_none
        self.foreign_returns = foreign_returns
        self.foreign_callers = foreign_callers
        if sites is not None:
            self.statements_with_sites = sites
        if classes is not None:
            self.stage1_classes = classes

    def _init_libcst(self, context: CodemodContext) -> None:
        """libcst looks for ``@m.visit``/``@m.leave``/``@m.call_if_inside`` decorators by calling
        ``getattr`` on every attribute of every new instance: about 30 ms a codemod, three
        quarters of the time of a small file. The first instance of each class goes through
        libcst's own ``__init__``, which tells whether the class has any; the others get what it
        would leave set directly (``tests/test_engine.py`` compares both states)."""
        if _MATCHER_DECORATED.get(type(self)) is False:
            self.metadata = {}
            self.context = context
            self._matchers = {}
            self._extra_visit_funcs = {}
            self._extra_leave_funcs = {}
            return
        super()._init_libcst(context)  # type: ignore[misc]
        _MATCHER_DECORATED[type(self)] = bool(self._matchers or self._extra_visit_funcs or self._extra_leave_funcs)

    def transform_module(self, tree: cst.Module) -> cst.Module:
        self._replacements = 0
        self._replacements_before = {}
        self._inside_skipped = None
        return super().transform_module(tree)  # type: ignore[misc]

    def _instantiate_and_run(self, transform: type, tree: cst.Module) -> cst.Module:
        """libcst's import passes, after this codemod's transform. ``AddImportsVisitor`` reads
        and changes only the module's first statements: the imports at the top (after a
        docstring) and the statement after them; it copies and walks the whole tree all the
        same (a sixth of the engine's time on a 5,000-line file). It runs on those statements
        alone, and the rest of the module follows as it was (``tests/test_import_edits.py``
        compares both ways: on the shapes that matter, and on fixture inputs)."""
        run = functools.partial(super()._instantiate_and_run, transform)  # type: ignore[misc]
        return on_first_statements(run, tree) if transform is AddImportsVisitor else run(tree)

    @property
    def replaced_a_node(self) -> bool:
        """During or after :meth:`transform_module`: some hook has returned something other
        than the node it was given."""
        return self._replacements > 0

    @property
    def changed_tree(self) -> bool:
        """After :meth:`transform_module`: False when no hook returned anything but the node it
        was given and no import was scheduled, so the result renders exactly as the input did.
        True means "maybe changed": the caller compares the code."""
        scratch = self.context.scratch
        return self.replaced_a_node or any(key in scratch for key in _IMPORT_SCRATCH_KEYS)

    # -- dispatch ---------------------------------------------------------------------------
    # libcst calls on_visit / on_leave (and the per-attribute hooks) for every node of every
    # transform, looking the hook up by name each time and going through the matcher machinery
    # (``@m.visit`` decorators), which no codemod here uses. Looking each hook up once per class
    # and node type, and skipping libcst's empty default hooks, gives the same calls in the same
    # order at a fraction of the cost. A codemod that does use matcher decorators gets libcst's
    # own dispatch.
    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Module):
            self.enter_module(node)
        elif not self.enter_statement(node):
            return False
        if self._matcher_decorated:
            return super().on_visit(node)  # type: ignore[misc]
        hook = _hook(type(self), "visit_", type(node))
        return hook is None or hook(self, node) is not False

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        if self.leaving_skipped(original_node):
            return updated_node
        if self._matcher_decorated:
            left = super().on_leave(original_node, updated_node)  # type: ignore[misc]
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
            # rendering of the rewrite find the same object (see ``traversal.module_code``).
            return original_node
        return left

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if self._no_attribute_hooks:
            return None  # libcst calls these for every field of every node walked
        if self._matcher_decorated:
            return super().on_visit_attribute(node, attribute)  # type: ignore[misc]
        hook = _hook(type(self), "visit_", type(node), attribute)
        if hook is not None:
            hook(self, node)
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if self._no_attribute_hooks:
            return None
        if self._matcher_decorated:
            return super().on_leave_attribute(original_node, attribute)  # type: ignore[misc]
        hook = _hook(type(self), "leave_", type(original_node), attribute)
        if hook is not None:
            hook(self, original_node)
        return None

    # -- metadata, shared and lazy ----------------------------------------------------------
    def _handle_metadata_reference(self, module: cst.Module):  # type: ignore[override]
        if self.shared is None:
            return super()._handle_metadata_reference(module)  # type: ignore[misc]
        return self.use_wrapper(self.shared.wrapper_for(module))

    @contextmanager
    def use_wrapper(self, wrapper: MetadataWrapper) -> Iterator[cst.Module]:
        old = self.context.wrapper
        self.context = replace(self.context, wrapper=wrapper)
        self._metadata_cache = {}
        try:
            yield wrapper.module
        finally:
            self.context = replace(self.context, wrapper=old)

    def get_metadata(self, key: Any, node: cst.CSTNode, default: Any = ...) -> Any:  # type: ignore[override]
        if key is PositionProvider:
            local = self.statement_position(node)
            if local is not None:
                if CHECK_FAST_NAMES:
                    whole = super().get_metadata(key, node)  # type: ignore[misc]
                    assert whole == local, f"statement-local position {local} != {whole}"
                return local
        return super().get_metadata(key, node, default)  # type: ignore[misc]

    def report(self, node: cst.CSTNode, message: str, *, fixable: bool = True, safe: bool | None = None) -> bool:
        if CHECK_FAST_NAMES:
            assert self._inside_skipped is None, f"{self.code} reports in a statement without a stage-1 site: {message}"
        return super().report(node, message, fixable=fixable, safe=safe)  # type: ignore[misc]


_MATCHER_DECORATED: dict[type, bool] = {}
"""Engine class → whether it uses libcst's matcher decorators (learnt from its first instance)."""

_HOOKS: dict[tuple[type, str, type, str | None], Callable[..., Any] | None] = {}


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
            found = None if klass in visits.LIBCST_DEFAULTS else klass.__dict__[name]
            break
    _HOOKS[key] = found
    return found
