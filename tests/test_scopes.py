"""The scope answers given without libcst's whole-file analysis (``torchfix_device.syntax.scopes``,
``traversal.name_reads``) and stage 1's member sites, compared with libcst's own analysis."""

from __future__ import annotations

import ast
import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ScopeProvider

from conftest import FIXTURES, ROOT, sweep_sample
from torchfix_device.syntax import traversal
from torchfix_device.syntax import scopes
from torchfix_device.prefilter.candidates import parse_facts, statements_with_sites
from torchfix_device.engine.statements import _members_without_sites
from torchfix_device.codemods.catalog import lookup
from torchfix_device.syntax.qualified_names import FastNames

SNIPPETS = [
    "import torch\ndevice = torch.device('cpu')\ndef f(device=device):\n    x = 1\n    return device\n",
    "import os, torch.nn as nn\nclass A(nn.Module):\n    x = 1\n    def f(self):\n        global y\n        y = 2\n",
    "try:\n    import a.b.c\nexcept ImportError as err:\n    err2 = err\nelse:\n    def g(): pass\nfinally:\n    z = 3\n",
    "for i, (j, *k) in []:\n    with open('f') as (h):\n        while i:\n            class K:\n                def m(self): q = 1\n",
    "[w := v for v in range(3)]\nlam = lambda p: p\n@dec\nclass D:\n    @staticmethod\n    def s(a=(b := 1)): pass\n",
    "if x:\n    def f(): pass\nelif y:\n    f = 1\nelse:\n    from m import f\nmatch q:\n    case 1:\n        def f(): pass\n",
]


def _sources() -> list[str]:
    texts = list(SNIPPETS)
    for path in sweep_sample([*FIXTURES.rglob("*.py"), *(ROOT / "examples").rglob("*.py")]):
        text = path.read_text(encoding="utf-8")
        try:
            compile(text, str(path), "exec")
        except SyntaxError:
            continue
        texts.append(text)
    return texts


SOURCES = _sources()
SOURCE_IDS = [f"source{i}" for i in range(len(SOURCES))]


def _key(assignments) -> set[tuple[type, int]]:
    return {(type(a), id(a.node)) for a in assignments}


@pytest.mark.sweep
@pytest.mark.parametrize("text", SOURCES, ids=SOURCE_IDS)
def test_skeleton_bindings_are_libcsts_module_level_ones(text: str) -> None:
    module = cst.parse_module(text)
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)[module]
    skeleton = scopes.ModuleSkeleton(module)
    declared = {n.value for s in traversal.walk_statements(module) if isinstance(s, (cst.Global, cst.Nonlocal)) for n in (a.name for a in s.names)}
    names = {a.name for a in whole.assignments}
    for name in names - declared:  # a function binds a ``global`` name: the callers ask libcst
        assert _key(skeleton.bindings(name)) == _key(whole.assignments[name]), name
    assert not skeleton.bindings("surely_unbound_name")


def test_skeleton_leaves_nodes_off_the_way_to_functions_alone() -> None:
    module = cst.parse_module("import torch\nx = 1\nclass A:\n    y = 2\n    def f(self):\n        return 3\n")
    skeleton = scopes.ModuleSkeleton(module)
    assert skeleton.module.body[0] is module.body[0] and skeleton.module.body[1] is module.body[1]
    assert skeleton.module.body[2] is not module.body[2]
    assert skeleton.module.code.endswith("    def f(self):\n        pass\n")


def _with_top_functions(texts: list[str]) -> list[tuple[str, str]]:
    """(id, source) of the sources holding a function at module level or in a top-level class
    body (the functions whose names are resolved alone); the others have nothing to compare."""
    found = []
    for index, text in enumerate(texts):
        tree = ast.parse(text)
        bodies = [tree.body, *(c.body for c in tree.body if isinstance(c, ast.ClassDef))]
        functions = [n for body in bodies for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if any(_reads_a_local_or_free_name(f) for f in functions):
            found.append((SOURCE_IDS[index], text))
    return found


def _reads_a_local_or_free_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A name in the body that no ``global``/``nonlocal`` hands to the module's analysis."""
    declared = {n for node in ast.walk(function) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    return any(isinstance(node, ast.Name) and node.id not in declared for stmt in function.body for node in ast.walk(stmt))


WITH_FUNCTIONS = _with_top_functions(SOURCES)


@pytest.mark.sweep
@pytest.mark.parametrize("text", [t for _, t in WITH_FUNCTIONS], ids=[i for i, _ in WITH_FUNCTIONS])
def test_resolution_in_function_agrees_with_the_whole_analysis(text: str) -> None:
    module = cst.parse_module(text)
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    skeleton = scopes.ModuleSkeleton(module)
    top_functions = [n for n in traversal.module_scope_statements(module) if isinstance(n, cst.FunctionDef)]
    top_functions += [m for c in traversal.module_scope_statements(module) if isinstance(c, cst.ClassDef) for m in c.body.body if isinstance(m, cst.FunctionDef)]
    # a function binds a ``global`` name: the module's skeleton does not hold that binding, and the
    # callers ask libcst for such names (``FastNames``), as in the test above
    declared = {n.value for s in traversal.walk_statements(module) if isinstance(s, (cst.Global, cst.Nonlocal)) for n in (a.name for a in s.names)}
    compared = 0
    for function in top_functions:
        alone = scopes.scopes_of_function_alone(function)
        if alone is None:
            continue
        for node in traversal.walk(function.body):
            if not isinstance(node, cst.Name) or node not in whole or node.value in declared:
                continue
            where = scopes.resolution_in_function(alone, node, node.value)
            if where is None:
                continue
            kind, found = where
            answer = found if kind == scopes.LOCAL else skeleton.bindings(node.value)
            exact = whole[node][node.value] if whole[node] is not None else set()
            compared += 1
            if any(isinstance(a, scopes.BuiltinAssignment) for a in exact):
                assert kind == scopes.MODULE and not skeleton.bindings(node.value)
                continue
            assert _key(answer) == _key(exact), node.value
    assert compared, "no name was resolved in a function of this source: nothing was compared"


READS = [
    "from torch.cuda.amp import autocast\nwith autocast():\n    pass\ndef f():\n    return autocast(enabled=autocast)\n",
    "from torch.cuda.amp import GradScaler as GS\nx = GS()\ny = x.GS\nz = dict(GS=1)\nclass C(GS):\n    pass\n",
    "from torch.cuda.amp import autocast\ndef g() -> 'autocast':\n    return autocast\n",
]


@pytest.mark.parametrize("text", READS, ids=[f"reads{i}" for i in range(len(READS))])
def test_name_reads_are_libcsts_references(text: str) -> None:
    module = cst.parse_module(text)
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    fast = FastNames(module, text)
    imp = module.body[0].body[0]
    for alias in imp.names:
        name = (alias.asname.name if alias.asname else alias.name).value
        assert fast.bound_by_one_import_only(name)
        reads = traversal.name_reads(module, name)
        (assignment,) = whole[imp].assignments[name]
        references = {id(a.node) for a in assignment.references}
        if reads is None:  # a string holds the name: libcst may read an annotation there
            assert "'" + name in text
            continue
        assert {id(n) for n in reads} == references


def test_bound_by_one_import_only_refuses_other_bindings() -> None:
    text = "from m import a, b, c, d\nimport e\nimport e\ndef f(b): pass\nclass K:\n    c = 1\n    print(c)\ndef g():\n    global d\n"
    fast = FastNames(cst.parse_module(text), text)
    assert fast.bound_by_one_import_only("a")
    assert not any(fast.bound_by_one_import_only(n) for n in "bcde")


def test_member_sites_skip_the_other_members_of_a_class() -> None:
    text = (
        "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    size = 3; other = 4\n\n"
        "    def __init__(self):\n        super().__init__()\n\n    def noise(self):\n        return torch.randn(2)\n\n"
        "    def plain(self):\n        return 1\n"
    )
    facts = parse_facts(text)
    sites = statements_with_sites(facts, lookup("TFD003"))
    assert sites.wanted == {2} and sites.members == {2: ({3}, 5)}
    cls = cst.parse_module(text).body[2]
    skipped = _members_without_sites(cls, *sites.members[2])
    kept = [m for m in cls.body.body if id(m) not in skipped]
    assert [m.name.value for m in kept] == ["noise"]
    # a site in the class's own line (its bases) visits every member
    text2 = "import torch\nclass N(torch.nn.Module, metaclass=torch.zeros(1)):\n    def f(self):\n        pass\n"
    assert statements_with_sites(parse_facts(text2), lookup("TFD003")).members == {}
    # counts that differ from libcst's skip nothing
    assert _members_without_sites(cls, {3}, 4) == []


def test_module_scope_statements_stop_at_function_and_class_bodies() -> None:
    module = cst.parse_module("if x:\n    class A:\n        y = 1\n    def f():\n        z = 2\nelse:\n    w = 3\n")
    kinds = [type(n).__name__ for n in traversal.module_scope_statements(module)]
    assert "ClassDef" in kinds and "FunctionDef" in kinds
    names = {t.target.value for n in traversal.module_scope_statements(module) if isinstance(n, cst.Assign) for t in n.targets}
    assert names == {"w"}


def test_member_sites_reach_one_level_into_a_nested_class() -> None:
    text = (
        "import torch\nimport torch.nn as nn\n\n\nclass Tests:\n    class _Base(nn.Module):\n"
        "        def a(self):\n            return torch.randn(2)\n\n        def b(self):\n            return 1\n\n"
        "    def c(self):\n        return 2\n"
    )
    sites = statements_with_sites(parse_facts(text), lookup("TFD003"))
    assert sites.members == {2: ({0}, 2)} and sites.inner == {(2, 0): ({0}, 2)}
    tests = cst.parse_module(text).body[2]
    skipped = set(_members_without_sites(tests, *sites.members[2], {0: sites.inner[2, 0]}))
    inner = tests.body.body[0]
    assert [m.name.value for m in inner.body.body if id(m) not in skipped] == ["a"]
    assert id(tests.body.body[1]) in skipped and id(inner) not in skipped
    assert set(_members_without_sites(tests, *sites.members[2])) == {id(tests.body.body[1])}  # not nested: one level


BOUND_SNIPPETS = [
    "def f(a, *b, c=1, **d):\n    e = [g for g in a if (h := g)]\n    i: int\n    j += 1\n    del k\n    return lambda l: l + m\n",
    "def f():\n    try:\n        import x.y as z, w.v\n        from u import t as s, r\n    except E as q:\n        pass\n    with o() as (n, [p]):\n        class C:\n            attr = free\n    for *aa, bb in cc: pass\n    return dd\n",
    "def f(x):\n    match x:\n        case [a, *rest] | {'k': a, **rest}:\n            return a, rest, other\n        case Point(x=px) as whole:\n            return px, whole\n    def g():\n        return x, outer\n    return g\n",
    "def f():\n    nonlocal_free = 1\n    def g():\n        nonlocal nonlocal_free\n        nonlocal_free = 2\n    return g, module_name\n",
    "def f(self):\n    self.attr = 1\n    obj.field = 2\n    seq[0] = 3\n    return attr, field, seq, obj, f, unbound_here\n",
]


def _reads_in_functions(text: str):
    """(function, its ``function_locals``, a read libcst records in its body, libcst's analysis of
    the function alone) for every function of ``text``; the function's ``function_locals`` is
    None (and no read is given) where it declares ``global`` or ``nonlocal``, checked here."""
    module = cst.parse_module(text)
    for function in (n for n in traversal.walk(module) if isinstance(n, cst.FunctionDef)):
        local = scopes.function_locals(function)
        assert (local is None) == any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in traversal.walk(function))
        if local is None:
            yield function, None, None, None
            continue
        scope_map = scopes.scopes_of_function_alone(function)
        for name in (n for n in traversal.walk(function.body) if isinstance(n, cst.Name)):
            scope = scope_map.get(name)
            if scope is not None and any(access.node is name for access in scope.accesses[name.value]):
                yield function, local, name, scope_map  # not an attribute's or keyword's name


@pytest.mark.sweep
@pytest.mark.parametrize("text", [*BOUND_SNIPPETS, *SOURCES], ids=[f"bound{i}" for i in range(len(BOUND_SNIPPETS))] + SOURCE_IDS)
def test_a_name_no_scope_of_a_function_binds_resolves_at_module_level_as_libcst_says(text: str) -> None:
    """``function_locals(...).bound``: every name read in a function's body that it does not list
    resolves at module level in libcst's analysis of the function alone (the shortcut of
    :mod:`torchfix_device.facts.names`)."""
    compared = declared = 0
    for _, local, name, scope_map in _reads_in_functions(text):
        declared += local is None
        if local is not None and name.value not in local.bound:
            assert scopes.resolution_in_function(scope_map, name, name.value) == (scopes.MODULE, set()), name.value
            compared += 1
    assert compared or declared or text not in BOUND_SNIPPETS


LOCAL_SNIPPETS = [
    "def f(a, b=1, *args, c, **kw):\n    x = a\n    x += b\n    y: int = x\n    z: str\n    for i, (j, *k) in args:\n        w = i + j\n    with open(c) as fh, g() as [p, q]:\n        pass\n    try:\n        pass\n    except E as err:\n        pass\n    def inner(): return x\n    class K:\n        attr = y\n    return x, y, z, i, j, k, w, fh, p, q, err, inner, K, kw, [x for _ in y], lambda: z\n",
    "def f(self):\n    self.v = v = 1\n    d[k] = v\n    [v for v in range(3)]\n    return v, k, d\n",
    "def f():\n    import os\n    (n := 1)\n    del m\n    m = n = q = 2\n    return os, n, m, q\n",
    "def f(x=(y := 1)):\n    y = 2\n    return y, x\n",
]


@pytest.mark.sweep
@pytest.mark.parametrize("text", [*LOCAL_SNIPPETS, *SOURCES], ids=[f"local{i}" for i in range(len(LOCAL_SNIPPETS))] + SOURCE_IDS)
def test_a_name_only_the_functions_own_scope_binds_resolves_as_libcst_says(text: str) -> None:
    """``function_locals``: a read in a function's body of a name it lists resolves, in libcst's
    analysis of the function alone, to exactly the bindings it lists."""
    compared = 0
    for _, local, name, scope_map in _reads_in_functions(text):
        if local is None or name.value not in local.simple:
            continue
        assert set(local.simple) <= local.bound
        where = scopes.resolution_in_function(scope_map, name, name.value)
        assert where is not None and where[0] == scopes.LOCAL, name.value
        assert {id(a.node) for a in where[1]} == {id(n) for n in local.simple[name.value]}, name.value
        compared += 1
    assert compared or text not in LOCAL_SNIPPETS
