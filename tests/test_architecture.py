"""The shape of the package, read from its source with ``ast``: its packages are layers that
import downward only (no cycle between modules either, counting every import), at most 12 modules
sit directly in the package, no codemod helper lies loose in ``codemods/``, none is over 500
lines, and one module writes files atomically.

The import graph has an edge ``a -> b`` for every ``import b`` / ``from b import x`` in module
``a`` that names a module of the package, wherever it stands: at module level, inside a function
or class (an import deferred to keep libcst out of a warm run still ties the two modules
together), or under ``if TYPE_CHECKING:`` (a type named from a higher layer ties the layers as
much as a call does). ``from b import c`` where ``c`` is a submodule of ``b`` is an edge to
``b.c``; relative imports are resolved. Importing ``b.c`` runs ``b/__init__.py`` first, but that
is not counted as an edge to ``b``: a package's ``__init__`` importing its own submodules is not a
cycle of the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "torchfix_device"
SOURCE = Path(__file__).resolve().parent.parent / "src" / PACKAGE
MAX_LINES = 500
LINE_LIMIT_EXEMPT = ("verify/models/",)
"""Model definitions the verifier runs, not engine code."""


def module_files() -> dict[str, Path]:
    """Dotted module name → its file, for every module of the package."""
    modules: dict[str, Path] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = (PACKAGE, *path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, wherever it stands (``TYPE_CHECKING`` blocks too)."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that module ``name`` (its file: ``path``) imports."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:  # `import a.b.func`-style names: the module part
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)

    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    add(alias.name)
            continue
        if node.level:
            base_parts = name.split(".") if is_package else name.split(".")[:-1]
            base_parts = base_parts[: len(base_parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        if not (base == PACKAGE or base.startswith(PACKAGE + ".")):
            continue
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            add(submodule if submodule in modules else base)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through each strongly connected component of ``graph``
    that has one, plus each further cycle needed so that every edge inside such a component
    lies on a reported cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm (recursion depth: the module count)
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)

    found: list[list[str]] = []
    for component in components:
        covered: set[tuple[str, str]] = set()
        for source in sorted(component):
            for target in sorted(graph[source] & component):
                if (source, target) in covered:
                    continue
                cycle = [source, *_shortest_path(graph, target, source, component)]
                covered.update(zip(cycle, cycle[1:]))
                found.append(cycle)
    return found


def _shortest_path(graph: dict[str, set[str]], start: str, goal: str, within: set[str]) -> list[str]:
    """The modules on a shortest import path from ``start`` to ``goal`` inside ``within``."""
    previous: dict[str, str] = {}
    frontier = [start]
    seen = {start}
    while goal not in seen:
        following: list[str] = []
        for node in frontier:
            for target in sorted(graph[node] & within):
                if target not in seen:
                    seen.add(target)
                    previous[target] = node
                    following.append(target)
        frontier = following
    path = [goal]
    while path[-1] != start:
        path.append(previous[path[-1]])
    return path[::-1]


def test_the_graph_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The reader counts imports inside functions, under ``TYPE_CHECKING`` and ``from package
    import submodule``; a planted cycle is found and named."""
    modules = {f"{PACKAGE}.{n}": tmp_path / f"{n}.py" for n in ("a", "b", "c", "d")}
    modules[PACKAGE] = tmp_path / "__init__.py"
    sources = {
        "a": "from torchfix_device import b\n",
        "b": "def f():\n    from torchfix_device.c import thing\n",
        "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torchfix_device import d\nfrom . import a\n",
        "d": "import torchfix_device.a\n",
    }
    graph = {}
    for short, text in sources.items():
        modules[f"{PACKAGE}.{short}"].write_text(text)
        graph[f"{PACKAGE}.{short}"] = imported_modules(f"{PACKAGE}.{short}", modules[f"{PACKAGE}.{short}"], modules)
    assert graph == {
        f"{PACKAGE}.a": {f"{PACKAGE}.b"},
        f"{PACKAGE}.b": {f"{PACKAGE}.c"},
        f"{PACKAGE}.c": {f"{PACKAGE}.a", f"{PACKAGE}.d"},
        f"{PACKAGE}.d": {f"{PACKAGE}.a"},
    }
    assert cycles(graph) == [
        [f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.c", f"{PACKAGE}.a"],
        [f"{PACKAGE}.c", f"{PACKAGE}.d", f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.c"],
    ]


def _format_cycles(found: list[list[str]]) -> str:
    short = lambda name: name.removeprefix(PACKAGE + ".")  # noqa: E731
    return "\n".join(" -> ".join(short(m) for m in cycle) for cycle in found)


def test_the_package_imports_in_layers() -> None:
    graph = import_graph()
    assert sum(len(targets) for targets in graph.values()) > len(graph)  # the reader found imports
    found = cycles(graph)
    assert not found, "import cycles (imports inside functions and TYPE_CHECKING count):\n" + _format_cycles(found)


LAYERS = (
    ("", "finding", "source", "torch_api", "options", "results"),
    ("syntax",),
    ("files",),
    ("prefilter",),
    ("facts",),
    ("devices",),
    ("codemods",),
    ("engine",),
    ("report",),
    ("run",),
    ("verify",),
    ("cli", "__main__"),
)
"""The packages (and top-level modules) from the bottom up: each imports only from its own layer
and those below it. The first layer is the shared vocabulary (plain data and tables: a finding,
a source file, torch's API as data, the run's options, results) and the root package (its
version). docs/architecture.md draws the same picture."""


def layer_of(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"{module}: in no layer of LAYERS (a new package? add it where it belongs)")


def test_the_layers_import_downward_only() -> None:
    graph = import_graph()
    upward = sorted(
        f"{a.removeprefix(PACKAGE + '.')} -> {b.removeprefix(PACKAGE + '.')}"
        for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a)
    )
    assert sum(1 for a, targets in graph.items() for b in targets if layer_of(b) < layer_of(a)) > 100
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_the_layer_reader_sees_an_upward_import() -> None:
    assert layer_of(f"{PACKAGE}.facts.grad") > layer_of(f"{PACKAGE}.syntax.scopes")
    assert layer_of(f"{PACKAGE}.cli.app") == len(LAYERS) - 1 and layer_of(PACKAGE) == 0


def test_at_most_twelve_modules_directly_in_the_package() -> None:
    loose = sorted(p.name for p in SOURCE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert 0 < len(loose) <= 12, loose
    packages = sorted(p.name for p in SOURCE.iterdir() if (p / "__init__.py").is_file())
    assert {p for names in LAYERS for p in names} >= {*packages, *(n.removesuffix(".py") for n in loose)}


def test_no_helper_lies_loose_in_codemods() -> None:
    """Directly in ``codemods/``: one module per rule, the base class, the registry and the
    documentation sections; each folder is a rule's package (its class in ``rule.py``) or the
    helpers several rules share (``common``)."""
    from torchfix_device.codemods.catalog import NOT_RULES, RULE_MODULE, refs

    folder = SOURCE / "codemods"
    rule_modules = {ref.module.removeprefix(f"{PACKAGE}.codemods.").split(".")[0] for ref in refs()}
    for path in folder.glob("*.py"):
        assert path.stem in rule_modules or path.stem in NOT_RULES, f"codemods/{path.name} holds no rule"
    for sub in (p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert sub.name == "common" or (sub / f"{RULE_MODULE}.py").is_file() and sub.name in rule_modules, sub.name
    assert len(rule_modules) == len(refs()) >= 16


def test_no_module_is_over_500_lines() -> None:
    sizes = {
        path.relative_to(SOURCE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in module_files().values()
    }
    checked = {name: lines for name, lines in sizes.items() if not name.startswith(LINE_LIMIT_EXEMPT)}
    assert len(checked) > 10
    over = {name: lines for name, lines in sorted(checked.items()) if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"


RENAMING_INTO_PLACE = {("os", "replace"), ("os", "rename"), ("tempfile", "mkstemp"), ("tempfile", "NamedTemporaryFile")}


def test_one_atomic_writer() -> None:
    """Only ``fileio`` makes temp files and renames them into place: source files, cache
    entries, ``--output-dir`` copies and reports all go through ``fileio.atomic_write``
    (fsync, mode, temp-file cleanup, Ctrl-C held until the file is whole)."""
    writers = set()
    for name, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in RENAMING_INTO_PLACE:
                    writers.add(name)
    assert writers == {f"{PACKAGE}.files.sources"}
