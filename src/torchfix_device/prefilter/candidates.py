"""Stage 1 of the engine: the facts of a file that say which codemods can possibly match it,
from the stdlib ``ast``.

CPython's parser is an order of magnitude faster than libcst's parse, and much faster again than
libcst's metadata and tree walks. So before a file is handed to libcst, one ``ast`` walk collects
a few facts about it (:class:`FileFacts`), and each codemod is asked about them: its
``may_match`` (a *necessary condition*) and, for a codemod whose findings and rewrites happen only
at certain nodes, its ``sites`` (where those nodes are). A codemod whose condition fails cannot
report or rewrite anything in the file; when no codemod is left, libcst never sees the file.

This module holds only what every codemod shares: the facts, the small ``ast`` helpers the
codemods' conditions are written with, and where the sites of a codemod are by statement. It
names no codemod; each codemod's condition is in its own module, next to the libcst code it
mirrors.

Each condition must be necessary, never sufficient: it may say "maybe" for a file the codemod
then leaves alone, but it must never say "no" for a file where the codemod would report or
change something. The conditions rest on two facts of libcst's ``QualifiedNameProvider``:

- a qualified name starting with ``torch.`` needs an absolute ``import torch...`` or
  ``from torch... import`` somewhere in the file, a name ``torch`` bound some other way (an
  unbound ``torch`` or a relative import gives no such name), or a star import (what it binds
  is resolved over the run: :mod:`torchfix_device.facts.star_imports`);
- the last part of a qualified name is spelt in the file as an attribute (``nn.Linear``), as
  an imported name (``from torch.nn import Linear as L``) or, in a file with a star import, as
  any name.

Where these facts leave a codemod possible, its condition looks for a real site with
:mod:`torchfix_device.prefilter.scan` (qualified names and ``nn.Module`` classes over-approximated),
mirroring the codemod's own test. ``tests/test_candidates.py`` checks that results with and
without this stage are the same on every fixture, and that every codemod states a condition.
"""

from __future__ import annotations

import ast
import bisect
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Iterator, NamedTuple, Protocol, Sequence, TypeVar

from torchfix_device.prefilter import nested_sites
from torchfix_device.prefilter import scan as ast_scan
from torchfix_device.prefilter.nested_sites import Outline
from torchfix_device.prefilter.scan import AstScan, first_line, walk_in_context


class Stage1Codemod(Protocol):
    """What stage 1 asks a codemod (:class:`torchfix_device.codemods.base.Codemod` answers it)."""

    code: str
    skips_within_statements: bool

    @classmethod
    def may_match(cls, facts: "FileFacts") -> bool: ...

    @classmethod
    def sites(cls, facts: "FileFacts") -> Iterable[ast.AST] | None: ...


C = TypeVar("C", bound=Stage1Codemod)


@dataclass
class FileFacts:
    """What one ``ast`` walk tells about a file."""

    text: str
    tree: ast.Module | None = None
    """The whole ``ast`` (for the site checks, which :class:`AstScan` makes precise)."""
    torch_imported: bool = False
    """An absolute import of ``torch`` or one of its submodules, anywhere in the file, or
    ``torch`` bound some other way (libcst names ``torch.zeros`` after ``torch = f()`` as spelt)."""
    names: set[str] = field(default_factory=set)
    """Attribute names and imported names (every dotted part): the possible last parts of a
    qualified name."""
    call_attrs: set[str] = field(default_factory=set)
    """``x.NAME(...)``: the method names called."""
    statement_call_attrs: set[str] = field(default_factory=set)
    """``x.NAME(...)`` as a whole statement (its result dropped)."""
    subscripted_attrs: set[str] = field(default_factory=set)
    """``x.NAME[...]``."""
    keywords: set[str] = field(default_factory=set)
    """Keyword argument names of calls."""
    function_names: set[str] = field(default_factory=set)
    star_import: bool = False
    """``from X import *``: any name may be bound to a torch object, by another file."""
    has_class_with_bases: bool = False
    augassign_to_name_in_forward: bool = False
    """``name op= ...`` directly in a function called ``forward`` (not in a function nested
    in it)."""

    contexts: list[ast_scan.ContextNode] = field(default_factory=list)
    """Every node with its innermost class and function (walked once, for all checks)."""

    @cached_property
    def scan(self) -> AstScan:
        assert self.tree is not None
        return AstScan(self.tree, self.contexts)

    @cached_property
    def parents(self) -> dict[int, ast.AST]:
        """``id`` of each node → its parent (asked by the conditions that follow a value up)."""
        assert self.tree is not None
        return ast_scan.parent_index(self.tree, self.contexts)

    @cached_property
    def name_reads(self) -> dict[str, list[ast.Name]]:
        """Each name → every place it is read, in any scope."""
        found: dict[str, list[ast.Name]] = {}
        for node, _, _ in self.contexts:
            if type(node) is ast.Name and type(node.ctx) is ast.Load:
                found.setdefault(node.id, []).append(node)
        return found

    @cached_property
    def attributes(self) -> dict[str, list[ast.Attribute]]:
        """Each attribute name → every ``x.<name>`` of the file."""
        found: dict[str, list[ast.Attribute]] = {}
        for node, _, _ in self.contexts:
            if type(node) is ast.Attribute:
                found.setdefault(node.attr, []).append(node)
        return found

    @cached_property
    def lines(self) -> list[str]:
        return ast_scan.source_lines(self.text)

    @cached_property
    def statement_starts(self) -> list[int]:
        """The first line of every top-level statement (its first decorator's for a decorated one)."""
        return [first_line(s) for s in self.tree.body] if self.tree is not None else []

    @cached_property
    def class_outlines(self) -> dict[int, ClassOutline]:
        """Index of each top-level class → its :class:`ClassOutline`."""
        if self.tree is None:
            return {}
        return {i: _outline(s, 1) for i, s in enumerate(self.tree.body) if isinstance(s, ast.ClassDef)}


def collect_facts(tree: ast.Module, text: str) -> FileFacts:
    facts = FileFacts(text, tree, contexts=walk_in_context(tree))
    for node, _, func in facts.contexts:
        kind = type(node)
        if kind is ast.Attribute:
            facts.names.add(node.attr)
        elif kind is ast.Name:
            facts.torch_imported |= node.id == "torch" and not isinstance(node.ctx, ast.Load)
        elif kind is ast.Call:
            if type(node.func) is ast.Attribute:
                facts.call_attrs.add(node.func.attr)
            facts.keywords.update(k.arg for k in node.keywords if k.arg)
        elif kind is ast.Expr:
            if type(node.value) is ast.Call and type(node.value.func) is ast.Attribute:
                facts.statement_call_attrs.add(node.value.func.attr)
        elif kind is ast.Subscript:
            if type(node.value) is ast.Attribute:
                facts.subscripted_attrs.add(node.value.attr)
        elif kind is ast.AugAssign:
            if type(node.target) is ast.Name and func is not None and func.name == "forward":
                facts.augassign_to_name_in_forward = True
        elif kind is ast.Import:
            for alias in node.names:
                facts.names.update(alias.name.split("."))
                facts.torch_imported |= alias.name.split(".")[0] == "torch"
        elif kind is ast.ImportFrom:
            for alias in node.names:
                facts.names.update(alias.name.split("."))
            facts.star_import |= node.names[0].name == "*"
            if node.module:
                facts.names.update(node.module.split("."))
                facts.torch_imported |= node.level == 0 and node.module.split(".")[0] == "torch"
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            facts.function_names.add(node.name)
            facts.torch_imported |= node.name == "torch"
        elif kind is ast.ClassDef:
            facts.has_class_with_bases |= bool(node.bases)
            facts.torch_imported |= node.name == "torch"
        elif kind in BINDING_STATEMENTS:
            facts.torch_imported |= "torch" in _bound_names(node)
    if facts.star_import:
        # What a star import binds is resolved over the run (torchfix_device.facts.star_imports):
        # any name read may then be a torch object, spelt as a plain name.
        facts.torch_imported = True
        facts.names.update(node.id for node, _, _ in facts.contexts if type(node) is ast.Name)
    return facts


BINDING_STATEMENTS = frozenset({ast.Global, ast.Nonlocal, ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping})


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return node.names
    name = node.rest if isinstance(node, ast.MatchMapping) else node.name
    return [name] if name else []


def module_class_possible(f: FileFacts) -> bool:
    """An ``nn.Module`` subclass needs a base whose qualified name is ``torch.nn.*``: a torch
    import, and ``nn`` spelt as an imported name or an attribute."""
    return f.torch_imported and f.has_class_with_bases and "nn" in f.names


def has_star_args(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def has_keyword(call: ast.Call, name: str) -> bool:
    return any(k.arg == name for k in call.keywords)


def is_self_attribute(node: ast.AST) -> bool:
    """``self.x``."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def values_bound_to(name: str, func: ast.AST) -> list[ast.expr]:
    """The values ``name = value`` (or ``name: T = value``) binds anywhere in ``func``."""
    values: list[ast.expr] = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values.append(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name) and node.target.id == name:
                values.append(node.value)
    return values


def in_module_forward(scan: AstScan, cls: ast.ClassDef | None, func: ast.AST | None) -> bool:
    """Directly in a method ``forward`` of a class that may be an ``nn.Module``."""
    return (
        func is not None and func.name == "forward" and scan.is_module_class(cls)  # type: ignore[attr-defined]
        and any(stmt is func for stmt in cls.body)  # type: ignore[union-attr]
    )


def calls_to(f: FileFacts, names: set[str] | frozenset[str], accept: Callable[[ast.Call], bool] = lambda call: True) -> Iterator[ast.Call]:
    """The calls ``accept`` takes that may call one of the qualified ``names``."""
    scan = f.scan
    for node, _, _ in f.contexts:
        if isinstance(node, ast.Call) and accept(node) and scan.may_name(node.func, names):
            yield node


class StatementSites(NamedTuple):
    """Where the sites of one codemod are, by statement (as CPython's ``ast`` counts them)."""

    wanted: set[int]
    """Indices of the top-level statements holding a site."""
    starts: list[int]
    """The first line of every top-level statement (its first decorator's for a decorated one)."""
    members: dict[int, tuple[set[int], int]]
    """For a top-level class holding sites only in its members (none in its decorators, bases
    or header): its index → the indices of the members (statements of its body) holding one,
    and the number of members."""
    inner: dict[tuple[int, int], tuple[set[int], int]] = {}
    """The same one level down, for a class that is such a member: (index of the top-level
    class, index of the member) → its members holding a site, and their number."""
    nested: "dict[int, Outline]" = {}
    """For a codemod that visits only its sites' statements (``skips_within_statements``): the
    index of each compound top-level statement holding a site → where in it the sites are
    (:mod:`~torchfix_device.prefilter.nested_sites`)."""


def statements_with_sites(facts: FileFacts, codemod: Stage1Codemod) -> StatementSites | None:
    """The statements holding a site of ``codemod`` (its ``sites``). A codemod without a site
    function gets every top-level index: it visits everything, and the lines still let it
    compute positions one statement at a time."""
    if facts.tree is None:
        return None
    starts = facts.statement_starts
    sites = codemod.sites(facts)
    if sites is None:
        return StatementSites(set(range(len(starts))), starts, {}, {})
    sites = list(sites)
    lines_by_statement: dict[int, list[int]] = {}
    for node in sites:
        index = bisect.bisect_right(starts, node.lineno) - 1
        if index >= 0:
            lines_by_statement.setdefault(index, []).append(node.lineno)
    members: dict[int, tuple[set[int], int]] = {}
    inner: dict[tuple[int, int], tuple[set[int], int]] = {}
    for index, lines in lines_by_statement.items():
        outline = facts.class_outlines.get(index)
        by_member = _site_lines_by_member(outline, lines)
        if by_member is None:
            continue
        assert outline is not None
        members[index] = set(by_member), len(outline.member_lines)
        for member, member_lines in by_member.items():
            nested_outline = outline.classes.get(member)
            nested = _site_lines_by_member(nested_outline, member_lines)
            if nested is not None:
                inner[index, member] = set(nested), len(nested_outline.member_lines)  # type: ignore[union-attr]
    outlines: dict[int, Outline] = {}
    if codemod.skips_within_statements:
        extents = [(n.lineno, getattr(n, "end_lineno", None) or n.lineno) for n in sites]
        for index in lines_by_statement:
            found = nested_sites.outline(facts.tree.body[index], extents)
            if isinstance(found, tuple):
                outlines[index] = found
    return StatementSites(set(lines_by_statement), starts, members, inner, outlines)


class ClassOutline(NamedTuple):
    """What a codemod needs of a class of stage 1's tree to tell its members apart: the first
    line of each statement of its body and, for a member that is a class itself, its outline
    (one level down only: member skipping goes no deeper)."""

    member_lines: list[int]
    classes: dict[int, "ClassOutline"]


def _outline(cls: ast.ClassDef, depth: int) -> ClassOutline:
    classes = (
        {i: _outline(s, depth - 1) for i, s in enumerate(cls.body) if isinstance(s, ast.ClassDef)} if depth else {}
    )
    return ClassOutline([first_line(s) for s in cls.body], classes)


def _site_lines_by_member(outline: ClassOutline | None, lines: list[int]) -> dict[int, list[int]] | None:
    """For a class with ``outline`` whose sites are on ``lines``: the index of each statement
    of its body holding one → the lines of its sites; None for no class (no outline), or when
    a site is in the class's own lines (a decorator, a base)."""
    if outline is None:
        return None
    by_member: dict[int, list[int]] = {}
    for line in lines:
        member = bisect.bisect_right(outline.member_lines, line) - 1
        if member < 0:
            return None
        by_member.setdefault(member, []).append(line)
    return by_member


def parse_facts(text: str) -> FileFacts | None:
    """The facts of ``text``, or None when CPython cannot parse it (the caller then runs the
    full engine, which reports the error as before)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text, "<stage1>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return collect_facts(tree, text)
    except RecursionError:
        return None


def candidate_codemods(facts: FileFacts, codemods: Sequence[C]) -> list[C]:
    """The codemods of ``codemods`` that may match the file ``facts`` describes, in order."""
    return [c for c in codemods if c.may_match(facts)]
