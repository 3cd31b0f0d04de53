"""What an attribute of an instance of a project class holds, across the files of a run.

``corpus = Corpus()`` in ``main.py``, ``class Corpus`` in ``data_utils.py`` whose ``__init__``
does ``self.dictionary = Dictionary()``, and ``Dictionary``'s ``self.idx2word = {}``: then
``corpus.dictionary.idx2word`` is a plain dict, and a fresh tensor is no key of it. The question
"what kind of container is this attribute" is asked by :func:`torchfix_device.facts.uses.container_kind`
(:func:`attribute_kind`); the answers come from a summary of each class read with CPython's
``ast`` (:func:`class_attributes`), for the file's own classes from its own code and, for the
classes it imports from other files of the run, from the runner (:func:`run_attributes`, given
to each file as a :class:`FileAttributes`).

An attribute has a kind where every assignment ``self.<attr> = v`` in the methods of the class
and of its bases of the same file gives one of the same kind: :data:`PLAIN_DICT` (``{}``, a dict
literal or comprehension, ``dict()``, ``OrderedDict()``), :data:`MAPPING` (``defaultdict(...)``,
``Counter()``: a dict that may add a missing key), :data:`SEQUENCE` (a list or tuple literal,
``list()``, ``tuple()``) or an instance of another class of the same file (``class:<name>``).
Nothing else may give it a value:

- a class whose bases are not all ``object``, ``nn.Module`` or classes of the same file (a base
  from elsewhere may set it) has no table; nor has one whose methods call ``setattr``, or name
  ``__dict__``, ``__setattr__`` or ``vars``, or that defines ``__setattr__`` or
  ``__getattribute__``; a method or property of the attribute's name leaves it without a kind;
- an augmented assignment, a ``for``/``with``/tuple target, a ``del`` or a class-level binding of
  the name leaves it without a kind;
- a store ``x.<attr> = v`` through any receiver other than a method's ``self`` (``x`` may be an
  instance), anywhere in the files that can meet such an instance, leaves it without a kind: the
  file itself and the files of the run connected to it by imports, in either direction (a
  helper that never imports the class can still be handed an instance). A ``setattr`` with a
  name that is not a literal in such a file leaves every attribute without a kind.

Only an instance made by calling the class (every value of the receiver is ``C(...)``) is asked
about: a method's ``self`` may be a subclass's instance, which may set the attribute its own way.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from torchfix_device.facts.project_classes import Imports, Resolve, kept_per_run, parsed
from torchfix_device.facts.project_functions import Callers, function_callers, imported_functions

if TYPE_CHECKING:
    import libcst as cst

    from torchfix_device.facts.values import ModuleValues

PLAIN_DICT = "dict"
MAPPING = "mapping"
SEQUENCE = "sequence"
CLASS = "class:"
EVERY_ATTRIBUTE = "*"
"""In a set of attribute names stored from outside: any name (a ``setattr`` with a computed name)."""

_MODULE_BASES = frozenset({"object", "Module", "nn.Module", "torch.nn.Module"})
_DYNAMIC = ("setattr", "__dict__", "__setattr__", "vars")
MAX_DEPTH = 6


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner is not None else None
    return None


def _collections_names(tree: ast.Module) -> dict[str, str]:
    """Local spelling → ``collections`` name, from the module's top-level imports."""
    found: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "collections" and not statement.level:
            for alias in statement.names:
                found[alias.asname or alias.name] = alias.name
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name == "collections":
                    local = alias.asname or "collections"
                    for name in ("OrderedDict", "defaultdict", "Counter"):
                        found[f"{local}.{name}"] = name
    return found


def _value_kind(value: ast.expr, collections: Mapping[str, str], classes: frozenset[str], rebound: frozenset[str]) -> str | None:
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return PLAIN_DICT
    if isinstance(value, (ast.List, ast.Tuple, ast.ListComp)):
        return SEQUENCE
    if isinstance(value, ast.Call):
        spelt = _dotted(value.func)
        if spelt is None:
            return None
        if spelt in ("dict", "list", "tuple") and spelt not in rebound:
            return PLAIN_DICT if spelt == "dict" else SEQUENCE
        made = collections.get(spelt)
        if made == "OrderedDict":
            return PLAIN_DICT
        if made in ("defaultdict", "Counter"):
            return MAPPING
        if spelt in classes:
            return CLASS + spelt
    return None


@kept_per_run
def class_attributes(source: str | bytes) -> dict[str, dict[str, str]]:
    """Each top-level class of ``source`` → its attributes that have a kind (see the module
    docstring; the stores from outside the class are not looked at here: :func:`stored_from_outside`)."""
    tree = parsed(source)
    if tree is None:
        return {}
    classes = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}
    names = frozenset(classes)
    rebound = frozenset(
        t.id for s in tree.body if isinstance(s, (ast.Assign, ast.FunctionDef, ast.ClassDef))
        for t in (s.targets if isinstance(s, ast.Assign) else [ast.Name(id=s.name)]) if isinstance(t, ast.Name)
    )
    collections = _collections_names(tree)
    own: dict[str, dict[str, set[str | None]] | None] = {n: _own_kinds(c, collections, names, rebound) for n, c in classes.items()}
    found: dict[str, dict[str, str]] = {}
    for name in classes:
        merged = _with_bases(name, classes, own, set())
        if merged is None:
            continue
        table = {attr: next(iter(kinds)) for attr, kinds in merged.items() if len(kinds) == 1 and None not in kinds}
        if table:
            found[name] = table
    return found


def _own_kinds(cls: ast.ClassDef, collections, names, rebound) -> dict[str, set[str | None]] | None:  # noqa: ANN001
    kinds: dict[str, set[str | None]] = {}
    for statement in cls.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in statement.targets if isinstance(statement, ast.Assign) else [statement.target]:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        kinds.setdefault(node.id, set()).add(None)
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if statement.name in ("__setattr__", "__getattribute__"):
            return None  # every store or read may go elsewhere
        kinds.setdefault(statement.name, set()).add(None)  # a method or property of that name
        arguments = statement.args.posonlyargs + statement.args.args
        static = any(_dotted(d) in ("staticmethod", "classmethod") for d in statement.decorator_list)
        this = arguments[0].arg if arguments and not static else None
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id in _DYNAMIC or isinstance(node, ast.Attribute) and node.attr in _DYNAMIC:
                return None
            if this is None:
                continue
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if _self_attribute(target, this):
                        kinds.setdefault(target.attr, set()).add(_value_kind(node.value, collections, names, rebound))
                    else:
                        _unknown_parts(target, this, kinds)
            elif isinstance(node, ast.AnnAssign) and _self_attribute(node.target, this):
                kinds.setdefault(node.target.attr, set()).add(
                    _value_kind(node.value, collections, names, rebound) if node.value is not None else None
                )
            elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension)):
                _unknown_parts(node.target, this, kinds, whole=True)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        _unknown_parts(item.optional_vars, this, kinds, whole=True)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    _unknown_parts(target, this, kinds, whole=True)
    return kinds


def _self_attribute(node: ast.expr, this: str) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == this


def _unknown_parts(target: ast.expr, this: str, kinds: dict[str, set[str | None]], whole: bool = False) -> None:
    """The ``self.<attr>`` inside a target that is not a plain ``self.<attr> = v`` get no kind."""
    if not whole and not isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
        return
    for node in ast.walk(target):
        if _self_attribute(node, this):
            kinds.setdefault(node.attr, set()).add(None)  # type: ignore[attr-defined]


def _with_bases(name: str, classes: dict[str, ast.ClassDef], own, seen: set[str]) -> dict[str, set[str | None]] | None:  # noqa: ANN001
    if name in seen or own.get(name) is None:
        return None
    seen.add(name)
    merged = {attr: set(kinds) for attr, kinds in own[name].items()}
    for base in classes[name].bases:
        spelt = _dotted(base)
        if spelt in _MODULE_BASES:
            continue
        if spelt not in classes:
            return None  # a base from elsewhere may set any attribute
        inherited = _with_bases(spelt, classes, own, seen)
        if inherited is None:
            return None
        for attr, kinds in inherited.items():
            merged.setdefault(attr, set()).update(kinds)
    if classes[name].keywords:  # a metaclass
        return None
    return merged


@kept_per_run
def stored_from_outside(source: str | bytes) -> frozenset[str]:
    """The attribute names ``source`` stores through a receiver that is not a method's first
    parameter (``x.attr = v``, ``x.attr += v``, ``del x.attr``, ``setattr(x, "attr", v)``);
    :data:`EVERY_ATTRIBUTE` among them for a ``setattr`` with a computed name (or code that
    does not parse)."""
    tree = parsed(source)
    if tree is None:
        return frozenset({EVERY_ATTRIBUTE})
    found: set[str] = set()
    # One walk; with each node, the first parameters of the methods around it (a name spelt so
    # anywhere inside a method, nested functions included, is that method's receiver)
    stack: list[tuple[ast.AST, frozenset[str]]] = [(tree, frozenset())]
    while stack:
        node, selves = stack.pop()
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if not (isinstance(node.value, ast.Name) and node.value.id in selves):
                found.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) >= 2:
            receiver, name = node.args[0], node.args[1]
            if not (isinstance(receiver, ast.Name) and receiver.id in selves):  # a class's own setattr: no table
                found.add(name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else EVERY_ATTRIBUTE)
        methods = _receivers(node) if isinstance(node, ast.ClassDef) else {}
        for child in ast.iter_child_nodes(node):
            stack.append((child, selves | {methods[id(child)]} if id(child) in methods else selves))
    return frozenset(found)


def _receivers(cls: ast.ClassDef) -> dict[int, str]:
    """The methods of ``cls`` (by ``id``) that take a receiver, with its name: the first parameter
    of a function of the class's own body, not a static or class method."""
    found = {}
    for method in cls.body:
        arguments = method.args.posonlyargs + method.args.args if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if arguments and not any(_dotted(d) in ("staticmethod", "classmethod") for d in method.decorator_list):
            found[id(method)] = arguments[0].arg
    return found


# -- the run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileAttributes:
    """What one file learns from the other files of its run: the tables of the classes it imports
    (by the qualified name libcst gives a use of the class: ``data_utils.Corpus``,
    ``.models.Net``) and the attribute names stored from outside anywhere it may meet them."""

    classes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    outside: frozenset[str] = frozenset()
    digest: str = ""
    functions: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """The functions it imports from other files of the run (:mod:`.project_functions`)."""
    on_cpu: bool = False
    """Every file of its import group keeps its values on the CPU (:mod:`.project_placements`)."""
    subclassed: frozenset[str] = frozenset()
    """Its classes that a class of the run subclasses (:func:`.project_classes.subclassed_classes`)."""
    callers: Callers | None = None
    """The other files of the run that may call its functions (:func:`.project_functions.function_callers`)."""


class RunAttributes:
    """The :class:`FileAttributes` of the files of a run (by the path as the run names it)."""

    def __init__(self, files: dict[str, FileAttributes]) -> None:
        self._files = files

    def of(self, path: str | Path | None) -> FileAttributes | None:
        return self._files.get(str(path)) if path is not None else None

    def __bool__(self) -> bool:
        return bool(self._files)




def resolved_imports(imports: Mapping[Path, "list[tuple[str, int]] | None"], resolve: Resolve) -> Imports:
    """``imports`` (each file's ``(module spelt, level)``, None where it imports dynamically:
    :func:`~torchfix_device.facts.project_classes.imported_modules`) resolved to the files they may
    be, once per run, for :func:`run_attributes` and the runner's files that no file imports."""
    found: Imports = {}
    for path, modules in imports.items():
        found[path] = None if modules is None else [
            (spelt, level, target) for spelt, level in modules for target in resolve(spelt, level, path) if target != path
        ]
    return found


def run_attributes(
    programs: Mapping[Path, bytes], shown: Mapping[Path, str], resolved: Imports,
    importable: Callable[[Path], Callable[[Path], bool]], on_cpu: "set[Path] | frozenset[Path]" = frozenset(),
    subclassed: Mapping[Path, frozenset[str]] | None = None,
) -> RunAttributes:
    """For each file of ``programs`` (absolute path → code; ``shown``: the name the run gives it;
    ``resolved``: its imports) that imports a class of another file with a table: those tables and
    the attribute names stored from outside in the files connected to it by imports; and the
    functions it imports from other files of the run (:mod:`.project_functions`); ``on_cpu``: the
    files whose import group stays on the CPU (:func:`.project_placements.groups_on_cpu`)."""
    functions = imported_functions(programs, resolved)
    files = _class_and_function_tables(programs, shown, resolved, importable, functions)
    dynamic = [(path, importable(path)) for path, found in resolved.items() if found is None]
    doubtful = {target for target in programs if any(can(target) for path, can in dynamic if path != target)}
    for path, callers in function_callers(programs, functions, shown, doubtful, resolved).items():
        found = files.get(shown[path]) or FileAttributes()
        digest = hashlib.sha256(f"{found.digest}:callers:{callers.digest}".encode()).hexdigest()[:16]
        files[shown[path]] = replace(found, callers=callers, digest=digest)
    subclassed = subclassed or {}
    for path in set(on_cpu) | subclassed.keys():
        found = files.get(shown[path]) or FileAttributes()
        cpu, bases = path in on_cpu, subclassed.get(path, frozenset())
        digest = hashlib.sha256(f"{found.digest}:{cpu}:{sorted(bases)}".encode()).hexdigest()[:16]
        files[shown[path]] = replace(found, on_cpu=cpu, subclassed=bases, digest=digest)
    return RunAttributes(files)


def _class_and_function_tables(
    programs: Mapping[Path, bytes], shown: Mapping[Path, str], resolved: Imports,
    importable: Callable[[Path], Callable[[Path], bool]], functions: Mapping[Path, tuple[dict, str]],
) -> dict[str, FileAttributes]:
    tables = {path: class_attributes(data) for path, data in programs.items() if b"class " in data and b"self." in data}
    tables = {path: table for path, table in tables.items() if table}
    if not tables:
        return {shown[path]: FileAttributes({}, frozenset(), digest, table) for path, (table, digest) in functions.items()}
    attrs = {attr for table in tables.values() for kinds in table.values() for attr in kinds}
    edges: dict[Path, set[Path]] = {path: set() for path in programs}
    for path, found in resolved.items():
        if found is None:
            can = importable(path)
            targets = {other for other in programs if other != path and can(other)}
        else:
            targets = {target for _, _, target in found if target in programs}
        for target in targets:
            edges[path].add(target)
            edges[target].add(path)
    component = _components(edges)
    outside: dict[int, set[str]] = {}
    for path, data in programs.items():
        if any(attr.encode() in data for attr in attrs) or b"setattr" in data:
            outside.setdefault(component[path], set()).update(stored_from_outside(data))
    files: dict[str, FileAttributes] = {}
    for path, found in resolved.items():
        classes: dict[str, dict[str, str]] = {}
        for spelt, level, target in found or ():
            prefix = "." * level + (f"{spelt}." if spelt else "")
            for name, table in tables.get(target, {}).items():
                classes[prefix + name] = {a: CLASS + prefix + k[len(CLASS):] if k.startswith(CLASS) else k for a, k in table.items()}
        table, digest = functions.get(path, ({}, ""))
        if classes:
            stored = frozenset(outside.get(component[path], ()))
            text = json.dumps([sorted((k, sorted(v.items())) for k, v in classes.items()), sorted(stored), digest])
            files[shown[path]] = FileAttributes(classes, stored, hashlib.sha256(text.encode()).hexdigest()[:16], table)
        elif table:
            files[shown[path]] = FileAttributes({}, frozenset(), digest, table)
    return files


def _components(edges: Mapping[Path, set[Path]]) -> dict[Path, int]:
    component: dict[Path, int] = {}
    for start in edges:
        if start in component:
            continue
        label, stack = len(component), [start]
        component[start] = label
        while stack:
            for other in edges.get(stack.pop(), ()):
                if other not in component:
                    component[other] = label
                    stack.append(other)
    return component


# -- asked by the facts ----------------------------------------------------------------------


def subclassed_in_run(values: "ModuleValues", name: str) -> bool:
    """A class of the run subclasses this file's class ``name`` (the run's fact)."""
    run: FileAttributes | None = getattr(values.view, "project_attributes", None)
    return run is not None and name in run.subclassed


def stays_on_cpu(values: "ModuleValues") -> bool:
    """Every file of this file's import group keeps its values on the CPU (the run's fact,
    :mod:`.project_placements`; False where the file was not given one)."""
    run: FileAttributes | None = getattr(values.view, "project_attributes", None)
    return run is not None and run.on_cpu



def attribute_kind(values: "ModuleValues", expr: "cst.Attribute") -> str | None:
    """The kind of ``x.attr`` where every value of ``x`` is an instance made by calling a class
    with a table (this file's or one it imports from the run): :data:`PLAIN_DICT`,
    :data:`MAPPING`, :data:`SEQUENCE`, ``class:<key>``; None where not shown."""
    owner = _class_of(values, expr.value, 0)
    if owner is None:
        return None
    tables, outside = _tables(values)
    attr = expr.attr.value
    if attr in outside or EVERY_ATTRIBUTE in outside:
        return None
    return tables.get(owner, {}).get(attr)


def _class_of(values: "ModuleValues", expr: "cst.BaseExpression", depth: int) -> str | None:
    import libcst as cst  # the runner imports this module for its ast part: a warm run loads no libcst

    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        names = values.names(expr.func)
        if len(names) != 1:
            return None
        key = next(iter(names))
        return key if key in _tables(values)[0] else None
    if isinstance(expr, cst.Attribute):
        kind = attribute_kind(values, expr) if depth < MAX_DEPTH else None
        return kind[len(CLASS):] if kind is not None and kind.startswith(CLASS) else None
    if isinstance(expr, cst.Name):
        found: set[str | None] = set()
        for value in values.values_of(expr):
            found.add(_class_of(values, value, depth + 1) if value is not None and value is not expr else None)
            if None in found:
                return None
        return found.pop() if len(found) == 1 else None
    return None


def _tables(values: "ModuleValues") -> tuple[dict[str, Mapping[str, str]], frozenset[str]]:
    """The tables this file can ask (its own classes by name, those it imports by the qualified
    name of their use) and the attribute names stored from outside, once per module version."""

    def compute() -> tuple[dict[str, Mapping[str, str]], frozenset[str]]:
        code = getattr(values.view, "source_code", None)
        own: dict[str, Mapping[str, str]] = dict(class_attributes(code)) if code else {}
        outside = stored_from_outside(code) if code else frozenset({EVERY_ATTRIBUTE})
        run: FileAttributes | None = getattr(values.view, "project_attributes", None)
        if run is not None:
            own, outside = {**run.classes, **own}, outside | run.outside
        return own, outside

    return values.facet("class attribute tables", compute)
