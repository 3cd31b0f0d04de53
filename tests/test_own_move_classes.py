"""Issue 21, item 4: a project class with its own ``cuda()``/``to()`` (a rollout storage, a
replay buffer) is not moved with ``.to(device)`` or reassigned: in the same file, across the files
of a run, and through the cache. The programs are executed before and after the tool ran."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import run_cli, run_script
from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.facts.project_classes import classes_with_own_moves

STORAGE = '''import torch


class RolloutStorage(object):
    def __init__(self, steps):
        self.obs = torch.zeros(steps, 4)
        self.moved = False

    def cuda(self):
        self.moved = True
'''

TRAIN = '''import torch
from storage import RolloutStorage


def train():
    rollouts = RolloutStorage(3)
    rollouts.cuda()
    model = torch.nn.Linear(4, 2)
    model.cuda()
    return rollouts, model


if __name__ == "__main__":
    rollouts, model = train()
    print(type(rollouts).__name__, rollouts.moved, next(model.parameters()).device.type)
'''

PRELUDE = (
    "import torch\n"
    "torch.Tensor.cuda = lambda self, *a, **k: self\n"  # no GPU here: record nothing, keep the object
    "torch.nn.Module.cuda = lambda self, *a, **k: self\n"
    "import runpy, sys\nsys.path.insert(0, '.')\nrunpy.run_path('train.py', run_name='__main__')\n"
)


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "storage.py").write_text(STORAGE, encoding="utf-8")
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    return root


def _observe(root: Path) -> subprocess.CompletedProcess:
    observer = root.parent / f"observe_{root.name}.py"  # outside the project the tool rewrites
    observer.write_text(PRELUDE, encoding="utf-8")
    return run_script(str(observer), cwd=root, timeout=300)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    out = run_cli(*args, cwd=cwd)
    return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.decode(), out.stderr.decode())


def test_classes_that_move_themselves_are_collected_over_the_files(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "plain.py").write_text("class Net:\n    def forward(self, x):\n        return x\n", encoding="utf-8")
    (root / "broken.py").write_text("def cuda(:\n", encoding="utf-8")
    assert classes_with_own_moves(sorted(root.glob("*.py"))) == {"RolloutStorage"}


def test_a_class_of_another_file_keeps_its_own_cuda_and_the_program_behaves_the_same(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    before = _observe(root)
    assert before.returncode == 0, before.stderr
    assert before.stdout.split() == ["RolloutStorage", "True", "cpu"]

    applied = _cli("apply", ".", cwd=root)
    assert applied.returncode == 0, applied.stderr
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "    rollouts.cuda()\n" in text  # left as it was, for review
    assert "model.to(device)" in text  # the torch module is still migrated
    assert "may be a `RolloutStorage`, which defines its own `cuda()`" in applied.stderr

    after = _observe(root)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout


def test_what_the_old_rewrite_did_breaks_the_program(tmp_path: Path) -> None:
    """The evidence that the rewrite above must not happen: ``rollouts = rollouts.to(device)``
    on this class raises (it has no ``to``), and ``rollouts = rollouts.cuda()`` makes it None."""
    root = _project(tmp_path / "p")
    wrong = TRAIN.replace("    rollouts.cuda()\n", "    rollouts = rollouts.cuda()\n")
    (root / "train.py").write_text(wrong, encoding="utf-8")
    out = _observe(root)
    assert out.returncode != 0 and "AttributeError" in out.stderr


def test_a_class_gaining_its_own_cuda_changes_the_cached_answer_for_the_other_files(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "pyproject.toml").write_text("[tool.torchfix-device]\n", encoding="utf-8")  # the cache lives here
    (root / "storage.py").write_text(STORAGE.replace("    def cuda(self):\n        self.moved = True\n", ""), encoding="utf-8")
    first = _cli("check", ".", cwd=root)
    assert "train.py:7:5: TFD001" in first.stdout and "manual review" not in first.stdout
    (root / "storage.py").write_text(STORAGE, encoding="utf-8")  # train.py is unchanged
    second = _cli("check", ".", cwd=root)
    line = next(l for l in second.stdout.splitlines() if l.startswith("train.py:7:5: TFD001"))
    assert "may be a `RolloutStorage`" in line and line.endswith("[manual review]"), second.stdout


@pytest.mark.parametrize("unsafe", [False, True])
def test_a_receiver_nothing_shows_is_moved_only_as_an_unsafe_fix(unsafe: bool) -> None:
    code = STORAGE + "\n\ndef place(thing):\n    thing.cuda()\n    return thing\n"
    out = transform_source(code, all_codemods(), options=RunOptions(unsafe_fixes=unsafe))
    moved = "thing = thing.to(device)" in out.text
    assert moved is unsafe
    messages = [f.message for f in out.findings if f.line == 14]
    assert any("unsafe: the run defines `RolloutStorage`" in m for m in messages), messages


SCAN_CASES = {
    "method": "class A:\n    def cuda(self):\n        pass\n",
    "spaced": "class A(Base):\n    def  to (self, *a):\n        return self\n",
    "async_and_decorated": "class A:\n    @staticmethod\n\n    # note\n    async def to(self):\n        pass\n",
    "nested_function_is_not_a_method": "class A:\n    def f(self):\n        def cuda():\n            pass\n",
    "module_function": "def cuda(x):\n    return x\n",
    "under_an_if_in_the_body": "class A:\n    if True:\n        def cuda(self):\n            pass\n",
    "docstring_at_column_0": 'class A:\n    """doc\ntext at column 0\n    """\n    def cuda(self):\n        pass\n',
    "continuation_at_column_0": "class A:\n    x = f(\n1)\n    def to(self):\n        pass\n",
    "multi_line_header": "class A(\n    Base,\n):\n    def cuda(self):\n        pass\n",
    "two_classes": "class A:\n    def total(self):\n        pass\nclass B:\n    def to(self):\n        pass\n",
    "nested_class": "def f():\n    class Inner:\n        def cuda(self):\n            pass\n",
}


@pytest.mark.parametrize("name", sorted(SCAN_CASES))
def test_the_line_scan_finds_every_class_the_parse_finds(name: str) -> None:
    """``classes_in`` scans lines instead of parsing; where a line does not tell, it parses. It
    must never miss a class CPython's ``ast`` sees defining ``cuda``/``to`` in its body."""
    from torchfix_device.facts.project_classes import _parsed_classes, classes_in

    source = SCAN_CASES[name]
    parsed = _parsed_classes(source)
    scanned = classes_in(source)
    assert parsed <= scanned, (parsed, scanned)
    assert scanned - parsed <= {"A"}, scanned  # a string line may only add a class


def test_the_line_scan_agrees_with_the_parse_on_every_fixture() -> None:
    from torchfix_device.facts.project_classes import TEXT_MARKERS, _parsed_classes, classes_in

    compared = 0
    for path in sorted(Path(__file__).parent.joinpath("fixtures").rglob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        if not any(marker in source for marker in TEXT_MARKERS):
            continue
        assert _parsed_classes(source) <= classes_in(source), path
        compared += 1
    assert compared > 0


OTHER_PROJECT = '''import torch


def step(batch):
    batch = batch.cuda()
    return batch * 2
'''


def test_a_folder_of_several_projects_is_fixed_as_one_run_per_project(tmp_path: Path) -> None:
    """Issue 31: one project's class with its own ``cuda()`` casts no doubt on another project's
    moves. A run over the folder holding both writes, byte for byte, what one run per project
    writes."""
    for layout in ("together", "apart"):
        base = tmp_path / layout
        base.mkdir()
        _project(base / "rl")
        other = base / "vision"
        other.mkdir()
        (other / "train.py").write_text(OTHER_PROJECT, encoding="utf-8")
    together = _cli("apply", ".", cwd=tmp_path / "together")
    assert together.returncode == 0, together.stderr
    for name in ("rl", "vision"):
        apart = _cli("apply", ".", cwd=tmp_path / "apart" / name)
        assert apart.returncode == 0, apart.stderr
    compared = 0
    for path in sorted((tmp_path / "apart").rglob("*.py")):
        twin = tmp_path / "together" / path.relative_to(tmp_path / "apart")
        assert twin.read_bytes() == path.read_bytes(), path
        compared += 1
    assert compared == 3
    vision = (tmp_path / "together" / "vision" / "train.py").read_text(encoding="utf-8")
    assert "batch = batch.to(device)" in vision  # a safe fix: nothing in this project moves itself
    assert "    rollouts.cuda()\n" in (tmp_path / "together" / "rl" / "train.py").read_text(encoding="utf-8")


def test_a_class_concerns_only_the_files_that_reach_it_by_import(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "helpers.py").write_text("from storage import RolloutStorage\n", encoding="utf-8")
    (root / "uses_helpers.py").write_text("import helpers\n\n\ndef place(thing):\n    thing = thing.cuda()\n    return thing\n", encoding="utf-8")
    (root / "alone.py").write_text("def place(thing):\n    thing = thing.cuda()\n    return thing\n", encoding="utf-8")
    out = _cli("check", ".", cwd=root)
    lines = {line.split(":")[0]: line for line in out.stdout.splitlines() if "TFD001" in line}
    assert "unsafe" in lines["uses_helpers.py"] and "RolloutStorage" in lines["uses_helpers.py"]  # through helpers.py
    assert "RolloutStorage" not in lines["alone.py"] and "unsafe" not in lines["alone.py"]


SUBCLASSES = '''import torch


class Loss(object):
    def __init__(self):
        self.criterion = torch.nn.NLLLoss()

    def cuda(self):
        self.criterion.cuda()


class NLLLoss(Loss):
    pass
'''

PERPLEXITY = '''from loss import NLLLoss


class Perplexity(NLLLoss):
    pass
'''

USES_PERPLEXITY = '''import torch
from perplexity import Perplexity


def build():
    loss = Perplexity()
    if torch.cuda.is_available():
        loss.cuda()
    return loss
'''


@pytest.mark.parametrize("unsafe", [False, True])
def test_a_subclass_of_a_class_with_its_own_cuda_is_left_for_review(tmp_path: Path, unsafe: bool) -> None:
    """Issue 31: ``loss.cuda()`` on the project's ``Perplexity`` (a subclass, two files away, of a
    ``Loss`` whose ``cuda()`` returns None) was rewritten ``loss = loss.to(device)`` with
    ``--unsafe-fixes``; it is the project's own method: left as it is, for review."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "loss.py").write_text(SUBCLASSES, encoding="utf-8")
    (root / "perplexity.py").write_text(PERPLEXITY, encoding="utf-8")
    (root / "train.py").write_text(USES_PERPLEXITY, encoding="utf-8")
    out = _cli("apply", *(["--unsafe-fixes"] if unsafe else []), ".", cwd=root)
    assert out.returncode == 0, out.stderr
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "        loss.cuda()\n" in text and "loss.to(" not in text
    assert "may be a `Perplexity`" in out.stderr


MODEL = '''import torch


class Seq2seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)
'''

USES_BOTH = '''import torch
from model import Seq2seq
from storage import RolloutStorage


def build():
    net = Seq2seq()
    net.cuda()
    rollouts = RolloutStorage(2)
    rollouts.cuda()
    return net, rollouts
'''


def test_an_instance_of_a_project_class_without_its_own_cuda_is_moved_safely(tmp_path: Path) -> None:
    """Issue 31: where the file reaches a class with its own ``cuda()``, a value built by another
    class of the project (one with no ``cuda()`` of its own) is still no doubt."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "storage.py").write_text(STORAGE, encoding="utf-8")
    (root / "model.py").write_text(MODEL, encoding="utf-8")
    (root / "train.py").write_text(USES_BOTH, encoding="utf-8")
    out = _cli("apply", ".", cwd=root)
    assert out.returncode == 0, out.stderr
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "    net = net.to(device)\n" in text or "    net.to(device)\n" in text
    assert "    rollouts.cuda()\n" in text


def test_statements_are_the_statements_ast_walk_gives_in_its_order() -> None:
    """The run-level facts look for imports and classes among ``statements(tree)`` only: they are
    exactly the statements, ``except`` clauses and ``case`` blocks ``ast.walk`` gives, in its
    order, on every fixture and source file and on nestings the fixtures may lack."""
    import ast

    from conftest import FIXTURES, ROOT
    from torchfix_device.facts.project_classes import statements

    nested = (
        "import a\nclass C:\n    import b\n    def f(self):\n        from . import c\n        class D: pass\n"
        "try:\n    import d\nexcept ImportError as e:\n    import e\nelse:\n    pass\nfinally:\n    import f\n"
        "match x:\n    case 1:\n        import g\n    case _:\n        pass\n"
        "async def h():\n    async with a as b:\n        import i\n    async for j in k:\n        pass\n    else:\n        import l\n"
        "while x:\n    if y:\n        import m\n    elif z:\n        import n\nwith o:\n    import p\nf = lambda: (yield)\n"
    )
    trees = [ast.parse(nested)]
    for path in sorted([*FIXTURES.rglob("*.py"), *(ROOT / "src").rglob("*.py")]):
        try:
            trees.append(ast.parse(path.read_bytes()))
        except SyntaxError:
            continue  # a token-pass input: not Python 3
    kinds = (ast.stmt, ast.excepthandler, ast.match_case)
    for tree in trees:
        assert list(statements(tree)) == [n for n in ast.walk(tree) if isinstance(n, kinds)]
    assert sum(isinstance(n, (ast.Import, ast.ImportFrom)) for n in statements(trees[0])) == 12


READER = '''import torch


class DocReader(object):
    def __init__(self, size):
        self.network = torch.nn.Linear(size, 2)
        self.moved = False

    def cuda(self):
        self.network = self.network.cuda()
        self.moved = True

    @staticmethod
    def load(size):
        return DocReader(size)

    @staticmethod
    def load_checkpoint(size):
        return DocReader(size), 3
'''

USES_READER = '''import sys

import torch
from reader import DocReader


def init_from_scratch(size):
    model = DocReader(size)
    return model


def main(how):
    if how == "load":
        model = DocReader.load(4)
    elif how == "checkpoint":
        model, epoch = DocReader.load_checkpoint(4)
    else:
        model = init_from_scratch(4)
    if torch.cuda.is_available() or True:
        model.cuda()
    print(type(model).__name__, model.moved)


class Pipeline(object):
    def __init__(self):
        self.reader = DocReader.load(4)
        self.reader.cuda()


if __name__ == "__main__":
    main(sys.argv[1])
    print(Pipeline().reader.moved)
'''

OBSERVE_READER = (
    "import torch, runpy, sys\n"
    "torch.nn.Module.cuda = lambda self, *a, **k: self\n"  # no GPU here: keep the module
    "sys.path.insert(0, '.')\n"
    "for how in ('load', 'checkpoint', 'scratch'):\n"
    "    sys.argv = ['train.py', how]\n"
    "    try:\n"
    "        runpy.run_path('train.py', run_name='__main__')\n"
    "    except Exception as error:\n"
    "        print(how, type(error).__name__)\n"
)


@pytest.mark.parametrize("unsafe", [False, True])
def test_what_a_class_or_a_function_builds_is_an_instance_of_it(tmp_path: Path, unsafe: bool) -> None:
    """Issue 31: a receiver bound to what the class's own function returns
    (``DocReader.load(...)``, a part of ``DocReader.load_checkpoint(...)``), or to what a function
    of the file returns that builds it (``init_from_scratch``), may be an instance of the class
    with its own ``cuda()``: its move is left for review, with ``--unsafe-fixes`` too (it was
    rewritten ``model = model.to(device)`` there: AttributeError, the class has no ``to``)."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "reader.py").write_text(READER, encoding="utf-8")
    (root / "train.py").write_text(USES_READER, encoding="utf-8")
    observer = tmp_path / "observe.py"
    observer.write_text(OBSERVE_READER, encoding="utf-8")
    before = run_script(str(observer), cwd=root, timeout=300)
    assert before.returncode == 0, before.stderr
    assert before.stdout.split() == ["DocReader", "True", "True"] * 3

    out = _cli("apply", *(["--unsafe-fixes"] if unsafe else []), ".", cwd=root)
    assert out.returncode == 0, out.stderr
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "        model.cuda()\n" in text and "        self.reader.cuda()\n" in text
    assert ".to(" not in text
    assert out.stderr.count("may be a `DocReader`") >= 2, out.stderr
    after = run_script(str(observer), cwd=root, timeout=300)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout


LOCAL_BUILDERS = STORAGE + '''

def make_net():
    net = torch.nn.Linear(4, 2)
    return net


def make_storage():
    storage = RolloutStorage(2)
    return storage


def main():
    net = make_net()
    net.cuda()
    rollouts = make_storage()
    rollouts.cuda()
'''


def test_what_a_function_of_the_file_returns_is_asked_of_its_returns() -> None:
    """The returns of a function of the file decide for its calls: a torch layer is moved as a
    safe fix where the run defines a class with its own ``cuda()``; an instance of that class
    is left for review. The scope of a name counts (``net`` there is not ``net`` here)."""
    out = transform_source(LOCAL_BUILDERS, all_codemods(), options=RunOptions(unsafe_fixes=True))
    assert "    net = net.to(device)\n" in out.text
    assert "    rollouts.cuda()\n" in out.text
    net_line = next(f for f in out.findings if f.code == "TFD001" and "`net.cuda()`" in f.message)
    assert "unsafe" not in net_line.message and net_line.fixed and not net_line.unsafe


SIGNATURES = {
    "self_only": ("class A(object):\n    def cuda(self):\n        self.on = True\n", {"A"}),
    "a_device_parameter": ("class A(object):\n    def cuda(self, device=None):\n        pass\n", set()),
    "star_args": ("class A(object):\n    def cuda(self, *args, **kwargs):\n        pass\n", set()),
    "keyword_only": ("class A(object):\n    def cuda(self, *, sync=False):\n        pass\n", set()),
    "decorated": ("class A(object):\n    @wrap\n    def cuda(self):\n        pass\n", set()),
    "with_its_own_to": ("class A(object):\n    def cuda(self):\n        pass\n    def to(self, d):\n        pass\n", set()),
    "rebound_after": ("class A(object):\n    def cuda(self):\n        pass\n    cuda = other\n", set()),
    "redefined_taking_more": ("class A(object):\n    def cuda(self):\n        pass\n    def cuda(self, d):\n        pass\n", set()),
    "under_an_if": ("class A(object):\n    if X:\n        def cuda(self):\n            pass\n", set()),
    "two_classes": ("class A:\n    def cuda(self):\n        pass\nclass B:\n    def cuda(self, i):\n        pass\n", {"A"}),
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_a_cuda_taking_nothing_is_read_from_the_class_body(name: str) -> None:
    from torchfix_device.facts.project_classes import cuda_taking_nothing

    source, expected = SIGNATURES[name]
    assert cuda_taking_nothing(source) == expected


PLAIN_READER = '''class Reader(object):
    def __init__(self):
        self.on_gpu = False

    def cuda(self):
        self.on_gpu = True
'''

PLAIN_READER_TRAIN = '''import torch
from reader import Reader


def step(batch):
    batch = batch.cuda(non_blocking=True)
    return batch * 2


def place(thing):
    thing = thing.cuda()
    return thing


if __name__ == "__main__":
    reader = Reader()
    reader.cuda()
    print(step(torch.ones(3)).sum().item(), place(torch.ones(2)).sum().item(), reader.on_gpu)
'''


def _reader_project(root: Path, reader: str = PLAIN_READER) -> Path:
    root.mkdir()
    (root / "reader.py").write_text(reader, encoding="utf-8")
    (root / "train.py").write_text(PLAIN_READER_TRAIN, encoding="utf-8")
    return root


def test_a_move_with_arguments_is_not_the_cuda_of_a_class_whose_cuda_takes_nothing(tmp_path: Path) -> None:
    """DrQA: ``e.cuda(async=True)`` in a run defining ``DocReader.cuda(self)``: on an instance of
    that class the call raises TypeError, so it is a tensor's or a module's move, a safe fix; a
    ``.cuda()`` without arguments may still be the class's own (unsafe), and the class's own
    instance keeps its move. The program runs as before."""
    root = _reader_project(tmp_path / "p")
    before = _observe(root)
    assert before.returncode == 0, before.stderr
    assert before.stdout.split() == ["6.0", "2.0", "True"]

    applied = _cli("apply", ".", cwd=root)
    assert applied.returncode == 0, applied.stderr
    text = (root / "train.py").read_text(encoding="utf-8")
    assert "    batch = batch.to(device, non_blocking=True)\n" in text
    assert "    thing = thing.cuda()\n" in text  # may be a Reader: --unsafe-fixes only
    assert "    reader.cuda()\n" in text  # the class's own move: left for review
    after = _observe(root)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout


def test_the_legacy_async_keyword_is_an_argument_too() -> None:
    code = PLAIN_READER + "\n\ndef step(batch):\n    batch = batch.cuda(async=True)\n    return batch\n"
    out = transform_source(code, all_codemods(), options=RunOptions(unsafe_fixes=False))
    assert "batch = batch.to(device, non_blocking=True)" in out.text
    bare = transform_source(code.replace("batch.cuda(async=True)", "batch.cuda()"), all_codemods(), options=RunOptions(unsafe_fixes=False))
    assert "batch = batch.cuda()" in bare.text
    assert any("unsafe: the run defines `Reader`" in f.message for f in bare.findings)


@pytest.mark.parametrize("other", [
    "class Reader(object):\n    def cuda(self, device=None):\n        pass\n",  # the same name, taking an argument
    "from reader import Reader\n\n\nclass Sub(Reader):\n    pass\n",  # inherits its move: not read here
])
def test_a_class_that_may_take_the_arguments_keeps_the_doubt(tmp_path: Path, other: str) -> None:
    root = _reader_project(tmp_path / "p")
    (root / "other.py").write_text(other, encoding="utf-8")
    (root / "train.py").write_text(PLAIN_READER_TRAIN.replace("from reader import Reader\n", "from reader import Reader\nimport other\n"), encoding="utf-8")
    out = _cli("check", ".", cwd=root)
    line = next(l for l in out.stdout.splitlines() if l.startswith("train.py:7:13: TFD001"))
    assert "unsafe: the run defines" in line, out.stdout
