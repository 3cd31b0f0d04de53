"""The `Variable` import removal (TFD009) without libcst's scope analysis: same output as
libcst's ``RemoveImportsVisitor`` wherever the name is used plainly, the import kept wherever
the name is still spelt."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from torchfix_device.options import RunOptions
from torchfix_device.codemods.variable_wrapper import VariableWrapper
from torchfix_device.engine import transform_source, transform_unfiltered
from torchfix_device.engine.visiting import on_first_statements
from torchfix_device.syntax.imports import _AliasRemover, remove_import_aliases
from conftest import FIXTURES, sweep_sample


class _LibcstRemoval(VariableWrapper):
    """The removal as it was: every `Variable` import handed to libcst's RemoveImportsVisitor,
    which decides from a scope analysis of the whole rewritten module."""

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self._rewrote:
            for _, module, asname in self._imports.values():
                RemoveImportsVisitor.remove_unused_import(self.context, module, "Variable", asname)
        return super(VariableWrapper, self).leave_Module(original_node, updated_node)


_AGREEING = {
    "only import": "import torch\nfrom torch.autograd import Variable\n\nx = Variable(torch.zeros(2))\n",
    "with others": "import torch\nfrom torch.autograd import grad, Variable, backward\n\nx = Variable(torch.zeros(2))\n",
    "first of several": "import torch\nfrom torch.autograd import Variable, grad\n\nx = Variable(torch.ones(1))\n",
    "parenthesized with comments": (
        "import torch\nfrom torch.autograd import (\n    grad,  # gradients\n    Variable,  # the wrapper\n"
        "    backward,\n)\n\nx = Variable(torch.zeros(2))\n"
    ),
    "aliased": "import torch\nfrom torch.autograd import Variable as V\n\nx = V(torch.zeros(2))\ny = V(torch.ones(2))\n",
    "submodule": "import torch\nfrom torch.autograd.variable import Variable\n\nx = Variable(torch.zeros(2))\n",
    "in try": (
        "import torch\ntry:\n    from torch.autograd import Variable\nexcept ImportError:\n    pass\n\n"
        "x = Variable(torch.zeros(2))\n"
    ),
    "in function": (
        "import torch\n\ndef f():\n    from torch.autograd import Variable\n    return Variable(torch.zeros(2))\n"
    ),
    "still used": "import torch\nfrom torch.autograd import Variable\n\nx = Variable(torch.zeros(2))\nok = isinstance(x, Variable)\n",
    "exported": "import torch\nfrom torch.autograd import Variable\n__all__ = ['Variable']\n\nx = Variable(torch.zeros(2))\n",
    "string annotation": (
        "import torch\nfrom torch.autograd import Variable\n\ndef f(a: 'Variable'):\n    return Variable(torch.zeros(2))\n"
    ),
    "docstring mention": (
        'import torch\nfrom torch.autograd import Variable\n\ndef f():\n    """Returns a Variable."""\n'
        "    return Variable(torch.zeros(2))\n"
    ),
    "nested": "import torch\nfrom torch.autograd import Variable\n\nx = Variable(Variable(torch.zeros(2)))\n",
    "held back": "import torch\nfrom torch.autograd import Variable\n\nx = Variable(torch.zeros(2))\ny = Variable(w)\n",
    "qualified call": "import torch\nimport torch.autograd\n\nx = torch.autograd.Variable(torch.zeros(2))\n",
    "other module's Variable": "import torch\nfrom mylib import Variable\n\nx = Variable(torch.zeros(2))\n",
    "self assignment removed": (
        "import torch\nfrom torch.autograd import Variable\n\ndef f(x):\n    x = torch.zeros(2)\n    x = Variable(x)\n"
        "    return x\n"
    ),
}


@pytest.mark.parametrize("unsafe", [False, True])
@pytest.mark.parametrize("name", sorted(_AGREEING))
def test_removal_matches_libcst(name: str, unsafe: bool) -> None:
    source = _AGREEING[name]
    ours = transform_unfiltered(source, [VariableWrapper], options=RunOptions(unsafe_fixes=unsafe)).text
    libcst_way = transform_unfiltered(source, [_LibcstRemoval], options=RunOptions(unsafe_fixes=unsafe)).text
    assert ours == libcst_way
    assert transform_source(source, [VariableWrapper], options=RunOptions(unsafe_fixes=unsafe)).text == ours
    compile(ours, name, "exec")


def test_removal_drops_the_import_statement() -> None:
    out = transform_source(_AGREEING["only import"], [VariableWrapper]).text
    assert out == "import torch\n\nx = torch.zeros(2)\n"
    out = transform_source(_AGREEING["in try"], [VariableWrapper]).text
    assert "Variable" not in out


@pytest.mark.parametrize(
    "source",
    [
        # the name is still spelt: libcst's scope analysis would call these imports unused, the
        # cheap count keeps them (keeping an unused import is harmless, removing a used one is not)
        "import torch\nfrom torch.autograd import Variable\n\nx = Variable(torch.zeros(2))\ny = obj.Variable\n",
        "import torch\nfrom torch.autograd import Variable\n\nx = Variable(torch.zeros(2))\n\n"
        "def f():\n    Variable = 3\n    return Variable\n",
        "import torch\nfrom torch.autograd import Variable\n\nx = Variable(torch.zeros(2))\nlog('Variable gone')\n",
    ],
)
def test_import_kept_while_the_name_is_spelt(source: str) -> None:
    out = transform_source(source, [VariableWrapper]).text
    assert "from torch.autograd import Variable\n" in out
    assert "torch.zeros(2)\n" in out and "Variable(torch" not in out


def test_remover_visits_no_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    """The alias remover descends through statements only, and removes only the alias given."""
    module = cst.parse_module("from a import b, c\nx = f(g(h))\nif y:\n    from a import b\n")
    seen: list[type] = []
    original = _AliasRemover.on_visit

    def spying(self: _AliasRemover, node: cst.CSTNode) -> bool:
        seen.append(type(node))
        return original(self, node)

    monkeypatch.setattr(_AliasRemover, "on_visit", spying)
    statement = module.body[0].body[0]
    out = remove_import_aliases(CodemodContext(), module, [("a", "b", None)], {statement.names[0]: statement})
    assert out.code == "from a import c\nx = f(g(h))\nif y:\n    from a import b\n"
    assert cst.Call not in seen and cst.Arg not in seen and cst.If in seen


# -- libcst's AddImportsVisitor on a module's first statements (engine/visiting.py) ----------------
_ADDED_IMPORTS = (("torch", None, None), ("torch.nn", "ModuleList", None), ("torch", "nn", None), ("numpy", None, "np"), ("__future__", "annotations", None))
_HEADS = {
    "docstring first": '"""Doc."""\nimport os\nx = 1\nimport sys\n\ndef f():\n    from torch import nn\n    return nn\n',
    "strict flag": "__strict__ = True\nfrom torch import optim\ny = 2\n",
    "code first": "x = 1\nimport torch\nprint(x)\n",
    "comment above the first code": "import os\n# a comment\nx = 1\n",
    "only imports": "import os\nimport sys\n",
    "one statement": "x = 1\n",
    "future then imports": "from __future__ import print_function\nimport torch.nn as nn\nfrom torch import nn as tnn\n\n\nclass A:\n    pass\n",
    "imports on one line": "import os; import sys\nfrom torch import *\nx = 1\n",
    "an import inside a block": "import os\nif True:\n    import torch\nfrom torch import nn\nx = 1\n",
}


def _add_imports(tree: cst.Module, requests, head_only: bool) -> str:
    context = CodemodContext(filename="m.py", full_module_name="pkg.m", full_package_name="pkg")
    for module, obj, asname in requests:
        AddImportsVisitor.add_needed_import(context, module, obj, asname)
    run = AddImportsVisitor(context).transform_module
    return (on_first_statements(run, tree) if head_only else run(tree)).code


def _import_cases():
    sources = dict(_HEADS)
    fixtures = sweep_sample(FIXTURES.glob("*/*.in.py"), every=8)  # every file under TFD_SWEEP=all
    sources.update((p.relative_to(FIXTURES).as_posix(), p.read_text(encoding="utf-8")) for p in fixtures)
    for name, source in sources.items():
        try:
            tree = cst.parse_module(source)
        except cst.ParserSyntaxError:
            continue  # a token-pass input
        yield pytest.param(tree, id=name)


@pytest.mark.sweep
@pytest.mark.parametrize("tree", list(_import_cases()))
def test_add_imports_on_the_first_statements_gives_what_it_gives_on_the_whole_module(tree: cst.Module) -> None:
    """The premise of the engine's shortcut, on libcst's own code as installed: the request the
    codemods make (``import torch``) and several kinds together, on the shapes above and on
    fixture inputs."""
    for requests in (_ADDED_IMPORTS[:1], _ADDED_IMPORTS):
        assert _add_imports(tree, requests, head_only=True) == _add_imports(tree, requests, head_only=False), requests
