"""Where a device name is bound, told without libcst's whole-file scope analysis: the bindings
visible at a site (from ``symtable`` and a scope analysis of the functions around it alone) and
whether a module-level name is free (``symtable`` alone) must equal libcst's answers."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import FunctionScope, QualifiedNameProvider, ScopeProvider

from conftest import FIXTURES, ROOT, sweep_sample
from torchfix_device.codemods.base import Codemod
from torchfix_device.codemods.catalog import REGISTRY
from torchfix_device.engine import transform_unfiltered

NAMES = ("device", "dev", "DEVICE", "torch_device", "default_device", "device_", "x", "len", "f", "g", "C")

SNIPPETS = [
    # a parameter of one function, sites in another and in that one
    "import torch\ndef f(device):\n    return torch.zeros(2).cuda()\ndef g(x):\n    return x.cuda()\n",
    # closures: the outer function binds it
    "import torch\ndef f(device):\n    def g(x):\n        return x.cuda()\n    return g\n",
    "import torch\ndef f():\n    device = torch.device('cuda')\n    h = lambda: torch.ones(1).cuda()\n"
    "    return [t.cuda() for t in range(3)], h\n",
    # read where nothing binds it (not free), bound at module level, declared global
    "import torch\ndef f(x):\n    return x.to(device)\ndef g(y):\n    return y.cuda()\n",
    "import torch\ndevice = torch.device('cpu')\ndef f(x):\n    return x.cuda()\n",
    "import torch\ndef f():\n    global device\n    device = 'cuda'\ndef g(x):\n    return x.cuda()\n",
    "import torch\ndef f():\n    dev = 1\n    def g():\n        nonlocal dev\n        return torch.ones(dev).cuda()\n",
    # class bodies, methods, a module-level comprehension and lambda binding the name
    "import torch\nclass C:\n    device = 'cpu'\n    def m(self, x):\n        return x.cuda()\n",
    "import torch\nclass C:\n    def device(self):\n        return torch.ones(1).cuda()\n",
    "import torch\nys = [torch.ones(1).cuda() for device in range(2)]\nz = (lambda dev: torch.ones(1).cuda())(0)\n",
    # a function named like the device, a star import, a builtin's name, nested classes
    "import torch\ndef device(x):\n    return x.cuda()\n",
    "from torch import *\ndef f(x):\n    return x.cuda()\n",
    "import torch\ndef f(len):\n    return torch.ones(len).cuda()\n",
    "import torch\ndef f(device):\n    class Inner:\n        def m(self, x):\n            return x.cuda()\n    return Inner\n",
    "import torch\nfor device in range(2):\n    torch.ones(1).cuda()\ndef f(x):\n    return x.cuda()\n",
    "import torch\ndef f(x):\n    import device\n    return x.cuda()\ndef g(x):\n    return x.cuda()\n",
    # match captures (libcst records none: left to libcst)
    "import torch\ndef f(x):\n    match x:\n        case [device]:\n            return torch.ones(1).cuda()\n    return x.cuda()\n",
    "import torch\nmatch 3:\n    case {**dev}:\n        pass\ndef f(x):\n    return x.cuda()\n",
    "import torch\ndef f(x, *, dev=None, **device):\n    with open(x) as DEVICE:\n        return (x := torch.ones(1).cuda())\n",
    # bound at module level and inside functions: the function's own binding, else the module's
    "import torch\ndevice = torch.device('cpu')\ndef f(x):\n    return x.cuda()\ndef g(device):\n    return torch.ones(1).cuda()\n",
    "import torch\ntry:\n    import device\nexcept ImportError as dev:\n    pass\nwith open('f') as DEVICE:\n    pass\n"
    "def f(x):\n    return x.cuda()\nclass K:\n    device = 2\n    def m(self):\n        def device(): pass\n        return torch.ones(1).cuda()\n",
    "import torch\ndef deco(f): return f\ndevice = 1\n@deco\ndef f(x=torch.ones(1).cuda()):\n    return x.cuda()\n",
    "import torch\ndef f(x=(device := torch.ones(1).cuda())):\n    return x.cuda()\n",
    "import torch\nif True:\n    class A:\n        def m(self):\n            return torch.ones(1).cuda()\n    def device(): pass\n",
    # a module's name bound inside functions: qualified names past the functions
    "import torch\ndef f(torch):\n    return torch.zeros(1)\ndef g():\n    return torch.zeros(1).cuda()\n",
    "import torch\nclass C(torch.nn.Module):\n    def m(self):\n        import torch.nn\n        return torch.nn.Linear(1, 1)\n"
    "    def n(self):\n        return torch.nn.Linear(1, 1).cuda()\n",
    "import torch as T\nclass B(T.nn.Module):\n    pass\ndef h():\n    T = 1\n    return T\nclass D(B):\n    def m(self):\n        return T.zeros(1)\n",
]


@pytest.fixture
def probe():
    """A codemod comparing the shortcut answers with libcst's at every call and at the end of
    the module; defined (so registered) only for the test using it."""

    class Probe(Codemod):
        """Compares the shortcut answers with libcst's at every call (test only)."""

        code = "TFD996"
        name = "test-binding-probe"
        summary = "test only"
        triggers = ("",)
        answered: list[str] = []

        def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
            for name in NAMES:
                fast = self._bindings_wherever(name, original_node)
                if fast is None:
                    continue
                scope = self.get_metadata(ScopeProvider, original_node)
                exact = set(scope[name]) if scope is not None else set()
                assert {(type(a), id(a.node)) for a in fast} == {(type(a), id(a.node)) for a in exact}, name
                kind = "bindings in functions of" if any(isinstance(a.scope, FunctionScope) for a in fast) else "bindings of"
                Probe.answered.append(f"{kind} {name}")
            names = self._fast_names()
            for node in (original_node.func, getattr(original_node.func, "value", None)):
                if not isinstance(node, cst.BaseExpression) or names is None:
                    continue
                told = self._qualified_names_by_scope(node, names, False)
                if told is not None:
                    exact_names = {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}
                    assert names.agrees(told, exact_names, node), (cst.Module([]).code_for_node(node), told, exact_names)
                    Probe.answered.append(f"qualified past functions {bool(told)}")
            return updated_node

        def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
            fast = self._fast_names()
            assert fast is not None
            for name in NAMES:
                told = fast.free_at_module_level(name)
                if told is not None:
                    assert told == Codemod.free_at_module_level(self, name), name  # the base class: libcst's scopes
                    Probe.answered.append(f"free {name} {told}")
            return super().leave_Module(original_node, updated_node)

    yield Probe
    REGISTRY.pop(Probe.code, None)


def test_shortcuts_agree_with_libcst_on_snippets(probe) -> None:
    for snippet in SNIPPETS:
        transform_unfiltered(snippet, [probe])
    answered = set(probe.answered)
    # both kinds of answer were given, both ways, for bindings found and not found
    assert {"free device True", "free device False", "bindings of device", "bindings of dev"} <= answered
    assert {"bindings in functions of device", "bindings in functions of dev"} <= answered
    assert {"qualified past functions True", "qualified past functions False"} <= answered


@pytest.mark.sweep
def test_shortcuts_agree_with_libcst_on_fixtures_and_examples(probe) -> None:
    paths = sweep_sample([*FIXTURES.rglob("*.py"), *(ROOT / "examples").rglob("*.py")])
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            compile(text, str(path), "exec")
        except SyntaxError:
            continue
        transform_unfiltered(text, [probe])
    assert len(probe.answered) > 200


def test_names_read_anywhere_are_bound_as_libcst_says_wherever_the_visit_is() -> None:
    """A fact may ask where a name read far from the visit is bound (a rule scanning the whole
    module from ``visit_Module``; the value of a name bound in another function). Asked of
    every name of every snippet, from every call visited and from the module's end, each fast
    answer equals libcst's whole-file one. (The shortcuts once took the function being visited
    for the one around the read: ``x`` in ``f(x)``, asked while visiting ``g``, came out as the
    module's ``x``.)"""
    asked: list[str] = []

    class Remote(Codemod):
        """Asks of every name of the module from wherever it is (test only)."""

        code = "TFD995"
        name = "test-remote-names"
        summary = "test only"
        triggers = ("",)

        def _ask_everywhere(self, module: cst.Module) -> None:
            fast = self._fast_names()
            for node in _names(module):
                scope = Codemod.scope_of(self, node)
                if scope is None:
                    continue
                told = self.bindings_visible_at(node.value, node)
                exact = set(scope[node.value])
                assert _keys(told) == _keys(exact), node.value
                if fast is not None:
                    names = self._qualified_names_by_scope(node, fast, False)
                    if names is not None:
                        assert fast.agrees(names, Codemod._plain_qualified_names(self, node), node), node.value
                asked.append(node.value)

        def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
            self._ask_everywhere(self.visited_module)
            return updated_node

        def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
            self._ask_everywhere(original_node)
            return super().leave_Module(original_node, updated_node)

    remote = [
        "import torch\nx = torch.ones(1)\ndef f(x):\n    return x.cuda()\ndef g():\n    return x.cuda()\n",
        "import torch\ndef f():\n    import numpy as torch\n    return torch.zeros(1)\nif torch.cuda.is_available():\n    y = torch.ones(1).cuda()\n",
        "import torch\nnets = [1, 2]\nopts = [net + 1 for net in nets]\nfor net in nets:\n    print(net, len(nets))\n",
        "import torch\nclass C:\n    nets = [n for n in range(2)]\n    def m(self, nets):\n        return nets\nn = C().m(torch.ones(1).cuda())\n",
    ]
    try:
        for snippet in SNIPPETS + remote:
            transform_unfiltered(snippet, [Remote])
    finally:
        REGISTRY.pop(Remote.code, None)
    assert {"x", "torch", "net", "nets", "n"} <= set(asked)


def _keys(bindings: set) -> set:
    return {(type(a), id(getattr(a, "node", None)), getattr(a, "name", None)) for a in bindings}


def _names(module: cst.Module) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

    module.visit(Collect())
    return found
