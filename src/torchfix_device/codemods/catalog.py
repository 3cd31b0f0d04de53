"""The registry of codemods: by code and name, known without importing them.

Importing a codemod imports libcst (half a second, most of it ``libcst.matchers``), which a run
answered from the result cache, or one that only lists codes, never needs. Each codemod module
in ``torchfix_device/codemods/`` defines its class with the literal class attributes
``code = "TFD..."`` and ``name = "..."``; this module reads them with the stdlib ``ast``
(``tests/test_catalog.py`` checks that the result is the registry the classes fill), and
:meth:`CodemodRef.load` imports the class when a file has to be transformed after all.

A :class:`CodemodRef` answers ``code`` and ``name`` itself; any other attribute (``triggers``,
``safe``, the documentation) loads the class and is read from it. This is the only registry:
:func:`all_codemods`, :func:`lookup` and :func:`select_codemods` are the same references,
loaded; :data:`REGISTRY` holds every class defined so far (``Codemod`` subclasses register
themselves there, which keeps codes and names unique).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence

if TYPE_CHECKING:
    import ast

CODEMODS_PACKAGE = "torchfix_device.codemods"
CODEMODS_FOLDER = Path(__file__).resolve().parent
NOT_RULES = frozenset({"__init__", "base", "catalog", "docs", "common"})
"""The modules and packages of ``codemods/`` that hold no rule."""
RULE_MODULE = "rule"
"""A rule with helpers of its own is a package ``codemods/<rule>/``: the class in ``rule.py``."""


def rule_slug(module: str) -> str:
    """The rule's own name in the package (``cuda_call`` for ``...codemods.cuda_call.rule`` and for
    ``...codemods.dropped_move``): its fixture folder's name."""
    return module.removeprefix(CODEMODS_PACKAGE + ".").split(".")[0]


class Rule(Protocol):
    """A codemod (an instance of a :class:`~torchfix_device.codemods.base.Codemod` subclass), as the
    registry sees its class: the base class imports this module to register itself, so this
    module names it only through this protocol."""

    code: str
    name: str


class UnknownRuleError(ValueError):
    pass


@dataclass(frozen=True)
class CodemodRef:
    """A codemod known by its code and name; its class is imported on first use."""

    code: str
    name: str
    module: str
    class_name: str

    def load(self) -> type["Rule"]:
        """The codemod class (importing its module, and libcst, the first time)."""
        return getattr(importlib.import_module(self.module), self.class_name)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)  # copy/pickle probe dunders: never load for those
        return getattr(self.load(), attribute)


_known: tuple[CodemodRef, ...] | None = None


def refs() -> tuple[CodemodRef, ...]:
    """Every codemod of the package, ordered by code (read once per process, see
    :func:`scan_refs`, unless :func:`set_refs` was told them)."""
    global _known
    if _known is None:
        _known = scan_refs()
    return _known


def set_refs(known: Sequence[CodemodRef]) -> None:
    """Take ``known`` as the result of :func:`scan_refs` (remembered from an earlier run of this
    very package: :mod:`torchfix_device.run.catalog_memo`)."""
    global _known
    _known = tuple(known)


def scan_refs() -> tuple[CodemodRef, ...]:
    """Every codemod of the package, ordered by code, read from the codemod files with ``ast``."""
    import ast  # only here: a warm run takes the catalog from its memo

    found: list[CodemodRef] = []
    for path in sorted([*CODEMODS_FOLDER.glob("*.py"), *CODEMODS_FOLDER.glob(f"*/{RULE_MODULE}.py")]):
        in_package = path.stem == RULE_MODULE and path.parent != CODEMODS_FOLDER
        stem = path.parent.name if in_package else path.stem
        if stem.startswith("_") or stem in NOT_RULES:
            continue
        module = f"{CODEMODS_PACKAGE}.{stem}" + (f".{RULE_MODULE}" if in_package else "")
        found.extend(_refs_in(ast.parse(path.read_bytes(), filename=str(path)), module))
    return tuple(sorted(found, key=lambda ref: ref.code))


def _refs_in(tree: ast.Module, module: str) -> Iterable[CodemodRef]:
    import ast

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            literals = _literal_class_strings(node)
            if "code" in literals and "name" in literals:
                yield CodemodRef(literals["code"], literals["name"], module, node.name)


def _literal_class_strings(node: ast.ClassDef) -> dict[str, str]:
    """``NAME = "text"`` assignments directly in the class body."""
    import ast

    found: dict[str, str] = {}
    for statement in node.body:
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            found[statement.targets[0].id] = statement.value.value
    return found


def codes() -> list[str]:
    """Every codemod's code, sorted."""
    return [ref.code for ref in refs()]


def lookup_ref(code_or_name: str) -> CodemodRef:
    """The codemod with this code (``TFD005``) or name (``torch-load-without-map-location``)."""
    wanted = code_or_name.strip()
    for ref in refs():
        if wanted.upper() == ref.code or wanted.lower() == ref.name:
            return ref
    known = ", ".join(f"{ref.code} ({ref.name})" for ref in refs())
    raise UnknownRuleError(f"unknown codemod {code_or_name!r}; known: {known}")


def expand_ref(selector: str) -> list[CodemodRef]:
    """The codemods one ``--select`` / ``--ignore`` entry names: a code (``TFD005``), a name
    (``torch-load-without-map-location``), a code prefix (``TFD00``: TFD001 to TFD009; ``TFD``:
    every one) or ``ALL``, as in ruff."""
    wanted = selector.strip()
    if wanted.upper() == "ALL":
        return list(refs())
    prefix = wanted.upper()
    if prefix.startswith("TFD") and prefix[3:].isdigit() or prefix == "TFD":
        matching = [ref for ref in refs() if ref.code.startswith(prefix)]
        if matching:
            return matching
    return [lookup_ref(wanted)]


def select_refs(
    select: Iterable[str] | None, ignore: Iterable[str] | None, extend_select: Iterable[str] | None = None
) -> list[CodemodRef]:
    """The codemods that ``--select`` (every one when empty), ``--extend-select`` and
    ``--ignore`` leave, ordered by code; each entry as :func:`expand_ref` reads it."""
    select = list(select or ())
    chosen = [ref for s in select for ref in expand_ref(s)] if select else list(refs())
    chosen += [ref for s in extend_select or () for ref in expand_ref(s)]
    dropped = {ref.code for i in ignore or () for ref in expand_ref(i)}
    unique = {ref.code: ref for ref in chosen if ref.code not in dropped}
    return [unique[code] for code in sorted(unique)]


def load_codemods(codemods: Sequence["CodemodRef | type[Rule]"]) -> list[type["Rule"]]:
    """The classes of ``codemods`` (references loaded, classes as they are)."""
    return [c.load() if isinstance(c, CodemodRef) else c for c in codemods]


REGISTRY: dict[str, type["Rule"]] = {}
"""Code → every codemod class defined so far (by :meth:`Codemod.__init_subclass__`)."""


def register(cls: type["Rule"]) -> None:
    """Record a newly defined codemod class; its code and name must be its own."""
    for other in REGISTRY.values():
        if other.code == cls.code or other.name == cls.name:
            if other.__qualname__ != cls.__qualname__ or other.__module__ != cls.__module__:
                raise ValueError(f"{cls.__name__}: code or name already used by {other.__name__}")
    REGISTRY[cls.code] = cls


def all_codemods() -> list[type["Rule"]]:
    """Every codemod of the package, ordered by code (imported)."""
    return load_codemods(refs())


def lookup(code_or_name: str) -> type["Rule"]:
    """The codemod class with this code or name (imported)."""
    return lookup_ref(code_or_name).load()


def select_codemods(select: Iterable[str] | None, ignore: Iterable[str] | None) -> list[type["Rule"]]:
    """The codemod classes that ``--select`` / ``--ignore`` leave, ordered by code (imported)."""
    return load_codemods(select_refs(select, ignore))
