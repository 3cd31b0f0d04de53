"""What stage 1 can tell from CPython's ``ast`` about names, classes and the code around a node.

The codemods decide with libcst's ``QualifiedNameProvider`` and their own class and function
stacks. Stage 1 must never say "no" where they would say "yes", so everything here
over-approximates them:

- :meth:`AstScan.qualified` gives every ``torch...`` name libcst could give an expression: names
  bound by imports anywhere in the file (libcst only uses those visible at the site), plus the
  spelling itself when its first name is bound some other way (libcst gives a module-level
  ``torch = f()`` the qualified name ``torch``). A file defining a class called ``torch`` (whose
  members libcst names ``torch.*``) makes every answer "anything" (:attr:`AstScan.opaque`).
- :meth:`AstScan.module_classes` are the classes whose bases *may* be ``torch.nn`` classes, or
  such classes of the same file (the fixed point ``DeviceSource.module_classes`` computes).
- :func:`walk_in_context` gives each node with the innermost class and function around it as
  the codemods' stacks hold them (a function's decorators, defaults and annotations count as
  inside it, a lambda is not a function).
"""

from __future__ import annotations

import ast
from collections import defaultdict

from torchfix_device.torch_api import is_torch_module_class

ContextNode = tuple[ast.AST, "ast.ClassDef | None", "ast.FunctionDef | ast.AsyncFunctionDef | None"]
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def full_name(node: ast.AST, *, through_calls: bool = True) -> str | None:
    """``a.b.c`` as libcst's ``get_full_name_for_node`` spells the expression (a call or a
    subscript stands for what it calls or indexes: ``nn.Linear(2, 2).to`` → ``nn.Linear.to``).
    With ``through_calls=False``, only a plain Name/Attribute chain has a name (libcst-side
    ``nodes.dotted_name``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = full_name(node.value, through_calls=through_calls)
        return None if base is None else f"{base}.{node.attr}"
    if not through_calls:
        return None
    if isinstance(node, ast.Call):
        return full_name(node.func)
    if isinstance(node, ast.Subscript):
        return full_name(node.value)
    return None


def first_line(statement: ast.stmt) -> int:
    """The first line of a statement: its first decorator's, for a decorated definition."""
    return min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])


_SKIPPED_FIELDS = frozenset({"ctx", "type_comment"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def walk_in_context(tree: ast.AST) -> list[ContextNode]:
    """Every node below ``tree``, in preorder (a parent before its children, children in source
    order), with its innermost enclosing class and function (the node itself counts for its own
    children, not for itself). ``ctx`` markers (``Load``/``Store``) are left out.

    One loop over plain lists: ``ast.walk`` and ``ast.iter_child_nodes`` cost several times more
    (generators over every field), and stage 1 walks every file the prefilter keeps."""
    found: list[ContextNode] = []
    stack: list[ContextNode] = [(tree, None, None)]
    node_type = ast.AST
    while stack:
        node, cls, func = stack.pop()
        found.append((node, cls, func))
        kind = type(node)
        if kind is ast.ClassDef:
            cls = node
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            func = node
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in _SKIPPED_FIELDS)
        children: list[ast.AST] = []
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                children.extend(item for item in value if isinstance(item, node_type))
            elif isinstance(value, node_type):
                children.append(value)
        for child in reversed(children):
            stack.append((child, cls, func))
    return found[1:]


def parent_index(tree: ast.AST, nodes: list[ContextNode]) -> dict[int, ast.AST]:
    """``id`` of every node below ``tree`` (``nodes``: :func:`walk_in_context`'s) → its parent."""
    found: dict[int, ast.AST] = {}
    node_type = ast.AST
    for node in (tree, *(n for n, _, _ in nodes)):
        for name in _CHILD_FIELDS.get(type(node)) or ():
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        found[id(item)] = node
            elif isinstance(value, node_type):
                found[id(value)] = node
    return found


_BINDING_TYPES = frozenset({
    ast.Import, ast.ImportFrom, ast.Name, *FUNCTIONS, ast.ClassDef, ast.ExceptHandler, ast.Global, ast.Nonlocal,
    ast.MatchAs, ast.MatchStar, ast.MatchMapping,
})
"""The node types :meth:`AstScan._collect` looks at (``ast`` node classes are never subclassed)."""


class AstScan:
    """Bindings and classes of one file, for :meth:`qualified` and :meth:`module_classes`."""

    def __init__(self, tree: ast.Module, nodes: list[ContextNode] | None = None) -> None:
        self.tree = tree
        self._nodes = nodes if nodes is not None else walk_in_context(tree)
        self.opaque = False
        """A class named ``torch`` is defined, or a star import may bind any name
        (:mod:`torchfix_device.facts.star_imports`): no qualified name can be ruled out."""
        self._imported: dict[str, set[str]] = defaultdict(set)
        self._bound_otherwise: set[str] = set()
        self._classes: list[ast.ClassDef] = []
        self._module_classes: set[int] | None = None
        self._collect()

    def _collect(self) -> None:
        for node, _, _ in self._nodes:
            if type(node) not in _BINDING_TYPES:
                continue  # most nodes: one set lookup instead of the chain below
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self._imported[alias.asname].add(alias.name)
                    else:  # `import torch.nn` binds `torch`; `torch.x` is then named as spelt
                        root = alias.name.partition(".")[0]
                        self._imported[root].add(root)
            elif isinstance(node, ast.ImportFrom):
                self.opaque |= node.names[0].name == "*"  # it may bind any name to anything
                if node.level or not node.module:
                    continue  # relative: `.x` names, never `torch.*`
                for alias in node.names:
                    if alias.name != "*":
                        self._imported[alias.asname or alias.name].add(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self._bound_otherwise.add(node.id)
            elif isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                self._bound_otherwise.add(node.name)
                if isinstance(node, ast.ClassDef):
                    self._classes.append(node)
                    self.opaque |= node.name == "torch"
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._bound_otherwise.add(node.name)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self._bound_otherwise.update(node.names)
            elif isinstance(node, ast.MatchAs) and node.name:
                self._bound_otherwise.add(node.name)
            elif isinstance(node, ast.MatchStar) and node.name:
                self._bound_otherwise.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self._bound_otherwise.add(node.rest)

    # -- names ------------------------------------------------------------------------------------
    def qualified(self, node: ast.AST) -> set[str]:
        """Every name libcst may qualify ``node`` with that could start with ``torch`` (and some
        more). Empty for expressions libcst gives no name (a literal, ``(a or b).x``)."""
        spelt = full_name(node)
        if spelt is None:
            return set()
        root, dot, rest = spelt.partition(".")
        names = {f"{target}{dot}{rest}" for target in self._imported.get(root, ())}
        if root in self._bound_otherwise:
            names.add(spelt)
        return names

    def may_name(self, node: ast.AST, wanted: set[str] | frozenset[str]) -> bool:
        """``node`` may be qualified as one of ``wanted``."""
        return self.opaque or not self.qualified(node).isdisjoint(wanted)

    # -- classes ----------------------------------------------------------------------------------
    def module_classes(self) -> set[int]:
        """``id``s of the classes that may subclass ``torch.nn.Module``."""
        if self._module_classes is None:
            found: set[int] = set()
            names: set[str] = set()
            changed = True
            while changed:
                changed = False
                for cls in self._classes:
                    if id(cls) not in found and any(self._may_be_module_base(b, names) for b in cls.bases):
                        found.add(id(cls))
                        names.add(cls.name)
                        changed = True
            self._module_classes = found
        return self._module_classes

    def is_module_class(self, cls: ast.ClassDef | None) -> bool:
        return cls is not None and id(cls) in self.module_classes()

    def _may_be_module_base(self, base: ast.expr, module_class_names: set[str]) -> bool:
        if isinstance(base, ast.Starred):  # libcst looks at the value of `*bases`
            base = base.value
        if self.opaque or any(is_torch_module_class(q) for q in self.qualified(base)):
            return True
        return full_name(base, through_calls=False) in module_class_names


def source_lines(text: str) -> list[str]:
    """``text`` cut into lines where CPython's parser counts them (``\\n``, ``\\r\\n``, ``\\r``)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def function_text(func: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> str:
    """The source of ``func`` with its decorators and the comment and blank lines around it:
    at least what libcst's ``code_for_node`` gives for the function (its leading lines and the
    comments closing its block included)."""
    first = min([func.lineno, *(d.lineno for d in func.decorator_list)]) - 1
    last = (func.end_lineno or func.lineno) - 1
    while first > 0 and _blank_or_comment(lines[first - 1]):
        first -= 1
    while last + 1 < len(lines) and _blank_or_comment(lines[last + 1]):
        last += 1
    return "\n".join(lines[first:last + 1])


def _blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")
