"""What a codemod author writes against: the :class:`Codemod` base class.

A codemod is one module in ``torchfix_device/codemods/`` holding one subclass of
:class:`Codemod` (a libcst ``VisitorBasedCodemodCommand``). It states, in this order:

1. who it is: ``code`` (``TFD`` + 3 digits) and ``name`` as plain string literals (the catalog
   reads them without importing the module), a one-line ``summary``, and ``safe`` (whether its
   fixes are applied without ``--unsafe-fixes``);
2. where it can act, cheaply: ``triggers`` (substrings a file must contain) and its stage-1
   test on the stdlib ``ast`` (:meth:`Codemod.may_match`, :meth:`Codemod.sites`), written next
   to the libcst code it mirrors;
3. the rewrite: ordinary libcst visitor hooks, calling :meth:`Codemod.report` at each finding
   and applying the fix only when it returns True; :meth:`Codemod.qualified_names` and
   :meth:`Codemod.bindings_visible_at` say what a name *is*; ``self.device_source`` says which
   device expression a site gets;
4. its documentation: the class docstring, in the sections of :data:`DOC_SECTIONS`.

Defining the subclass registers it; nothing else is kept by hand. Every method here gives the
exact answer from libcst's own metadata, so a codemod also runs as it is under
``python -m libcst.tool codemod``. The engine (:mod:`torchfix_device.engine`) runs codemods
through a subclass of its own that answers the same questions faster (statements without a
site skipped, positions and scopes computed piecewise); a codemod never sees that machinery.
"""

from __future__ import annotations

import argparse
import re
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.metadata import ParentNodeProvider, PositionProvider, QualifiedNameProvider, ScopeProvider
from libcst.metadata.base_provider import LazyValue

from torchfix_device.syntax import nodes as _nodes
from torchfix_device.codemods import catalog

from torchfix_device.codemods import docs as rule_docs

from torchfix_device.syntax import scopes

from torchfix_device.facts import star_names
from torchfix_device.facts import values as facts_values
from torchfix_device.devices.source import DeviceSource
from torchfix_device.finding import Finding
from torchfix_device.options import RunOptions
from torchfix_device.codemods.docs import DOC_SECTIONS, REPORT_ONLY, SAFE_FIX, UNSAFE_FIX  # noqa: F401 - the author API
from torchfix_device.syntax.suppressions import Suppressions
from torchfix_device.syntax.token_fixes import TokenFix

if TYPE_CHECKING:
    import ast

    from torchfix_device.prefilter.candidates import FileFacts
    from torchfix_device.facts.star_imports import FileStars

_CODE_RE = re.compile(r"^TFD\d{3}$")

FixFilter = Callable[[str, int, int, "cst.Module | None"], bool]
FIX_FILTER: ContextVar["FixFilter | None"] = ContextVar("torchfix_device_fix_filter", default=None)
"""Set by interactive review: given a fixable finding's code, line, column and the module being
transformed (None for a token fix, made before parsing at a place in the original file), says
whether to apply its fix. Unset (None): every fix is applied."""


class _ModuleValues:
    """``codemod.values``: the shared analysis of values of the module the codemod is visiting
    (:func:`torchfix_device.facts.values.of`, memoised per module version). A non-data
    descriptor, so a codemod may still bind ``self.values`` itself. None before the visit of a
    module begins (libcst's set-up reads every attribute of a codemod)."""

    def __get__(self, codemod: "Codemod | None", owner: type | None = None) -> Any:
        if codemod is None:
            return self
        return facts_values.of(codemod) if "visited_module" in codemod.__dict__ else None


class Codemod(VisitorBasedCodemodCommand):
    """Base class of every torchfix-device codemod (see the module docstring).

    Subclasses overriding ``visit_Module``/``leave_Module`` (which set up and finish
    ``self.device_source``) or ``visit_ClassDef``/``leave_ClassDef``/``visit_FunctionDef``/
    ``leave_FunctionDef`` (which keep ``class_stack`` and ``function_stack``, the original nodes
    around the one visited) must call ``super()``.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    safe: ClassVar[bool] = True
    """Whether this codemod's fixes are applied without ``--unsafe-fixes``. A codemod with
    ``safe = False`` never marks one finding safe: without ``--unsafe-fixes`` it only reports."""
    triggers: ClassVar[tuple[str, ...]] = ()
    """Substrings of which at least one must occur in a file's text for this codemod to match."""
    skips_within_statements: ClassVar[bool] = False
    """True for a codemod whose hooks read and change nothing but the statements holding its
    ``sites`` (a ``leave_Call`` at the call; nothing gathered from the statements around it):
    inside a statement holding a site, the engine then skips the statements, at any depth,
    that hold none, as it skips the top-level statements that hold none."""
    DESCRIPTION: ClassVar[str] = "torchfix-device's base class (not a codemod by itself)"

    # Set by whoever runs the codemod (the engine); the defaults suit a run on its own.
    suppressions: Suppressions | None = None
    """The ``# noqa`` comments of the tree being transformed: a finding on a suppressed line is
    recorded in ``suppressed_findings`` and its fix declined."""
    device_expression: str | None = None
    """The value of an inserted device binding (None for the default)."""
    keeps_findings: bool = True
    """False for a run whose findings are thrown away (a run on a rewritten tree)."""
    keeps_fixes: bool = False
    """With ``keeps_findings`` False: the fixes it applies are still recorded (a run on a tree
    an earlier fix rewrote, where a fix the original did not allow may become possible)."""
    own_move_classes: frozenset[str] = frozenset()
    """Classes the file reaches by import (its own too) that define their own ``cuda()``/``to()``."""
    cuda_taking_nothing: frozenset[str] = frozenset()
    """Those of them whose every ``cuda()`` in the run takes nothing but ``self``."""
    known_classes: frozenset[str] = frozenset()
    """Where there are such classes: the other classes of the run the file reaches (they do not)."""
    star_imports: "FileStars | None" = None
    """What the file's star imports bind, resolved over the run (:mod:`torchfix_device.facts.star_imports`)."""
    imported_by_none: bool = False
    """No file of the run (taken as the project) imports this one: its functions are called from
    here only."""
    project_attributes: Any = None
    foreign_returns: Any = None
    """What the functions the file imports from other files of the run return: a callable of
    :mod:`torchfix_device.engine.foreign` (qualified name → ``Returned`` or None), or None."""
    foreign_callers: Any = None
    """What the other files of the run pass the file's functions (``ForeignCallers`` of
    :mod:`torchfix_device.engine.foreign`), or None."""
    values = _ModuleValues()
    """The tables of the classes the file imports from the run, and the attribute names stored from
    outside (a ``FileAttributes`` of :mod:`torchfix_device.facts.project_attributes`), or None."""

    METADATA_DEPENDENCIES = ()  # :meth:`get_metadata` resolves a provider when first asked

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return
        if not _CODE_RE.match(cls.code):
            raise ValueError(f"{cls.__name__}: code {cls.code!r} is not TFD + 3 digits")
        for attr in ("name", "summary", "triggers"):
            if attr not in cls.__dict__:
                raise ValueError(f"{cls.__name__}: missing class attribute {attr!r}")
        catalog.register(cls)
        cls.DESCRIPTION = f"{cls.code} {cls.name}: {cls.summary}"  # `python -m libcst.tool list`

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:  # `python -m libcst.tool codemod`
        arg_parser.add_argument("--unsafe-fixes", action="store_true", default=False, help="Also apply fixes marked unsafe.")

    def __init__(self, context: CodemodContext, options: RunOptions | None = None, *, unsafe_fixes: bool = False) -> None:
        """``options``: the run's (the engine passes them); ``unsafe_fixes`` is how libcst's own
        tool passes its ``--unsafe-fixes`` (:meth:`add_args`)."""
        self._init_libcst(context)
        self.options = options if options is not None else RunOptions(unsafe_fixes=unsafe_fixes)
        self.findings: list[Finding] = []
        self.suppressed_findings: list[Finding] = []
        self.checkpoint_notes: list[str] = []  # for the run's output: state_dict keys a rewrite adds
        self.resolved: list[tuple[str, int, int]] = []  # (code, line, column): another codemod's review items its fixes remove
        self.class_stack: list[cst.ClassDef] = []
        self.function_stack: list[cst.FunctionDef] = []
        self._metadata_cache: dict[Any, Any] = {}

    def _init_libcst(self, context: CodemodContext) -> None:  # the engine's subclass does it faster
        super().__init__(context)

    @classmethod
    def may_change(cls, options: RunOptions) -> bool:  # False: every fix unsafe and not applied
        return options.applies(cls.safe)

    # -- stage 1: where this codemod can act, decided with the stdlib ``ast`` ---------------
    @classmethod
    def may_match(cls, facts: "FileFacts") -> bool:
        """False only when this codemod can neither report nor change anything in the file that
        ``facts`` (:class:`~torchfix_device.prefilter.candidates.FileFacts`) describes: then libcst never
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

    # -- before parsing: syntax Python 3 cannot parse at all --------------------------------
    @classmethod
    def token_fixes(cls, text: str) -> "Iterable[TokenFix]":
        """Single-token edits (:class:`~torchfix_device.syntax.token_fixes.TokenFix`, via :mod:`tokenize`)
        that make a file CPython cannot parse readable (``.cuda(async=True)``). The engine applies
        them, each a finding of this codemod, only to such files, then migrates them as usual."""
        return ()

    # -- context: the module, classes and functions around the node visited ----------------
    def visit_Module(self, node: cst.Module) -> bool | None:
        self.visited_module = node
        self.device_source = DeviceSource(self, node)
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

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.CSTNode:
        self.function_stack.pop()
        return self.device_source.flags.finish_function(original_node, updated_node)

    def get_metadata(self, key: Any, node: cst.CSTNode, default: Any = ...) -> Any:  # type: ignore[override]
        """libcst's metadata ``key`` of ``node`` in the module being transformed, resolved for
        the whole module the first time it is asked for."""
        mapping = self._metadata_cache.get(key)
        if mapping is None:
            wrapper = self.context.wrapper
            if wrapper is None:
                raise KeyError(f"no metadata for {key.__name__}: not inside a transform")
            mapping = self._metadata_cache[key] = wrapper.resolve(key)
        value = mapping[node] if default is ... else mapping.get(node, default)
        return value() if isinstance(value, LazyValue) else value

    def transform_module(self, tree: cst.Module) -> cst.Module:
        self._metadata_cache = {}
        return super().transform_module(tree)

    @property
    def replaced_a_node(self) -> bool:
        """Whether a hook of this transform has returned something other than the node it was
        given: True ("maybe") here; the engine counts."""
        return True

    # -- findings ---------------------------------------------------------------------------
    def report(self, node: cst.CSTNode, message: str, *, fixable: bool = True, safe: bool | None = None) -> bool:
        """Record a finding at ``node``; return True when the caller should apply its fix.

        ``fixable=False`` records a place left for manual review (say in ``message`` what
        evidence was missing). ``safe`` overrides the codemod's own safety for this one finding
        (weaker evidence makes a finding unsafe).
        """
        if safe and not self.safe:
            raise ValueError(f"{self.code}: a codemod with safe = False marks no finding safe (see may_change)")
        tier_safe = self.safe if safe is None else safe
        apply = fixable and self.options.applies(tier_safe)
        chosen = FIX_FILTER.get()
        if not (self.keeps_findings or self._has_noqa() or (apply and (chosen is not None or self.keeps_fixes))):
            return apply  # nothing to record, nothing that depends on where the node is
        position = self.get_metadata(PositionProvider, node).start
        suppressed = self._has_noqa() and self.suppressions.suppresses(position.line, self.code)  # type: ignore[union-attr]
        if apply and not suppressed and chosen is not None and not chosen(self.code, position.line, position.column + 1, self.visited_module):
            return False  # declined in interactive review: recorded as nothing, changes nothing
        if self.keeps_findings or (self.keeps_fixes and apply and not suppressed):
            found = Finding(line=position.line, column=position.column + 1, code=self.code, message=message, fixed=apply,
                            held_back=fixable and not apply, unsafe=fixable and not tier_safe)
            (self.suppressed_findings if suppressed else self.findings).append(found)
            if not apply and not suppressed:  # shown by `python -m libcst.tool codemod`
                self.warn(f"{position.line}:{position.column + 1} {self.code} {message}")
        return apply and not suppressed

    def resolves(self, node: cst.CSTNode, code: str) -> None:
        """A fix of this codemod that will be applied removes ``node``, where codemod ``code``
        leaves an item for manual review: the run does not list that item."""
        if self.keeps_findings or self.keeps_fixes:
            position = self.get_metadata(PositionProvider, node).start
            self.resolved.append((code, position.line, position.column + 1))

    def _has_noqa(self) -> bool:  # a `# noqa` comment that can suppress this codemod's findings
        return self.suppressions is not None and self.suppressions.may_suppress(self.code)

    def is_suppressed(self, node: cst.CSTNode) -> bool:
        """True when a finding of this codemod at ``node`` would be suppressed by ``# noqa``:
        for a rewrite that is only correct if the rewrites at other places all happen."""
        if not self._has_noqa():
            return False
        return self.suppressions.suppresses(self.get_metadata(PositionProvider, node).start.line, self.code)  # type: ignore[union-attr]

    # -- what names are ---------------------------------------------------------------------
    def qualified_names(self, node: cst.CSTNode, *, ending_in: frozenset[str] | None = None, in_module_scope: bool = False) -> set[str]:
        """The fully qualified names ``node`` may refer to (``torch.load`` for ``T.load``).

        ``ending_in`` (last parts, ``{"load"}``): the caller only looks at names ending in one
        of them, and may get the empty set instead of the others. Names local to a function,
        class or comprehension never name a module's object and may be left out.
        ``in_module_scope``: ``node`` is evaluated in the module's own scope (the base of a
        module-level class) although the codemod is visiting something else.

        A name that a star import of the file binds (:attr:`star_imports`) is named as that
        import names it, or not only as a torch object where the star import leaves a doubt
        (:mod:`torchfix_device.facts.star_names`; :meth:`star_doubt` says why)."""
        answer = self._plain_qualified_names(node, ending_in=ending_in, in_module_scope=in_module_scope)
        if self.star_imports is None:
            return answer
        return star_names.widened(self.star_imports, node, answer, self._star_where)

    def names_an_import(self, node: cst.CSTNode) -> bool:
        """``node`` is (part of) the dotted name of an import (``torch.utils`` in ``from
        torch.utils.data import X``): no read, so no star import's binding competes with it."""
        above = self.parent_of(node)
        while isinstance(above, cst.Attribute):
            above = self.parent_of(above)
        return isinstance(above, (cst.ImportFrom, cst.ImportAlias))

    def star_doubt(self, node: cst.CSTNode, name: str | None = None) -> str | None:
        """Why a star import of the file may bind the first name of ``node`` (or ``name``, read
        where ``node`` is) to something not shown to be what an import names (for a review
        message); None where none does."""
        return star_names.star_doubt(self.star_imports, node, self._star_where, name)

    def _star_where(self, name: str, node: cst.CSTNode) -> str:
        """Where ``name`` read at ``node`` resolves in the file, which a star import's binding
        competes with (:data:`star_names.Where <torchfix_device.facts.star_names.Where>`)."""
        if self.names_an_import(node):
            return star_names.LOCAL  # the import's own name: no star import binds it
        return self._star_where_read(name, node)

    def _star_where_read(self, name: str, node: cst.CSTNode) -> str:
        """:meth:`_star_where` for a read (libcst's bindings of ``name`` visible at ``node``)."""
        return star_names.where_bound(self.bindings_visible_at(name, node))

    def _plain_qualified_names(
        self, node: cst.CSTNode, *, ending_in: frozenset[str] | None = None, in_module_scope: bool = False
    ) -> set[str]:
        """libcst's qualified names of ``node``, star imports aside."""
        try:
            return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}
        except KeyError:
            return set()

    def exact_bindings(self, name: str, node: cst.CSTNode) -> set[Any]:
        """libcst's own answer of :meth:`bindings_visible_at` for any node of the module (the
        engine's subclass answers faster for the statement being visited only)."""
        return Codemod.bindings_visible_at(self, name, node)

    def exact_qualified_names(self, node: cst.CSTNode) -> set[str]:
        """libcst's own qualified names of any node of the module, star imports aside."""
        return Codemod._plain_qualified_names(self, node)

    def bindings_visible_at(self, name: str, node: cst.CSTNode) -> set[Any]:
        """libcst's bindings of ``name`` visible at ``node`` (``scope[name]``)."""
        scope = self.scope_of(node)
        return set(scope[name]) if scope is not None else set()

    def scope_of(self, node: cst.CSTNode) -> Any:  # libcst's scope of ``node``, or None
        try:
            return self.get_metadata(ScopeProvider, node, None)
        except KeyError:
            return None

    def local_scope_of(self, target: cst.Name) -> Any:  # ``target``: bound in the function visited
        return self.scope_of(target)

    def scopes_of_function_alone(self, function: cst.FunctionDef) -> Any:
        """libcst's scopes for the nodes of ``function``, from a scope analysis of that function
        alone (a module holding only it); None when it declares names ``global`` or
        ``nonlocal``. Exact for the names the function and what is inside it bind."""
        return scopes.scopes_of_function_alone(function)

    def function_locals(self, function: cst.FunctionDef) -> "scopes.FunctionLocals | None":
        """:func:`~torchfix_device.syntax.scopes.function_locals` of ``function``."""
        return scopes.function_locals(function)

    def parent_of(self, node: cst.CSTNode) -> cst.CSTNode | None:  # None for the module
        return self.get_metadata(ParentNodeProvider, node, None)

    def import_reads(self, imp: cst.ImportFrom) -> list[cst.CSTNode] | None:
        """The nodes reading the names ``imp`` binds; None when one of them is bound elsewhere
        too (or ``imp`` is a star import)."""
        scope = self.scope_of(imp)
        if scope is None or isinstance(imp.names, cst.ImportStar):
            return None
        uses: list[cst.CSTNode] = []
        for alias in imp.names:
            bound = _nodes.dotted_name(alias.asname.name if alias.asname else alias.name)
            for assignment in scope.assignments[bound or ""]:
                if getattr(assignment, "node", None) is not imp:
                    return None  # the name is rebound elsewhere
                uses.extend(access.node for access in assignment.references)
        return uses

    def spelt_nowhere(self, name: str) -> bool:
        """True when no scope of the file binds or reads ``name`` as a name; False when that is
        so or cannot be told cheaply."""
        return False

    def free_at_module_level(self, name: str) -> bool:
        """``name`` can be bound at module level without changing what any code refers to:
        nothing binds it there, and no read of it resolves to a binding we cannot see (an
        undefined name, a star import). Functions binding it locally just shadow it."""
        return scopes.free_at_module_level(self.visited_module, name, self.scope_of)

    # -- documentation ----------------------------------------------------------------------
    @classmethod
    def fix_tier(cls) -> str:  # ``safe fix``, ``unsafe fix`` or ``report only``
        return rule_docs.fix_tier(cls, Codemod)

    @classmethod
    def documentation(cls) -> dict[str, str]:  # the docstring's sections, by heading
        return rule_docs.parse_doc_sections(cls.__doc__ or "")
