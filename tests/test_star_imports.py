"""Issue 20 (DeepRL): ``Variable`` and ``torch`` that a file gets only through star imports
(``from nets import *`` → ``nets/__init__.py`` ``from .helpers import *`` → ``helpers.py``
``from torch.autograd import Variable``). The star imports are resolved over the run
(``torchfix_device.facts.star_imports``); a name they prove is an import counts as if the file
imported it, and one they may bind without proof is reported for review, never guessed.
The projects below are small hand-written ones; the fixed program is executed before and after."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from differential import compare, run_sources
from torchfix_device.options import RunOptions
from torchfix_device.run.cache import ResultCache
from torchfix_device.prefilter.candidates import parse_facts
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.codemods.variable_wrapper import VariableWrapper
from torchfix_device.run.runner import run
from torchfix_device.facts.star_imports import may_hold_star_import, resolve_star_imports

PROJECT = {
    "nets/__init__.py": "from .helpers import *\nfrom .layers import *\n",
    "nets/helpers.py": (
        "import torch\nfrom torch.autograd import Variable\n\n\n"
        "def as_input(values):\n    return torch.tensor(values, dtype=torch.float32)\n\n\n"
        "def detached(x):\n    return Variable(x.data)\n\n\n"
        "def fresh():\n    from torch.autograd import Variable as V\n    return V(torch.zeros(1))\n"
    ),
    "nets/layers.py": (
        "from .helpers import *\n\n\nclass Head:\n    def __init__(self, size):\n        self.weight = torch.ones(size)\n"
    ),
    "tools/__init__.py": "from .misc import  *\n",  # two blanks: still a star import
    "tools/misc.py": "import math\n\n\ndef halve(x):\n    return x / 2\n",
    "agents/__init__.py": "",
    "agents/base.py": "import torch\n\n\nclass Base:\n    scale = 3.0\n",
    "agents/learner.py": (
        "from nets import *\nfrom tools import *\nfrom .base import *\n\n"
        "start = Variable(torch.zeros(3))\n"
        "head = Head(3)\n"
        "weights = Variable(head.weight * Base.scale, requires_grad=True)\n"
        "batch = Variable(as_input([1.0, 2.0, 3.0]))\n"
        "total = halve((start + weights * batch).sum())\n"
        "is_tensor = isinstance(batch, Variable)\n"
        "print(is_tensor, float(total.detach()), weights.requires_grad, start.requires_grad)\n"
        "print(detached(weights).requires_grad, fresh())\n"
    ),
}

LEARNER_FIXED = (
    "from nets import *\nfrom tools import *\nfrom .base import *\nimport torch\n\n"
    "start = torch.zeros(3)\n"
    "head = Head(3)\n"
    "weights = (head.weight * Base.scale).detach().requires_grad_()\n"
    "batch = as_input([1.0, 2.0, 3.0]).detach()\n"  # `as_input` is a project function: no evidence
    "total = halve((start + weights * batch).sum())\n"
    "is_tensor = isinstance(batch, torch.Tensor)\n"
    "print(is_tensor, float(total.detach()), weights.requires_grad, start.requires_grad)\n"
    "print(detached(weights).requires_grad, fresh())\n"
)

TRAPS = {
    # a module that rebinds the name after importing it
    "shadow.py": "from torch.autograd import Variable\nVariable = lambda x: x\n",
    "agents/rebound.py": "from shadow import *\nimport torch\n\nx = Variable(torch.zeros(2))\n",
    # a module nobody can find
    "agents/missing.py": "from not_here import *\nimport torch\n\nx = Variable(torch.zeros(2))\n",
    # a cycle of star imports: what each binds depends on which is imported first
    "cyc_a.py": "from cyc_b import *\nfrom torch.autograd import Variable\n",
    "cyc_b.py": "from cyc_a import *\n",
    "agents/cycle.py": "from cyc_b import *\nimport torch\n\nx = Variable(torch.zeros(2))\n",
    # `__all__` computed, and a binding under a condition
    "dyn.py": "from torch.autograd import Variable\n__all__ = [n for n in dir() if not n.startswith('_')]\n",
    "agents/computed.py": "from dyn import *\nimport torch\n\nx = Variable(torch.zeros(2))\n",
    "maybe.py": "try:\n    from torch.autograd import Variable\nexcept ImportError:\n    Variable = None\n",
    "agents/conditional.py": "from maybe import *\nimport torch\n\nok = isinstance(torch.zeros(1), Variable)\n",
    # `__all__` leaves out the module's own `Variable`: the one from `nets` stands
    "limited.py": "__all__ = ['helper']\nVariable = None\n\n\ndef helper():\n    return 1\n",
    "agents/restricted.py": "from nets import *\nfrom limited import *\n\nx = Variable(torch.zeros(2))\n",
    # a later local `def Variable` shadows the star import's
    "agents/local_def.py": (
        "from nets import *\n\nx = Variable(torch.zeros(2))\n\n\ndef Variable(value):\n    return value\n"
    ),
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _by_name(results) -> dict:
    return {Path(r.path).as_posix(): r for r in results}


def test_the_star_imports_of_a_file_are_followed_to_the_torch_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _write(tmp_path / "p", PROJECT)
    monkeypatch.chdir(root)
    files = sorted(Path(".").rglob("*.py"))
    stars = resolve_star_imports(files, roots=[Path(".")])
    learner = stars.of(Path("agents/learner.py"))
    assert learner is not None and [s.spelt for s in learner.stars] == ["nets", "tools", ".base"]
    assert learner.lookup("Variable", False) == ({"torch.autograd.Variable"}, [], False)
    assert learner.lookup("torch", False) == ({"torch"}, [], False)
    assert learner.lookup("Head", False) == (set(), [], True)  # a class of the project
    assert learner.lookup("halve", False) == (set(), [], True)
    base, helpers = stars.of(Path("agents/base.py")), stars.of(Path("nets/helpers.py"))
    assert base is not None and base.stars == () and base.imported_by == ("agents/learner.py",)
    assert helpers is not None and helpers.imported_by == ("agents/learner.py", "nets/__init__.py", "nets/layers.py")
    assert stars.of(Path("tools/misc.py")).imported_by == ("agents/learner.py", "tools/__init__.py")  # type: ignore[union-attr]
    assert may_hold_star_import(b"from x import \\\n    *\n") and not may_hold_star_import(b"import torch\nx = a * b\n")


def test_stage_one_keeps_a_file_whose_variable_comes_from_a_star_import() -> None:
    facts = parse_facts("from nets import *\n\nx = Variable(y)\n")
    assert facts is not None and VariableWrapper.may_match(facts)


def test_apply_fixes_what_the_star_imports_prove_and_the_program_behaves_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _write(tmp_path / "before", PROJECT)
    after = tmp_path / "after"
    shutil.copytree(before, after)
    monkeypatch.chdir(after)
    results = _by_name(run([Path(".")], all_codemods(), options=RunOptions(write=True)))
    assert results["agents/learner.py"].status == "changed"
    assert (after / "agents/learner.py").read_text(encoding="utf-8") == LEARNER_FIXED
    helpers = (after / "nets/helpers.py").read_text(encoding="utf-8")
    # its own use is fixed, and the import it no longer uses stays: `learner.py` takes it
    assert "    return x.data.detach()\n" in helpers and "from torch.autograd import Variable\n" in helpers
    assert "    return torch.zeros(1)\n" in helpers and " as V" not in helpers  # a function's own import goes
    assert all(f.fixed for f in results["agents/learner.py"].findings)
    messages = [f.message for f in results["agents/learner.py"].findings if "which is what `Variable` did" in f.message]
    assert len(messages) == 1 and "`as_input(...)` is a call this file does not show" in messages[0]  # the detach kept
    driver = "import sys\nsys.path.insert(0, {root!r})\nfrom agents.learner import *\n"
    jobs = [{"source": driver.format(root=str(folder)), "leg": "cpu"} for folder in (before, after)]
    first, second = run_sources(jobs)
    assert first["error"] is None, first
    assert first["stdout"].split() == ["True", "9.0", "True", "False", "False", "tensor([0.])"]
    assert {"start", "weights", "batch", "total"} <= set(first["tensors"])  # compared below
    assert compare(first, second) == []


def test_traps_stay_unchanged_and_unproven_ones_are_reported_for_review(tmp_path: Path) -> None:
    root = _write(tmp_path / "p", {**PROJECT, **TRAPS})
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "400"}
    proc = subprocess.run(
        [sys.executable, "-m", "torchfix_device", "check", "--no-cache", "."], cwd=root, env=env,
        capture_output=True, text=True, timeout=300,
    )
    lines = proc.stdout.splitlines()

    def finding(name: str) -> str:
        found = [line for line in lines if line.startswith(f"agents/{name}.py:")]
        assert len(found) == 1, (name, proc.stdout, proc.stderr)
        return found[0]

    review = "may come from a star import that could not be resolved"
    assert review in finding("rebound") and "shadow.py:2" in finding("rebound")
    assert review in finding("missing") and "`not_here` is not found" in finding("missing")
    assert review in finding("cycle") and "a cycle of star imports" in finding("cycle")
    assert review in finding("computed") and "`__all__` is computed" in finding("computed")
    assert review in finding("conditional") and "under a condition" in finding("conditional")
    for name in ("rebound", "missing", "cycle", "computed", "conditional"):
        assert finding(name).endswith("[manual review]")
    # `limited` exports only `helper`: `Variable` is still `nets`'s, the torch one
    assert "use the tensor itself" in finding("restricted") and "manual review" not in finding("restricted")
    assert not [line for line in lines if line.startswith("agents/local_def.py")]
    assert any(line.startswith("agents/learner.py:5:9: TFD009") for line in lines)


def test_one_file_named_from_the_project_folder_is_resolved_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _write(tmp_path / "p", PROJECT)
    monkeypatch.chdir(root)
    (result,) = run([Path("agents/learner.py")], all_codemods())
    assert result.new_text == LEARNER_FIXED
    monkeypatch.chdir(root / "agents")  # `nets` cannot be found from here: reported, not guessed
    (result,) = run([Path("learner.py")], all_codemods())
    assert result.status == "unchanged"
    reviews = [f for f in result.findings if "could not be resolved" in f.message]
    assert {f.line for f in reviews} == {5, 7, 8, 10} and all(not f.fixed for f in reviews)
    assert "`nets` is not found in ." in reviews[0].message


def test_a_star_imported_module_changing_changes_the_cached_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _write(tmp_path / "p", PROJECT)
    monkeypatch.chdir(root)
    codemods = all_codemods()
    cache = ResultCache(tmp_path / "cache", codemods)
    first = _by_name(run([Path(".")], codemods, cache=cache))["agents/learner.py"]
    assert first.new_text == LEARNER_FIXED
    helpers = root / "nets/helpers.py"  # learner.py itself is unchanged
    helpers.write_text(helpers.read_text(encoding="utf-8") + "Variable = lambda x: x\n", encoding="utf-8")
    second = _by_name(run([Path(".")], codemods, cache=cache))["agents/learner.py"]
    assert not second.cached and second.status == "unchanged"
    line = len(helpers.read_text(encoding="utf-8").splitlines())
    assert any(f"assigned at nets/helpers.py:{line}" in f.message for f in second.findings)


@pytest.mark.parametrize(
    ("module", "name", "expected"),
    [
        ("from torch.autograd import Variable\n__all__ = ['Variable']\n", "Variable", "proven"),
        ("import torch.nn as nn\n__all__ = ['helper']\n__all__ += ['nn']\n", "nn", "proven"),
        ("from torch.autograd import Variable\n__all__ = []\n__all__.append('Variable')\n", "Variable", "doubt"),
        ("from torch.autograd import Variable\n\n\ndef reset():\n    global Variable\n    Variable = None\n", "Variable", "doubt"),
        ("import sys\nif sys.argv:\n    import torch\n", "torch", "doubt"),
        ("from torch.autograd import Variable\nglobals()['Variable'] = None\n", "Variable", "doubt"),
        ("from torch.autograd import Variable\nvars()['Variable'] = None\n", "Variable", "doubt"),
        # `vars(args)` reads an object's attributes (`generate(model, **vars(args))`): it binds nothing
        ("import argparse\nfrom torch.autograd import Variable\nargs = argparse.Namespace()\nprint(**vars(args))\n", "Variable", "proven"),
        ("from torch.autograd import Variable\ndel Variable\n", "Variable", "doubt"),
        ("from torch.autograd import Variable as _Variable\n", "_Variable", "absent"),
        ("from torch.autograd import Variable\nfrom tkinter import *\n", "Variable", "doubt"),
        ("from tkinter import *\n", "Variable", "other"),
        ("from torch.autograd import Variable\nfrom math import *\n", "torch", "other"),
        ("class Variable:\n    pass\n", "Variable", "other"),
    ],
)
def test_what_a_star_import_of_a_module_binds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, name: str, expected: str) -> None:
    root = _write(tmp_path / "p", {"lib.py": module, "main.py": "from lib import *\n"})
    monkeypatch.chdir(root)
    stars = resolve_star_imports([Path("main.py"), Path("lib.py")], roots=[Path(".")]).of(Path("main.py"))
    assert stars is not None
    proven, doubts, other = stars.lookup(name, False)
    found = "proven" if proven and not doubts and not other else "doubt" if doubts else "other" if other else "absent"
    assert found == expected, (proven, doubts, other)


@pytest.mark.parametrize(("base", "expected"), [("from torch.autograd import Variable\n", "proven"), ("Variable = None\n", "doubt")])
def test_a_name_a_package_imports_from_its_own_module_is_followed_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: str, expected: str
) -> None:
    files = {"pkg/__init__.py": "from .base import Variable\n", "pkg/base.py": base, "main.py": "from pkg import *\n"}
    root = _write(tmp_path / "p", files)
    monkeypatch.chdir(root)
    stars = resolve_star_imports([Path(name) for name in files], roots=[Path(".")]).of(Path("main.py"))
    assert stars is not None
    proven, doubts, _ = stars.lookup("Variable", False)
    assert ("proven" if proven and not doubts else "doubt" if doubts else "absent") == expected, (proven, doubts)


def test_a_file_that_never_spells_variable_gets_it_fixed_under_another_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefilter looks for ``Variable`` in the text: a file getting it as ``V`` through a
    star import must not be left out by it."""
    files = {"lib.py": "import torch\nfrom torch.autograd import Variable as V\n", "main.py": "from lib import *\n\nx = V(torch.zeros(2))\n"}
    root = _write(tmp_path / "p", files)
    monkeypatch.chdir(root)
    (_, main) = sorted(run([Path(".")], all_codemods()), key=lambda r: str(r.path))
    assert main.new_text == "from lib import *\n\nx = torch.zeros(2)\n"


def test_a_file_that_never_spells_torch_gets_its_module_fixed_and_behaves_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nn`` and ``zeros`` from a star import, and no ``torch`` anywhere in the file: TFD003,
    whose prefilter looks for ``torch``, must still see the factory in ``forward``."""
    net = "from lib import *\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x + zeros(3)\n"
    files = {"lib.py": "import torch.nn as nn\nfrom torch import zeros\n", "net.py": net}
    before = _write(tmp_path / "before", files)
    after = tmp_path / "after"
    shutil.copytree(before, after)
    monkeypatch.chdir(after)
    (_, result) = sorted(run([Path(".")], all_codemods(), options=RunOptions(write=True)), key=lambda r: str(r.path))
    assert result.new_text == net.replace("zeros(3)", "zeros(3, device=x.device)")
    driver = "import sys\nsys.path.insert(0, {root!r})\nimport torch\nfrom net import Net\nout = Net()(torch.ones(3))\nprint(out.device.type)\n"
    records = run_sources([{"source": driver.format(root=str(folder)), "leg": leg} for folder in (before, after) for leg in ("cpu", "gpu")])
    assert [r["error"] for r in records] == [None] * 4, records
    assert records[0]["stdout"] == "cpu\n" and "out" in records[0]["tensors"]  # compared below
    assert compare(records[0], records[2]) == [] and compare(records[1], records[3]) == []


def _notebook(*cells: str) -> str:
    import json

    return json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c} for c in cells],
        "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 2,
    }, indent=1) + "\n"


def test_a_notebook_cell_star_importing_a_module_of_the_project_is_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``from main import *`` in a cell (a notebook driving the project's script): the cells are
    read as one program, as the rewrite reads them, and its star imports are followed."""
    import json

    cells = ("%matplotlib inline\nfrom nets import *\n", "start = Variable(torch.zeros(3))\nprint(float(start.sum()), start.requires_grad)\n")
    files = {**PROJECT, "explore.ipynb": _notebook(*cells), "lost.ipynb": _notebook("from not_here import *\n", "x = Variable(y)\n")}
    before = _write(tmp_path / "before", files)
    after = tmp_path / "after"
    shutil.copytree(before, after)
    monkeypatch.chdir(after)
    results = _by_name(run([Path(".")], all_codemods(), options=RunOptions(write=True)))
    assert results["explore.ipynb"].status == "changed"
    new_cells = ["".join(c["source"]) for c in json.loads((after / "explore.ipynb").read_text(encoding="utf-8"))["cells"]]
    assert new_cells == [cells[0], cells[1].replace("Variable(torch.zeros(3))", "torch.zeros(3)")]
    lost = results["lost.ipynb"]
    assert lost.status == "unchanged" and (after / "lost.ipynb").read_text(encoding="utf-8") == files["lost.ipynb"]
    assert any(f.code == "TFD009" and not f.fixed and "not_here" in f.message for f in lost.findings)
    driver = "import sys\nsys.path.insert(0, {root!r})\nfrom nets import *\n" + cells[1]
    first, second = run_sources([{"source": driver.format(root=str(before)), "leg": "cpu"}, {"source": driver.format(root=str(after)).replace(cells[1], new_cells[1]), "leg": "cpu"}])
    assert first["error"] is None and first["stdout"] == "0.0 False\n" and "start" in first["tensors"]
    assert compare(first, second) == []


FAR_SCRIPT = '''import torch
from helpers import *

nets = [Net(), Net()]
opts = [torch.optim.Adam(net.parameters(), lr=0.1) for net in nets]


def setup(path):
    import torch
    criterion = torch.load(path)
    return criterion


def train(net, data, len=None):
    if torch.cuda.is_available():
        net = net.cuda()
    out = net(data.cuda())
    loss = criterion(out, torch.zeros(3).cuda())
    return loss.data[0] + len


class Runner:
    nets = [n for n in nets]

    def step(self, x):
        total = train(self.nets[0], x)
        return total


for net, opt in zip(nets, opts):
    x = torch.randn(3)
    if torch.cuda.is_available() and len(nets) > [net for net in nets].count(net):
        x = x.cuda()
    loss = train(net, x)
    print(loss.data[0])
'''
"""A script whose star import names nothing known (``helpers`` is not in the run): every name
read at module level may be the star's, and a rule that looks over the whole module (TFD001's
CUDA guards, from ``visit_Module``) asks where names read far from any statement visited are
bound: ``torch`` imported at module level and in a function, ``net`` bound at module level, in
comprehensions and as a parameter, ``len`` a builtin and a parameter, ``nets`` in a class body."""


def test_names_read_far_from_the_visit_need_no_whole_file_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Their bindings come from the analysis of the top-level statement around them alone and
    from the module's skeleton: no scope analysis of the whole file (27 lookups of it before,
    each costing a whole-file analysis per module version: about 2 s on a 10,000-line file)."""
    import torchfix_device.codemods.base as base
    import torchfix_device.syntax.qualified_names as names

    if names.CHECK_FAST_NAMES:
        pytest.skip("TORCHFIX_DEVICE_CHECK_NAMES=1 asks libcst's whole-file answers on purpose")
    _write(tmp_path, {"script.py": FAR_SCRIPT})
    monkeypatch.chdir(tmp_path)
    whole: list[str] = []
    real = base.Codemod.scope_of
    monkeypatch.setattr(base.Codemod, "scope_of", lambda self, node: whole.append(type(self).__name__) or real(self, node))
    [result] = run([Path(".")], all_codemods(), options=RunOptions())
    assert result.status == "changed" and {f.code for f in result.findings} >= {"TFD001", "TFD006"}
    assert whole == []


def test_names_read_far_from_the_visit_are_bound_as_libcst_says(tmp_path: Path) -> None:
    """The same check with every shortcut compared with libcst's whole-file answer
    (``TORCHFIX_DEVICE_CHECK_NAMES=1``, read at import by a fresh interpreter): no answer
    differs (it would raise), and the diff is the same as without the comparison."""
    _write(tmp_path, {"script.py": FAR_SCRIPT})
    diffs = []
    for value in ("1", "0"):
        env = {**os.environ, "TORCHFIX_DEVICE_CHECK_NAMES": value}
        done = subprocess.run(
            [sys.executable, "-m", "torchfix_device", "apply", "--diff", "--no-cache", "."],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )
        assert done.returncode in (0, 1) and "internal error" not in done.stdout + done.stderr, done.stdout + done.stderr
        diffs.append(done.stdout)
    assert diffs[0] == diffs[1] and ".to(device)" in diffs[0]
