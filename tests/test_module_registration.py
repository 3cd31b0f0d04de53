"""TFD004 (layer containers) and TFD007 (tensor attributes) beyond their fixtures: the rewritten
models really register their state, the checkpoint notes, and the torch facts the codemods
hard-code."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import pytest

from conftest import sweep_sample
from torchfix_device.options import RunOptions
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.codemods.unregistered_layer_container import rule as tfd004
from torchfix_device.torch_api import DICT_CONTAINER_ATTRS, NN_MODULE_ATTRS
from torchfix_device.codemods.tensor_attribute_not_buffer import TensorAttributeNotBuffer
from torchfix_device.codemods.unregistered_layer_container import UnregisteredLayerContainer
from torchfix_device.engine import transform_source

torch = pytest.importorskip("torch")
nn = torch.nn

SEED003 = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class BasicBlock(nn.Module):
        def __init__(self, channels):
            super(BasicBlock, self).__init__()
            self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
            self.bn = nn.BatchNorm2d(channels)

        def forward(self, x):
            return F.relu(self.bn(self.conv(x)) + x)


    class ResNet(nn.Module):
        def __init__(self, n_blocks=3):
            super(ResNet, self).__init__()
            self.stem = nn.Conv2d(3, 8, kernel_size=3, padding=1)
            self.blocks = [BasicBlock(8) for _ in range(n_blocks)]
            self.fc = nn.Linear(8, 2)

        def forward(self, x):
            x = F.relu(self.stem(x))
            for b in self.blocks:
                x = b(x)
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
    """
)

ATTENTION = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Masked(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.proj = nn.Linear(n, n)
            self.mask = torch.tril(torch.ones(n, n))

        def forward(self, x):
            return self.proj(x) @ self.mask
    """
)


def _build(source: str, cls: str, *args):
    scope: dict = {"__name__": "fixture_model"}
    exec(compile(source, f"<{cls}>", "exec"), scope)
    torch.manual_seed(0)
    return scope[cls](*args)


# -- TFD004 ---------------------------------------------------------------------------------------
def test_seed003_rewrite_registers_the_blocks() -> None:
    output = transform_source(SEED003, [UnregisteredLayerContainer])
    assert "self.blocks = nn.ModuleList([BasicBlock(8) for _ in range(n_blocks)])" in output.text

    before = _build(SEED003, "ResNet")
    after = _build(output.text, "ResNet")
    # stem (weight, bias) + fc (weight, bias): the blocks' conv and bn weights are missing before
    assert len(list(before.parameters())) == 4
    assert len(list(after.parameters())) == 4 + 3 * 4
    optimizer = torch.optim.SGD(after.parameters(), lr=0.1)
    seen = {id(p) for group in optimizer.param_groups for p in group["params"]}
    for block in after.blocks:
        assert all(id(p) in seen for p in block.parameters())
    assert any(k.startswith("blocks.0.conv.") for k in after.state_dict())

    # .to() now moves the blocks (meta stands in for a second device)
    before.to("meta")
    after.to("meta")
    assert before.blocks[0].conv.weight.device.type == "cpu"
    assert all(p.device.type == "meta" for p in after.parameters())

    # same numbers on the CPU: the rewrite only registers the layers
    x = torch.randn(2, 3, 6, 6)
    before, after = _build(SEED003, "ResNet"), _build(output.text, "ResNet")
    before.eval()
    after.eval()
    for b in before.blocks:
        b.eval()
    assert torch.allclose(before(x), after(x))


def test_checkpoint_note_and_the_caveat_it_describes() -> None:
    output = transform_source(SEED003, [UnregisteredLayerContainer])
    assert output.notes == [
        "TFD004: ResNet.blocks is now registered: state_dict() gains keys 'blocks.*'; checkpoints saved "
        "before this rewrite need load_state_dict(..., strict=False) or a key migration"
    ]
    old_checkpoint = _build(SEED003, "ResNet").state_dict()
    model = _build(output.text, "ResNet")
    with pytest.raises(RuntimeError, match="Missing key"):
        model.load_state_dict(old_checkpoint)
    result = model.load_state_dict(old_checkpoint, strict=False)
    assert result.missing_keys and all(k.startswith("blocks.") for k in result.missing_keys)
    assert not result.unexpected_keys


def test_no_note_when_nothing_is_rewritten_and_notes_not_repeated_across_passes() -> None:
    assert transform_source("import torch\nx = [1, 2]\n", [UnregisteredLayerContainer]).notes == []
    output = transform_source(SEED003, all_codemods())
    assert sum("ResNet.blocks" in n for n in output.notes) == 1


def test_held_back_fix_adds_no_note() -> None:
    source = textwrap.dedent(
        """\
        import torch.nn as nn

        class Router(nn.Module):
            def __init__(self, names):
                super().__init__()
                self.routes = {name: nn.Linear(2, 2) for name in names}
        """
    )
    held = transform_source(source, [UnregisteredLayerContainer])
    assert held.text == source and held.notes == [] and [f.kind for f in held.findings] == ["unsafe-fix"]
    applied = transform_source(source, [UnregisteredLayerContainer], options=RunOptions(unsafe_fixes=True))
    assert "nn.ModuleDict({name: nn.Linear(2, 2) for name in names})" in applied.text
    assert len(applied.notes) == 1


def test_appends_stay_valid_on_the_containers() -> None:
    source = textwrap.dedent(
        """\
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = []
                for _ in range(2):
                    self.blocks.append(nn.Linear(2, 2))
                self.blocks += [nn.Linear(2, 2)]
                self.blocks.extend([nn.ReLU()])
                self.blocks.insert(0, nn.Identity())
                self.heads = {}
                self.heads["a"] = nn.Linear(2, 1)
                self.heads.update({"b": nn.Linear(2, 1)})
        """
    )
    output = transform_source(source, [UnregisteredLayerContainer])
    assert "self.blocks = nn.ModuleList()" in output.text and "self.heads = nn.ModuleDict()" in output.text
    model = _build(output.text, "Net")
    assert isinstance(model.blocks, nn.ModuleList) and len(model.blocks) == 5
    assert sorted(model.heads.keys()) == ["a", "b"]
    assert len(list(model.parameters())) == 2 * 3 + 2 * 2


def test_added_import_for_a_file_without_nn() -> None:
    source = "from torch.nn import Linear, Module\n\nclass M(Module):\n    def __init__(self):\n        super().__init__()\n        self.layers = [Linear(2, 2)]\n"
    output = transform_source(source, [UnregisteredLayerContainer])
    assert "ModuleList" in output.text.splitlines()[0]
    assert "self.layers = ModuleList([Linear(2, 2)])" in output.text
    assert len(list(_build(output.text, "M").parameters())) == 2


def test_triggers_are_necessary() -> None:
    """No match is possible without an import resolving to torch: a file without ``torch`` is
    never parsed, and the same code with torch imported under another spelling still matches."""
    assert UnregisteredLayerContainer.triggers == ("torch",)
    assert TensorAttributeNotBuffer.triggers == ("torch",)
    source = "from torch import nn as tnn\n\nclass M(tnn.Module):\n    def __init__(self):\n        super().__init__()\n        self.l = [tnn.Linear(1, 1)]\n"
    assert "tnn.ModuleList([tnn.Linear(1, 1)])" in transform_source(source, [UnregisteredLayerContainer]).text


# -- torch facts the codemods hard-code -------------------------------------------------------------
def _public(names) -> set[str]:
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def test_unsupported_methods_match_torch() -> None:
    pairs = {"ModuleList": list, "ModuleDict": dict, "ParameterList": list, "ParameterDict": dict}
    for container, builtin in pairs.items():
        missing = _public(dir(builtin)) - _public(dir(getattr(nn, container)))
        assert missing <= tfd004.UNSUPPORTED_METHODS[container], (container, missing)
        for method in tfd004.UNSUPPORTED_METHODS[container]:
            assert not hasattr(getattr(nn, container), method), (container, method)


def test_module_attribute_names_match_torch() -> None:
    assert _public(dir(nn.Module())) <= NN_MODULE_ATTRS
    assert _public(dir(nn.ModuleDict())) | _public(dir(nn.ParameterDict())) <= NN_MODULE_ATTRS | DICT_CONTAINER_ATTRS


def test_torch_nn_capitalised_names_that_are_not_modules() -> None:
    for name in dir(nn):
        obj = getattr(nn, name)
        if not name[:1].isupper() or not inspect.isclass(obj) or issubclass(obj, nn.Module):
            continue
        assert name in tfd004.NN_NON_MODULE_CLASSES | tfd004.NN_PARAMETER_CLASSES, name
    assert issubclass(nn.Parameter, torch.Tensor) and issubclass(nn.UninitializedParameter, nn.Parameter)


# -- TFD007 ---------------------------------------------------------------------------------------
def test_tensor_attribute_becomes_a_buffer_that_moves() -> None:
    output = transform_source(ATTENTION, [TensorAttributeNotBuffer])
    assert 'self.register_buffer("mask", torch.tril(torch.ones(n, n)), persistent=False)' in output.text
    assert output.notes == []  # non-persistent: state_dict keys unchanged
    before, after = _build(ATTENTION, "Masked", 3), _build(output.text, "Masked", 3)
    assert set(before.state_dict()) == set(after.state_dict())
    after.load_state_dict(before.state_dict())  # strict=True still works for old checkpoints
    x = torch.randn(2, 3)
    assert torch.allclose(before(x), after(x))
    before.to("meta")
    after.to("meta")
    assert before.mask.device.type == "cpu"
    assert after.mask.device.type == "meta"
    after.mask = torch.zeros(3, 3)  # a later assignment of a tensor updates the buffer
    assert "mask" in dict(after.named_buffers())


def test_tensor_attribute_rewrite_is_idempotent_and_survives_all_codemods() -> None:
    first = transform_source(ATTENTION, all_codemods())
    assert 'register_buffer("mask"' in first.text
    assert transform_source(first.text, all_codemods()).text == first.text


# -- the CLI renders the documentation --------------------------------------------------------------
@pytest.mark.parametrize("code", ["TFD004", "TFD007", "unregistered-layer-container", "tensor-attribute-not-buffer"])
def test_explain_renders(cli, code) -> None:
    result = cli("explain", code)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    for heading in ("What it does", "Why is this bad?", "Example", "Use instead", "Not rewritten", "Fix safety"):
        assert heading in text


@pytest.mark.sweep
def test_names_bound_by_agrees_with_binding_of() -> None:
    """``names_bound_by(node)`` lists exactly the names for which ``binding_of(node, name)`` is
    not None, on every node of every fixture (plus binding forms the fixtures may lack)."""
    from pathlib import Path

    import libcst as cst
    from torchfix_device.syntax.bindings import binding_of, names_bound_by

    extra = (
        "a = b = f()\n(a, [b, *c]), d = x\ne: int\ng: int = 1\nh += 1\ni[0] = 1\nfor j, (k, l) in y: pass\n"
        "with open(p) as (m, n), q: pass\nglobal o\nimport os.path, numpy as np\nfrom x import y as z, w\n"
        "from x import *\nif (t := 3): pass\nu = [v for v in range(3)]\nasync def f():\n    async with a as b: pass\n"
    )
    modules = [cst.parse_module(extra)]
    for path in sweep_sample(Path(__file__).parent.joinpath("fixtures").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        try:
            compile(text, str(path), "exec")
        except SyntaxError:
            continue  # an input of the token pass (`.cuda(async=True)`): not Python 3
        modules.append(cst.parse_module(text))
    checked = 0
    for module in modules:
        spelt = {n.value for n in traversal.walk(module) if isinstance(n, cst.Name)} | {"os", "np", "z", "w", "y"}
        for node in traversal.walk(module):
            bound = set(names_bound_by(node))
            assert bound <= spelt, (node, bound - spelt)
            assert bound == {name for name in spelt if binding_of(node, name) is not None}, nodes.code_of(node)
            checked += bool(bound)
    assert checked > 500


def test_scopes_and_methods_found_in_one_pass_match_climbing_the_parents(monkeypatch) -> None:
    """TFD004 learns the function and method around every node of a class while walking it;
    the answers are those of climbing the parent links, on every class of every fixture."""
    from pathlib import Path

    import libcst

    from torchfix_device.codemods.unregistered_layer_container.containers import ContainerFinder
    from torchfix_device.engine import transform_unfiltered

    checked = []
    real = ContainerFinder.find

    def climb(codemod, node):
        """The innermost function (None when a lambda comes first) and the outermost one above
        ``node``, found by following the parent links up to the class."""
        innermost, outermost, settled = None, None, False
        current = codemod._parents.get(id(node))
        while current is not None:
            if not settled and isinstance(current, (libcst.Lambda, libcst.FunctionDef)):
                innermost = current if isinstance(current, libcst.FunctionDef) else None
                settled = True
            if isinstance(current, libcst.FunctionDef):
                outermost = current
            current = codemod._parents.get(id(current))
        return innermost, outermost

    def checking(self, cls):
        found = real(self, cls)
        for node_id, parent in self._parents.items():
            node = next(n for n in _cst_children(parent) if id(n) == node_id)
            assert (self._scope_of(node), self._method_of(node)) == climb(self, node)
            checked.append(node_id)
        return found

    monkeypatch.setattr(ContainerFinder, "find", checking)
    extra = (
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        f = lambda x: [y for y in x]\n        def g():\n            def h():\n                self.a = []\n"
        "            return h\n        self.b = [nn.Linear(1, 1)]\n    x = [1]\n"
    )
    sources = [extra] + [p.read_text(encoding="utf-8") for p in sorted(Path(__file__).parent.joinpath("fixtures").rglob("*.py"))]
    for source in sources:
        try:
            compile(source, "fixture", "exec", dont_inherit=True)
        except SyntaxError:
            continue  # fixtures that are not Python 3 are other tests' business
        transform_unfiltered(source, [UnregisteredLayerContainer])
    assert len(checked) > 5000


def _cst_children(node):

    return traversal.children(node)


def test_a_state_made_on_the_gpu_in_init_becomes_a_buffer_that_follows_the_module(monkeypatch) -> None:
    """The fixture ``initial_state_on_cuda``, executed: ``.cuda()`` stands for a move to the
    ``meta`` device (no GPU here). Before, the state sits on that device whatever the module
    does; after, it is a buffer on the module's device: the same outputs on the CPU (with
    ``.cuda()`` a no-op, the original's CPU run), the same ``state_dict`` keys, and it goes
    where the module goes."""
    folder = Path(__file__).parent / "fixtures" / "tensor_attribute_not_buffer"
    before_text = (folder / "initial_state_on_cuda.in.py").read_text(encoding="utf-8")
    after_text = (folder / "initial_state_on_cuda.out.py").read_text(encoding="utf-8")
    output = transform_source(before_text, all_codemods())
    assert output.text.count("register_buffer") == 2
    reviews = {(f.code, f.line) for f in output.findings if not f.fixed}
    state, weights_line = (before_text.splitlines().index(line) + 1 for line in (
        "        self.init_state = torch.FloatTensor(2, batch,", "        self.w = torch.ones(n).cuda()"))
    assert ("TFD001", state) not in reviews  # the `.cuda()` TFD007 removed is no review item
    assert ("TFD001", weights_line) in reviews  # the one it keeps still is
    x = torch.randn(4, 3, 5)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    before, after = _build(before_text, "Encoder", 5, 3), _build(after_text, "Encoder", 5, 3)
    after.load_state_dict(before.state_dict())  # strict: the same keys
    assert torch.allclose(before(x), after(x))
    assert torch.allclose(before(x[:, :2]), after(x[:, :2]))  # a state renewed for another batch
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self.to("meta"))
    before, after = _build(before_text, "Encoder", 5, 3), _build(after_text, "Encoder", 5, 3)
    assert before.init_state.device.type == "meta"  # on "the GPU" while the module is not
    with pytest.raises(RuntimeError):
        before(x)
    assert after.init_state.device.type == "cpu" and after(x).shape == (3, 10)
    after.to("meta")
    assert after.init_state.device.type == "meta" and "init_state" in dict(after.named_buffers())
    weights = _build(after_text, "Weights", 3)
    assert weights.w.device.type == "meta"  # no layer of its own: its `.cuda()` is kept
