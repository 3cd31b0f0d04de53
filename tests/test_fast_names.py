"""``fast_names``: qualified names without libcst's scope analysis must agree with libcst's.

Every answer the fast path gives is compared with ``QualifiedNameProvider`` on every expression
of each snippet (it may only leave out names local to a function, class or comprehension, and
builtins). The whole suite can also be run with ``TORCHFIX_DEVICE_CHECK_NAMES=1``, which checks
every answer the codemods get.
"""

from __future__ import annotations

import os
import subprocess
import sys

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, ScopeProvider

from conftest import FIXTURES, ROOT, sweep_id, sweep_sample
from torchfix_device.syntax import qualified_names as fast_names
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.syntax.qualified_names import FastNames
from torchfix_device.engine import transform_unfiltered

SNIPPETS = [
    # imports at module level, aliased, dotted, from-imports, relative, star
    "import torch\nimport torch.nn as nn\nfrom torch import load as L, nn as tnn\nimport os.path\n"
    "from . import sibling\nfrom numpy import *\n"
    "x = torch.zeros(3).cuda()\ny = nn.Linear(2, 2)(x)[0].to\nL('m')\ntnn.functional.relu(x)\n"
    "os.path.join('a')\nsibling.f()\nundefined.attr\n''.join([])\nlen(x)\nsuper\n",
    # `import a.b` then `a.c`
    "import torch.nn\nz = torch.zeros(2)\nm = torch.nn.Module\n",
    # bound both by an import and by an assignment at module level
    "try:\n    import torch\nexcept ImportError:\n    torch = None\nif torch:\n    torch.load('x')\n",
    # bound only by assignment at module level; module-level functions and classes
    "torch = __import__('torch')\ndef helper(n):\n    return n\nclass Net(torch.nn.Module):\n"
    "    def forward(self, x):\n        return helper(torch.zeros(2)) + Net.forward\n",
    # locals, parameters (one a builtin's name), comprehensions, lambdas, class attributes
    "import torch\nclass M(torch.nn.Module):\n    scale = 2\n    def forward(self, input, type=None):\n"
    "        out = [t.cuda() for t in input]\n        f = lambda q: q.to('cpu')\n"
    "        return self.scale * f(out[0]) + input.dim() + type\n",
    # a name imported inside a function, assigned in another, declared global
    "def a():\n    import torch\n    return torch.zeros(1)\ndef b():\n    torch = 3\n    return torch\n"
    "def c():\n    global counter\n    counter = torch.ones(1)\n",
    # a module-level function named like a module: its locals look like that module's names
    "import torch\ndef copy(x):\n    y = x.cuda()\n    return y.deepcopy()\ndef jax(z):\n    return z.cuda()\n",
    # names shadowed inside a class body, nested functions, nonlocal
    "import torch as T\nclass A:\n    T = 1\n    u = T\ndef outer():\n    v = T.zeros(1)\n"
    "    def inner():\n        nonlocal v\n        v = v.cuda()\n    return inner\n",
    # imported at module level and again inside functions and a class (agreeing or not), a name
    # bound at module level and as a local
    "import torch\nimport numpy as np\nimport logging\nlog = logging.getLogger()\n"
    "def f(x):\n    import torch._dynamo\n    from torch import nn\n    log = 3\n    return torch.zeros(1), nn.Linear, log\n"
    "class C:\n    import torch.nn\n    def g(self):\n        import numpy\n        np = numpy\n        return torch.ones(1), np.zeros(1)\n"
    "def h():\n    import cupy as np\n    return np.ones(2), torch.nn.Module, log.info('x')\n"
    "torch.load('m'), np.zeros(1), log.warning('y')\n",
    # a method named like a module-level import (methods see the import, the class body its own
    # binding), class-body reads of a class attribute, a comprehension in a class body
    "from torch.nn.parallel.scatter_gather import gather\nimport torch\nclass D:\n    def gather(self, o):\n"
    "        return gather(o, 0)\n    def load(self):\n        return torch.load('m')\n    torch_load = load\n"
    "    names = [gather for _ in range(2)]\nclass E:\n    def zeros(self):\n        return 0\n    z = zeros\n"
    "def zeros():\n    return torch.zeros(1)\nzeros(), gather([], 0)\n",
    # names imported only inside functions (agreeing, disagreeing), used there and where unbound
    "import torch\ndef f():\n    from torch.nn import Linear\n    from torch import load\n    return Linear(2, 2), load('m')\n"
    "def g():\n    from torch.nn import Linear\n    from pickle import load\n    return Linear(1, 1), load(0)\n"
    "def h():\n    return Linear(3, 3)\n",
    # the same with `import *` at module level (it may bind `Linear` there)
    "from torch.nn import *\ndef f():\n    from torch.nn import Linear\n    return Linear(2, 2)\ndef h():\n    return Linear(3, 3)\n",
    # a builtin's name imported at module level (Python 2 compatibility), alone or also bound
    "from io import open\nfrom builtins import range as xrange, input\nimport torch\n"
    "def read(p):\n    return open(p).read().strip().split(), input(), xrange(2)\n"
    "class C:\n    def load(self, p):\n        return torch.load(open(p, 'rb'))\nopen('x').read()\n",
    "from io import open\ndef f(open=None):\n    return open\nclass D:\n    input = 1\n    v = input\n"
    "from builtins import input\nopen('x').read(), input()\n",
    # match statements (libcst does not see their captures: those names go to libcst) and walrus
    "import torch\nif (n := torch.ones(1)) is not None:\n    n.cuda()\nys = [(m := y) for y in n]\nm.cuda()\n",
    "import torch\nmatch torch.cuda:\n    case [a, *rest]:\n        a.cuda()\n    case {'k': b, **kw}:\n        b.to(1)\n",
    # libcst names an attribute of a builtin by the builtin (`builtins.dict`), as in InferSent
    "class dotdict(dict):\n    __getattr__ = dict.get\n    __setattr__ = dict.__setitem__\nx = torch.zeros.__doc__\n",
]


def _expressions(module: cst.Module) -> list[cst.CSTNode]:
    """The expressions a codemod may ask about: what is called, passed, indexed, subclassed, and
    every attribute chain (those an import spells included: TFD008 looks at every attribute)."""
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)
            found.append(node.func)
            found.extend(a.value for a in node.args)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            found.append(node)
            found.append(node.value)

        def visit_Subscript(self, node: cst.Subscript) -> None:
            found.append(node.value)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            found.extend(a.value for a in node.bases)

    module.visit(Collect())
    return list({id(n): n for n in found}.values())


def _skip_unless_python3(code: str) -> None:
    """An input of the token pass (``.cuda(async=True)``) is not Python 3: names are asked only
    after that pass has made it so."""
    try:
        compile(code, "<fixture>", "exec", dont_inherit=True)
    except SyntaxError:
        pytest.skip("not Python 3 (an input of the token pass)")


def _check_agreement(code: str) -> tuple[int, int]:
    wrapper = MetadataWrapper(cst.parse_module(code))
    exact_names = wrapper.resolve(QualifiedNameProvider)
    fast = FastNames(wrapper.module, code)
    answered = asked = 0
    for node in _expressions(wrapper.module):
        asked += 1
        answer = fast.qualified_names(node)
        if answer is None:
            continue
        answered += 1
        value = exact_names.get(node, set())
        exact = {q.name for q in (value() if callable(value) else value)}
        assert fast.agrees(answer, exact, node), (wrapper.module.code_for_node(node), answer, exact)
    return answered, asked


def _answers_by_spelling(code: str) -> dict[str, list[set[str] | None]]:
    """The fast answer for each expression of ``code``, grouped by how it is spelt (in order)."""
    module = cst.parse_module(code)
    fast = FastNames(module, code)
    answers: dict[str, list[set[str] | None]] = {}
    for node in _expressions(module):
        answers.setdefault(cst.Module([]).code_for_node(node), []).append(fast.qualified_names(node))
    return answers


@pytest.mark.parametrize("code", SNIPPETS)
def test_fast_answers_agree_with_libcst(code: str) -> None:
    answered, asked = _check_agreement(code)
    assert asked


@pytest.mark.sweep
@pytest.mark.parametrize("path", sweep_sample(FIXTURES.rglob("*.py")), ids=sweep_id)
def test_fast_answers_agree_with_libcst_on_fixtures(path) -> None:
    code = path.read_text(encoding="utf-8")
    _skip_unless_python3(code)
    try:
        answered, _ = _check_agreement(code)
    except SyntaxError:
        pytest.skip("symtable cannot read it: the fast path is off for this file")
    if not answered and not path.is_relative_to(ROOT):
        pytest.skip("a corpus file (benchmarks/sweeps.py --corpus) with no name the fast path answers")
    assert answered > 0  # compared at least one fast answer with libcst's


def test_common_names_are_answered_without_libcst() -> None:
    code = (
        "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        super().forward(x)\n        return torch.zeros(2) + self.fc(x) + len(x)\n"
    )
    module = cst.parse_module(code)
    fast = FastNames(module, code)
    spelt = {cst.Module([]).code_for_node(n): fast.qualified_names(n) for n in _expressions(module)}
    assert spelt["torch.zeros"] == {"torch.zeros"}
    assert spelt["nn.Module"] == {"torch.nn.Module"}
    assert spelt["self.fc"] == set()
    assert spelt["len"] == {"builtins.len"}
    assert spelt["super().forward"] == {"builtins.super"}


def test_unclear_names_are_left_to_libcst() -> None:
    code = SNIPPETS[5]  # `torch` imported in a function and assigned in another
    module = cst.parse_module(code)
    fast = FastNames(module, code)
    torch_uses = [n for n in _expressions(module) if isinstance(n, cst.Attribute) and cst.Module([]).code_for_node(n) == "torch.zeros"]
    assert torch_uses and all(fast.qualified_names(n) is None for n in torch_uses)


def test_names_captured_by_match_patterns_are_left_to_libcst() -> None:
    """libcst records no binding for a ``match`` capture: questions about captured names go to
    libcst, the file's other names are still answered."""
    code = next(c for c in SNIPPETS if c.startswith("import torch\nmatch torch.cuda:"))
    module = cst.parse_module(code)
    fast = FastNames(module, code)
    spelt = {cst.Module([]).code_for_node(n): n for n in _expressions(module)}
    assert fast.qualified_names(spelt["a.cuda"]) is None and fast.qualified_names(spelt["b.to"]) is None
    assert fast.qualified_names(spelt["torch.cuda"]) == {"torch.cuda"}
    assert not fast.bound_in_functions_only("a") and fast.free_at_module_level("kw") is None


def test_module_named_function_makes_locals_ask_libcst() -> None:
    code = SNIPPETS[6]
    module = cst.parse_module(code)
    fast = FastNames(module, code)
    receivers = [n for n in _expressions(module) if isinstance(n, cst.Attribute) and cst.Module([]).code_for_node(n) == "x.cuda"]
    assert receivers and fast.qualified_names(receivers[0]) is None
    # `copy` alone: no codemod tests names by the prefix `copy.` (only `copy.deepcopy` whole)
    only_copy = code.split("def jax")[0]
    module = cst.parse_module(only_copy)
    fast = FastNames(module, only_copy)
    receivers = [n for n in _expressions(module) if isinstance(n, cst.Attribute) and cst.Module([]).code_for_node(n) == "x.cuda"]
    assert receivers and fast.qualified_names(receivers[0]) == set()


@pytest.fixture
def resolved(monkeypatch) -> list[object]:
    """The metadata providers libcst resolves during the test (skipped where every name is
    checked against libcst's on purpose)."""
    import torchfix_device.syntax.qualified_names as codemod

    if codemod.CHECK_FAST_NAMES:
        pytest.skip("TORCHFIX_DEVICE_CHECK_NAMES=1 resolves libcst's names on purpose")
    providers: list[object] = []
    real = MetadataWrapper.resolve

    def spy(self, provider):
        providers.append(provider)
        return real(self, provider)

    monkeypatch.setattr(MetadataWrapper, "resolve", spy)
    return providers


def test_a_plain_factory_site_needs_no_scope_analysis(resolved) -> None:
    code = (
        "import torch\nimport torch.nn as nn\n\n\nclass Noisy(nn.Module):\n    def __init__(self, n):\n"
        "        super().__init__()\n        self.w = nn.Parameter(torch.zeros(n))\n\n"
        "    def reset_noise(self):\n        return torch.randn(3)\n"
    )
    out = transform_unfiltered(code, all_codemods())
    assert [f.code for f in out.findings] == ["TFD003"]
    assert ScopeProvider not in resolved and QualifiedNameProvider not in resolved


@pytest.mark.parametrize(("value", "expected"), [("1", "True"), ("0", "False"), ("", "False"), (None, "False")])
def test_check_mode_flag_is_read_from_the_environment(value: str | None, expected: str) -> None:
    """``TORCHFIX_DEVICE_CHECK_NAMES=1`` (and only ``1``) turns the checking mode on, in a fresh
    interpreter that reads it at import."""
    env = {k: v for k, v in os.environ.items() if k != "TORCHFIX_DEVICE_CHECK_NAMES"}
    if value is not None:
        env["TORCHFIX_DEVICE_CHECK_NAMES"] = value
    probe = "import torchfix_device.syntax.qualified_names as q; print(q.CHECK_FAST_NAMES)"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


def test_builtin_names_are_python_s_own() -> None:
    assert fast_names.BUILTIN_NAMES >= {"len", "super", "None", "print"} and "torch" not in fast_names.BUILTIN_NAMES


def test_names_spelt_by_imports_have_no_qualified_name() -> None:
    code = "import torch.nn as nn\nfrom torch.cuda import amp\nx = nn.Linear\n"
    module = cst.parse_module(code)
    fast = FastNames(module, code)
    imports = [s.body[0] for s in module.body[:2]]
    spelt = [imports[0].names[0].name, imports[1].module, imports[1].names[0].name]
    assert all(fast.qualified_names(n) == set() for n in spelt)


def test_names_also_imported_or_bound_inside_functions_are_answered_fast() -> None:
    code = next(c for c in SNIPPETS if "torch._dynamo" in c)
    answers = _answers_by_spelling(code)
    # every import of `torch`, anywhere, gives the same names: certain in any scope
    assert answers["torch.zeros"] == [{"torch.zeros"}] and answers["torch.load"] == [{"torch.load"}]
    assert answers["torch.nn.Module"] == [{"torch.nn.Module"}]
    # `log`: a module-level variable and a local, never imported: its spelling
    assert answers["log.info"] == [{"log.info"}] and answers["log.warning"] == [{"log.warning"}]
    # `np` is numpy at module level but cupy in h(): only libcst can tell which
    assert answers["np.zeros"] == [None, None] and answers["np.ones"] == [None]
    assert _check_agreement(code)[0] > 0


def test_names_imported_only_inside_functions_are_answered_fast() -> None:
    code = next(c for c in SNIPPETS if "from pickle import load" in c)
    answers = _answers_by_spelling(code)
    # in f and g, and in h where it is unbound (NameError): what every import of it gives
    assert answers["Linear"] == [{"torch.nn.Linear"}] * 3
    assert answers["load"] == [None, None]  # torch's in f, pickle's in g
    assert _check_agreement(code)[0] > 0
    starred = next(c for c in SNIPPETS if c.startswith("from torch.nn import *"))
    assert _answers_by_spelling(starred)["Linear"] == [None, None]


def test_prefix_tested_modules_cover_the_codemods_prefix_tests() -> None:
    """A codemod testing qualified names by a module prefix must have that module in
    ``PREFIX_TESTED_MODULES``, or a local's libcst name (``math.<locals>.x``, in a file with a
    module-level ``def math()``) could pass its test on the fast path's answer but not libcst's."""
    from torchfix_device.codemods.cuda_call import rule as cuda_call
    from torchfix_device.codemods.unregistered_layer_container import rule as ulc

    prefixes = [*ulc.NON_LAYER_MODULES, *ulc.TORCH_MAY_BE_MODULE, *cuda_call.NOT_TORCH_PREFIXES, "numba.", "cupy.", "pycuda."]
    assert {p.split(".")[0] for p in prefixes} <= fast_names.PREFIX_TESTED_MODULES


def test_a_method_named_like_an_import_does_not_hide_the_import() -> None:
    code = next(c for c in SNIPPETS if "class D:" in c)
    answers = _answers_by_spelling(code)
    assert answers["gather"] == [{"torch.nn.parallel.scatter_gather.gather"}] * 2
    assert _check_agreement(code)[0] > 0


def _check_endings(code: str) -> int:
    """Every expression ``may_end_in`` rules out for some last part has no libcst name ending
    in it; returns how many (expression, part) pairs were ruled out."""
    wrapper = MetadataWrapper(cst.parse_module(code))
    exact_names = wrapper.resolve(QualifiedNameProvider)
    fast = FastNames(wrapper.module, code)
    ruled_out = 0
    for node in _expressions(wrapper.module):
        value = exact_names.get(node, set())
        exact = {q.name for q in (value() if callable(value) else value)}
        spelt = cst.Module([]).code_for_node(node)
        for part in {q.rpartition(".")[2] for q in exact} | {spelt.rpartition(".")[2], "zeros", "load", "Linear"}:
            if not fast.may_end_in(node, frozenset({part})):
                ruled_out += 1
                assert not any(q.rpartition(".")[2] == part for q in exact), (spelt, part, exact)
    return ruled_out


@pytest.mark.parametrize("code", SNIPPETS)
def test_names_ruled_out_by_their_last_part_have_no_such_libcst_name(code: str) -> None:
    assert _check_endings(code) > 0  # compared at least one ruled-out name with libcst's


@pytest.mark.sweep
@pytest.mark.parametrize("path", sweep_sample(FIXTURES.rglob("*.py")), ids=sweep_id)
def test_names_ruled_out_by_their_last_part_agree_on_fixtures(path) -> None:
    _skip_unless_python3(path.read_text(encoding="utf-8"))
    try:
        ruled_out = _check_endings(path.read_text(encoding="utf-8"))
    except SyntaxError:
        pytest.skip("symtable cannot read it: the fast path is off for this file")
    if not ruled_out and not path.is_relative_to(ROOT):
        pytest.skip("a corpus file (benchmarks/sweeps.py --corpus) with no name ruled out")
    assert ruled_out > 0  # compared at least one ruled-out name with libcst's


def test_a_renaming_import_keeps_a_plain_name_possible() -> None:
    code = (
        "import torch\nfrom torch import zeros as z, ones\nimport numpy as np\n"
        "def f():\n    from torch import load as fetch\n    return fetch('m')\n"
        "z(2), ones(2), np.save('a'), torch.nn.Linear(1, 1)\n"
    )
    module = cst.parse_module(code)
    fast = FastNames(module, code)
    by_spelling = {cst.Module([]).code_for_node(n): n for n in _expressions(module)}
    assert fast.may_end_in(by_spelling["z"], frozenset({"zeros"}))  # renamed: could be anything
    assert fast.may_end_in(by_spelling["fetch"], frozenset({"load"}))  # renamed inside a function
    assert not fast.may_end_in(by_spelling["ones"], frozenset({"zeros"}))
    assert not fast.may_end_in(by_spelling["np.save"], frozenset({"load"}))
    assert fast.may_end_in(by_spelling["torch.nn.Linear"], frozenset({"Linear"}))
    assert _check_endings(code) > 0


def test_calls_that_cannot_be_a_codemods_target_need_no_scope_analysis(resolved) -> None:
    """A name only libcst can qualify (``global`` below) costs a whole-file scope analysis; when
    its last part cannot be a factory's, TFD003 does not ask."""
    import torchfix_device.codemods.catalog as codemod

    code = (
        "import torch\nimport torch.nn as nn\n\nstate = None\n\n\ndef reset():\n    global state\n    state = {}\n\n\n"
        "class Noisy(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.zeros(n))\n\n    def forward(self, x):\n"
        "        state.update(x=x)\n        return x * torch.randn(3)\n"
    )
    out = transform_unfiltered(code, [codemod.REGISTRY["TFD003"]])
    assert [f.code for f in out.findings] == ["TFD003"]
    assert QualifiedNameProvider not in resolved


def test_match_captures_read_from_libcst_equal_cpythons() -> None:
    """The captured names come from libcst's tree (no second parse); CPython's ``ast`` names the
    same ones, wildcards (``_``, ``*_``) left out."""
    import ast

    code = (
        "match x:\n    case [a, *rest]:\n        pass\n    case {'k': b, **kw}:\n        pass\n"
        "    case P(q, r=s) as p:\n        pass\n    case [*_] | (1 as t):\n        pass\n    case _:\n        pass\n"
        "def f():\n    match y:\n        case Z(w=v) if v:\n            pass\n"
    )
    expected = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            expected.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            expected.add(node.rest)
    assert fast_names._match_captures(cst.parse_module(code)) == expected == {"a", "rest", "b", "kw", "q", "s", "p", "t", "v"}


def test_check_mode_agrees_on_import_names_next_to_star_imports_and_loop_targets(tmp_path) -> None:
    """Two places where only the checking mode used to fail (an internal error naming ``torch``
    or ``data``), with the same findings as a normal run: the dotted name of an import in a
    file with a star import (``torch.utils`` in ``from torch.utils.data import ...`` is no
    read a star import could bind) and a loop target named like an imported package (``from
    data.loader import ...`` reads no ``data``)."""
    from conftest import run_cli

    (tmp_path / "models.py").write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n")
    (tmp_path / "train.py").write_text(
        "from torch.utils.data import DataLoader\nfrom models import *\nimport os.path\nimport torch\n\n"
        "x = torch.cuda.FloatTensor(3)\nprint(os.path.join('a', 'b'), DataLoader, Net)\n"
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "__init__.py").write_text("")
    (tmp_path / "data" / "loader.py").write_text("from torch.utils.data import DataLoader\n\n\nclass AudioLoader(DataLoader):\n    pass\n")
    (tmp_path / "test.py").write_text(
        "from data.loader import AudioLoader\nimport torch\n\nif __name__ == '__main__':\n"
        "    loader = AudioLoader([(torch.zeros(2), torch.ones(2))], batch_size=None)\n"
        "    for i, (data) in enumerate(loader):\n        inputs, sizes = data\n"
        "        print(inputs.cuda().sum(), sizes.numpy())\n"
    )
    normal = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    checked = run_cli("check", "--no-cache", ".", cwd=tmp_path, env={"TORCHFIX_DEVICE_CHECK_NAMES": "1"})
    assert "internal error" not in checked.stdout.decode() + checked.stderr.decode()
    found = normal.stdout.decode().splitlines()
    assert any(line.startswith("train.py:6:") for line in found) and any(line.startswith("test.py:8:") for line in found)
    assert checked.stdout.decode().splitlines() == found
    assert checked.returncode == normal.returncode == 1
