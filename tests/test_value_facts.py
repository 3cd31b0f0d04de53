"""Issue 32's facts about values, asked directly: dimensions (``facts.dims``), a PyTorch 0.3
number (``facts.sizes.number_in_03``), how a value is used (``facts.uses``), tensors shown by
their values or methods (``facts.kinds``), and whether a value may be on the device
(``facts.devices``). Each question is put with ``probe(<expression>)`` in a small module; the
answers come from a codemod of the base class (libcst's exact names), run on its own."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from torchfix_device.codemods.base import Codemod
from torchfix_device.facts import devices, dims, kinds, sizes, stores, uses
from torchfix_device.facts import returns as _returns  # noqa: F401 - installs what calls of the project give
from torchfix_device.facts import values as facts_values
from torchfix_device.syntax import nodes, traversal


class _Probe(Codemod):
    """No ``code``: not registered, never run by the engine."""

    question = staticmethod(lambda values, expr: None)

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        values = facts_values.of(self)
        self.answers = [
            self.question(values, n.args[0].value)
            for n in traversal.walk(node)
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "probe"
        ]
        return False


def ask(source: str, question) -> list:  # noqa: ANN001
    probe = _Probe(CodemodContext())
    probe.question = question
    probe.transform_module(cst.parse_module(source))
    assert probe.answers, "the source asks nothing"
    return probe.answers


HEADER = """
import json
import gym
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
"""


# -- dims -------------------------------------------------------------------------------------
def test_dims_follow_factories_layers_reductions_and_indexing() -> None:
    source = HEADER + textwrap.dedent("""
    model = nn.Linear(4, 3)
    x = Variable(torch.randn(5, 4))
    scores = model(x)
    _, pred = torch.max(scores, 1)
    seq = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    for _ in range(2):
        seq = seq.cuda()
    emb = nn.Embedding(10, 3)
    probe(x); probe(scores.data); probe(torch.max(scores.data, 1)[1]); probe(torch.max(scores.data, 1)[1][0])
    probe(pred); probe(pred == x.sum(1)); probe(x.view(-1)); probe(torch.multinomial(x.view(-1).exp(), 1))
    probe(x.sum(1, keepdim=True)); probe(x.max(0)[1]); probe(x[0]); probe(x[:, 0]); probe(x.sum())
    probe(seq(torch.randn(2, 8))); probe(emb(torch.LongTensor([1, 2]))); probe(torch.tensor([[1, 2]]))
    probe(torch.LongTensor(48).random_(0, 3)); probe(torch.zeros((2, 3, 4))); probe(x.unsqueeze(0) * 2.0)
    """)
    answers = ask(source, dims.dims)
    assert answers == [2, 2, 1, 0, 1, 1, 1, 1, 2, 1, 1, 1, 0, 2, 2, 2, 1, 3, 3]


def test_dims_not_shown() -> None:
    source = HEADER + textwrap.dedent("""
    def f(x, model, n):
        probe(x); probe(model(torch.randn(2, 3))); probe(torch.randn(3).squeeze()); probe(torch.zeros(n))
        probe(torch.from_numpy(np.zeros(3))); probe(torch.max(x, 1)[1])
        lstm = nn.LSTM(3, 3)
        probe(lstm(torch.randn(2, 3)))
    """)
    assert ask(source, dims.dims) == [None] * 7


def test_sizes_beside_another_and_indices_a_range_gives() -> None:
    """Two or more sizes can only be numbers (``x.view(b, self.k)``: 2, whatever ``self.k``); one
    must be shown a number; a ``for`` over ``range(...)`` and ``int(...)`` give integers, so an
    index by them takes a dimension off (IBM seq2seq's ``re_sorted_idx[b_idx, :]``)."""
    source = HEADER + textwrap.dedent("""
    def f(x, b, k, n, shape):
        y = x.view(b, k)
        s, order = y.topk(k)
        probe(y); probe(torch.zeros(n, k)); probe(s); probe(x.view(n)); probe(x.view(shape)); probe(torch.zeros(n))
        for i in range(b):
            probe(order[i, :]); probe(order[int(n / 2)])
            for j in order[i, :]:
                probe(j)
        for i in [0, shape]:
            probe(order[i])
        i = 0 if b else shape
        probe(order[i])
        for i, row in enumerate(order):
            probe(order[i]); probe(row)
        for (i, row) in [(0, order)]:
            probe(order[i])
    """)
    assert ask(source, dims.dims) == [2, 2, 2, None, None, None, 1, 1, 0, None, None, 1, None, None]


def test_a_name_reshaped_in_place_shows_no_dimensions() -> None:
    source = HEADER + textwrap.dedent("""
    x = torch.randn(4, 3)
    _, idx = x.max(1, keepdim=True)
    idx.squeeze_(1)
    y = torch.randn(3)
    alias = y
    alias.unsqueeze_(0)
    z = torch.zeros(2, 3)
    z.t_()
    probe(x); probe(idx); probe(y); probe(z); probe(x.max(1, keepdim=True)[1])
    a = torch.randn(3)
    b = a
    c = b
    a = c
    c.unsqueeze_(0)
    probe(a); probe(b)
    u = torch.randn(1, 3)
    v = u
    u.squeeze_(0)
    probe(v)
    """)
    assert ask(source, dims.dims) == [2, None, None, 2, 2, None, None, None]


# -- a Python number in 0.3 -------------------------------------------------------------------
def _number(values, expr):  # noqa: ANN001
    found = sizes.number_in_03(values, expr)
    return None if found is None else (found.zero_dim, found.data)


def test_number_in_03_full_reductions_and_elements() -> None:
    source = HEADER + textwrap.dedent("""
    x = torch.randn(5, 4)
    def f(q, p, arr, loss_fn, y):
        _, pred = torch.max(x, 1)
        probe(pred.eq(y).sum()); probe((pred == y).sum()); probe(torch.sum(x)); probe(x.max())
        probe(torch.max(x, 1)[1][0]); probe(q.max(1)[1].data[0]); probe(torch.multinomial(p, 1)[0]); probe(pred[0])
        probe(arr.sum()); probe(x[0]); probe(x.sum(1)); probe(torch.nn.functional.mse_loss(x, x).data[0])
        probe(y.cpu().sum())
    """)
    assert ask(source, _number) == [
        (True, False), (True, False), (True, False), (True, False),
        (True, False), (False, True), (False, False), (True, False),
        None, None, None, None,
        (True, False),
    ]


def test_method_evidence_needs_torch_alone() -> None:
    source = "import torch\nimport pandas as pd\ndef f(y):\n    probe(y.cpu().sum())\n"
    assert ask(source, _number) == [None]


# -- uses -------------------------------------------------------------------------------------
def _uses(values, expr):  # noqa: ANN001
    return sorted({p.use.name for p in uses.uses_of(values, expr)})


def test_uses_follow_names_counters_returns_and_containers() -> None:
    source = HEADER + textwrap.dedent("""
    classes = {0: "cat"}
    env = gym.make("CartPole-v0")
    def evaluate(x, items, lookup):
        best = probe(x.sum())
        classes[best]
        correct = 0
        correct += probe(x.sum())
        print("%.2f" % (100. * correct / 4), f"{correct}", float(correct) > 1)
        json.dumps({"n": probe(x.sum())})
        env.step(probe(x.sum()))
        lookup[probe(x.sum())]
        items[probe(x.sum())] if isinstance(items, list) else None
        probe(x.sum()).backward()
        total = torch.zeros(1)
        total += probe(x.sum())
        return probe(x.sum()) / 2
    def caller(x):
        print(evaluate(x, [], {}))
    """)
    found = ask(source, lambda values, expr: _uses(values, values.parent(values.parent(expr))))
    assert found == [
        ["KEY"], ["COUNTER", "NUMBER"], ["JSON"], ["ACTION"], ["INDEX"], ["INDEX"], ["TENSOR"], ["TENSOR"], ["NUMBER"],
    ]


def test_written_in_place() -> None:
    source = HEADER + textwrap.dedent("""
    def f(t, u):
        a = probe(t.numpy())
        a[0] = 1
        b = probe(u.numpy())
        b += 1
        c = probe(u.numpy())
        c.fill(0)
        probe(t.numpy())[1] = 2
        d = probe(t.numpy())
        print(d[0], np.mean(d))
    """)
    def written(values, expr):  # noqa: ANN001
        return stores.written_in_place(values, values.parent(values.parent(expr))) is not None

    assert ask(source, written) == [True, True, True, True, False]


# -- tensors ------------------------------------------------------------------------------------
def test_is_tensor_through_pairs_comparisons_layers_and_data() -> None:
    source = HEADER + textwrap.dedent("""
    model = nn.Linear(4, 3).cuda()
    x = torch.randn(5, 4)
    _, pred = torch.max(x, 1)
    def f(out, y):
        probe(pred); probe(pred == y); probe(torch.max(out, 1)[1]); probe(model(out)); probe(x.data)
        probe(out); probe(out == None); probe(model)
        probe(x if out else pred); probe(x if out else out)
    """)
    assert ask(source, kinds.is_tensor) == [True, True, True, True, True, False, False, False, True, False]


def test_a_method_only_tensors_have_gives_a_tensor_of_any_receiver() -> None:
    """``out.eq(y)`` succeeds only on a tensor: a tensor, even of a parameter, and what tensor
    methods make of it; not where another array library (pandas has ``.eq``) or a class of the
    file has the method (the others still show it), nor a method NumPy arrays have too (``.view``,
    ``.sum``) or modules have too (``.cuda()``)."""
    body = textwrap.dedent("""
    def f(out, y):
        probe(out.eq(y)); probe(out.data.ne(0).masked_select(y).long()); probe(out.view(-1)); probe(out.sum())
        probe(out.cuda())
    """)
    assert ask(HEADER + body, kinds.is_tensor) == [True, True, False, False, False]
    assert ask("import pandas as pd\n" + HEADER + body, kinds.is_tensor) == [False] * 5
    own = "class Frame:\n    def eq(self, other):\n        return self\n"
    assert ask(HEADER + own + body, kinds.is_tensor) == [False, True, False, False, False]


@pytest.mark.parametrize(
    ("imports", "doubt"),
    [
        ("import torch\n", None),
        ("import torch\nimport tensorflow as tf\n", "tensorflow"),
        ("import numpy as np\n", "does not import torch"),
        ("import torch\nfrom helpers import *\n", "star import"),
        ("import torch\nclass Frame:\n    def numpy(self):\n        return 1\n", "its own `numpy()`"),
    ],
)
def test_numpy_method_evidence(imports: str, doubt: str | None) -> None:
    [answer] = ask(imports + "probe(x.numpy())\n", lambda values, expr: kinds.numpy_doubt(values))
    assert answer is None if doubt is None else doubt in answer


# -- devices ----------------------------------------------------------------------------------
def test_on_cpu_after_the_migration_too() -> None:
    source = HEADER + textwrap.dedent("""
    device = torch.device("cuda")
    x = torch.randn(3)
    y = torch.from_numpy(np.zeros(3))
    z = torch.zeros(3)
    z.cuda()
    w = torch.ones(2)
    w = w.to(device)
    class Net(nn.Module):
        def forward(self, h):
            return probe(torch.zeros(3))
    def f(out):
        probe(x); probe(x.data[0]); probe(y.float()); probe(out.cpu()); probe(out.detach().cpu().data)
        probe(z); probe(w); probe(out); probe(out.cpu().cuda())
    """)
    assert ask(source, devices.on_cpu) == [False, True, True, True, True, True, False, False, False, False]


def test_cpu_results_whatever_the_default_device() -> None:
    """``.cpu()`` gives a CPU tensor even where the file makes CUDA the default (its factories
    then are not on the CPU); ``Variable(x)`` and torch functions of CPU tensors stay there."""
    source = HEADER + textwrap.dedent("""
    x = torch.linspace(-1, 1, 10)
    def f(out):
        probe(out.cpu()); probe(torch.zeros(2)); probe(Variable(torch.unsqueeze(x, dim=1))); probe(torch.cat([x, x]))
    """)
    assert ask(source, devices.on_cpu) == [True, True, True, True]
    changed = source.replace("x = torch.linspace", 'torch.set_default_tensor_type("torch.cuda.FloatTensor")\nx = torch.linspace')
    assert ask(changed, devices.on_cpu) == [True, False, False, False]


@pytest.mark.parametrize(
    ("code", "moves"),
    [
        ("import torch\nx = torch.zeros(2)\n", False),
        ("import torch\nx = torch.zeros(2).cuda()\n", True),
        ("import torch\nx = torch.zeros(2, device=d)\n", True),
        ("import torch\nx = torch.load('f.pt')\n", True),
        ("from torch import load\nx = load('f.pt')\n", True),
        ("import json\nx = json.load(f)\n", False),
        ("from torch.cuda import is_available\n", True),
        ("import torch\ntorch.set_default_tensor_type('torch.FloatTensor')\n", True),
    ],
)
def test_moves_to_a_device(code: str, moves: bool) -> None:
    [answer] = ask(code + "probe(1)\n", lambda values, expr: devices.moves_to_a_device(values))
    assert answer is moves


# -- methods and refusals -------------------------------------------------------------------------
def test_the_calls_of_a_method_are_those_on_its_instances() -> None:
    """``r.act(...)`` calls ``Agent.act`` where every value of ``r`` is ``Agent(...)`` (also after
    ``.cuda()`` of an ``nn.Module``) or ``self`` in ``Agent``; an instance of another class that
    defines ``act`` itself is not; a receiver not shown makes the calls not shown (none)."""
    from torchfix_device.facts import methods

    source = HEADER + textwrap.dedent("""
    class Agent(nn.Module):
        def act(self, s):
            return s
        def twice(self, s):
            return self.act(s)
    class Other:
        def act(self, s):
            return s
    agent = Agent()
    if torch.cuda.is_available():
        agent = agent.cuda()
    agent.act(1)
    Other().act(2)
    probe(agent)
    """)

    def calls(values, expr):  # noqa: ANN001, ANN202
        cls = next(n for n in values.module.body if isinstance(n, cst.ClassDef) and n.name.value == "Agent")
        act = next(s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "act")
        return sorted(values.module.code_for_node(c) for c in uses.calls_of(values, act))

    assert ask(source, calls) == [["agent.act(1)", "self.act(s)"]]
    assert ask(source.replace("Other().act(2)", "unknown.act(2)"), calls) == [[]]
    assert ask(source.replace("agent = agent.cuda()", "agent = make()"), calls) == [[]]
    assert methods.SELF_RETURNING >= {"cuda", "to"}


def test_a_first_use_that_every_tensor_fails() -> None:
    from torchfix_device.facts.refusals import refused_first

    def refused(values, expr):  # noqa: ANN001, ANN202
        place = refused_first(values, expr)
        return None if place is None else place.use

    source = HEADER + textwrap.dedent("""
    env = gym.make("CartPole-v1").unwrapped
    words = {}
    q = torch.randn(1, 2)
    a = q.max(1)[1][0]
    env.step(a)
    probe(q.max(1)[1][0])
    w = q.sum()
    print(words[w])
    probe(q.sum())
    """)
    # a probe's own argument is its first use: neither is refused there
    assert ask(source, refused) == [None, None]

    def first(values, expr):  # noqa: ANN001, ANN202
        found = [n for n in traversal.walk(values.module) if isinstance(n, cst.Assign) and isinstance(n.targets[0].target, cst.Name)
                 and n.targets[0].target.value in ("a", "w")]
        return [None if refused_first(values, n.value) is None else refused_first(values, n.value).use.name for n in found]

    assert ask(source, first)[0] == ["ACTION", "KEY"]
    other = source.replace('"CartPole-v1"', '"Pong-v0"').replace("words = {}", "import collections\nwords = collections.defaultdict(int)")
    assert ask(other, first)[0] == [None, None]
    assert ask(source.replace("env.step(a)", "print(a)\nenv.step(a)"), first)[0] == [None, "KEY"]


def test_a_part_of_what_a_function_of_the_file_returns() -> None:
    """``loss, n = f(...)`` where every ``return`` of ``f`` is a pair: ``loss`` is what the
    first element is in ``f`` (a loss: 0-dim), ``n`` the second (a full reduction); a function
    one of whose returns is not such a pair shows nothing."""
    source = HEADER + textwrap.dedent("""
    crit = nn.MSELoss()
    def performance(pred, gold):
        loss = crit(pred, gold)
        return loss, pred.eq(gold).sum()
    def other(pred, gold):
        if pred is None:
            return pair
        return crit(pred, gold), 1
    loss, n = performance(torch.randn(3), torch.randn(3))
    probe(loss)
    probe(n)
    loss2, n2 = other(torch.randn(3), torch.randn(3))
    probe(loss2)
    """)
    answers = ask(source, lambda values, expr: sizes.SizeEvidence(values).size(expr))
    assert answers == [sizes.Size.ZERO_DIM, sizes.Size.ZERO_DIM, None]


def test_names_asked_by_their_last_part_need_no_analysis_of_the_whole_file(monkeypatch) -> None:
    """``values.names(node, ending_in=...)``: where the file shows no name of ``node`` can end in
    one of the parts asked (``path.join`` for ``{"array"}``), the answer is empty without libcst's
    qualified names of the whole file (the engine's names, which need them where a ``global``
    rebinds a module-level name); the names that do end so are the same as without it."""
    import libcst.metadata as md
    from torchfix_device.engine.shared import SharedWrapper
    from torchfix_device.engine.visiting import engine_class
    from torchfix_device.syntax.suppressions import NO_SUPPRESSIONS

    source = textwrap.dedent("""
        import numpy as np
        from os import path
        def reset():
            global path
            path = None
        def load(name):
            return np.array([1]), np.asarray(path.join(name))
    """)
    resolved = []
    libcst_resolve = md.MetadataWrapper.resolve

    def counting(wrapper, provider):  # noqa: ANN001, ANN202
        if provider is md.QualifiedNameProvider and provider not in wrapper._metadata:
            resolved.append(provider)
        return libcst_resolve(wrapper, provider)

    monkeypatch.setattr(md.MetadataWrapper, "resolve", counting)

    class Asking(Codemod):
        ending_in: frozenset[str] | None = None

        def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
            self.answers.append((nodes.code_of(original_node.func), facts_values.of(self).names(original_node.func, ending_in=self.ending_in)))
            return updated_node

    def answers(ending_in: frozenset[str] | None) -> list:
        resolved.clear()
        asking = engine_class(Asking)(CodemodContext(), shared=SharedWrapper())
        asking.ending_in, asking.answers = ending_in, []
        asking.configure(source, suppressions=NO_SUPPRESSIONS, device_expression=None, keeps_findings=False)
        asking.transform_module(cst.parse_module(source))
        return asking.answers

    every = dict(answers(None))
    assert resolved and every["path.join"] == {"os.path.join", "path.join"}  # libcst's, for the whole file
    asked = dict(answers(frozenset({"array", "asarray"})))
    assert not resolved and asked["path.join"] == set()
    for func, names in every.items():
        assert {q for q in names if q.rpartition(".")[2] in ("array", "asarray")} == asked[func]
    assert asked["np.array"] == {"numpy.array"} and asked["np.asarray"] == {"numpy.asarray"}



# -- the tree's own facts, shared -------------------------------------------------------------
def test_the_syntax_of_a_tree_is_computed_once_for_every_codemod_that_visits_it() -> None:
    """Two codemods visiting the same tree share its parent map and its syntax-only facets (the
    engine hands a tree that a codemod left unchanged to the next one as it was); another tree,
    even one of the same code, gets its own."""
    import types

    def values_of(tree: cst.Module) -> facts_values.ModuleValues:
        return facts_values.of(types.SimpleNamespace(visited_module=tree))  # a codemod's view

    tree = cst.parse_module("x = 1\nprint(x)\n")
    call = next(n for n in traversal.walk(tree) if isinstance(n, cst.Call))
    first, second, other = values_of(tree), values_of(tree), values_of(cst.parse_module(tree.code))
    assert first is not second  # each codemod has its own values (their names are its own)
    assert first.parent(call.func) is second.parent(call.func) is call
    assert first.tree_facet("probe", object) is second.tree_facet("probe", object)
    assert other.parent(call.func) is None and other.tree_facet("probe", object) is not first.tree_facet("probe", object)
    assert first.assigned_names() == other.assigned_names() == frozenset({"x"})


def test_names_spelt_in_imports_are_no_reads() -> None:
    """An import's dotted names and the names it binds are no reads: ``from data.loader import
    X`` does not read a loop's ``data``, ``import os.path`` does not read ``os``."""
    import types

    tree = cst.parse_module(
        "import os.path\nfrom data.loader import Loader as L, batches\n"
        "for i, (data) in enumerate(L()):\n    os.path.join(data, batches)\n"
    )
    values = facts_values.of(types.SimpleNamespace(visited_module=tree))
    reads = values.name_reads(tree)
    loop = tree.body[2]
    body_call = loop.body.body[0].body[0].value
    assert [r is body_call.args[0].value for r in reads["data"]] == [False, True]  # the loop target, then the read
    assert reads["os"] == [body_call.func.value.value] and reads["batches"] == [body_call.args[1].value]
    assert "L" in reads and "Loader" not in reads and "loader" not in reads


def test_a_function_defined_in_another_reads_its_names_and_its_self() -> None:
    """A closure's read of a name of the function around it may see any binding of it there
    (the closure may run after each); ``self`` of the method around it is the method's, unless
    the closure's own parameter takes the name."""
    source = HEADER + textwrap.dedent("""
    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x).sum()

        def trainer(self, n):
            x = torch.randn(n, 4)

            def train():
                probe(x); probe(self(x)); probe(x.sum())

                def deeper(self):
                    probe(self(x))
            return train


    def outer():
        z = torch.randn(2, 3)
        z = z.sum()
        return lambda: probe(z)
    """)
    assert ask(source, dims.dims) == [2, 0, 0, None, None]


def test_none_adds_nothing_where_the_read_raises_on_it() -> None:
    """``total = None`` before a loop that binds it: ``total / n`` and ``total.float()`` raise
    where it is None, so what they give is what the other bindings show; a read that does not
    raise on it (``probe(total)``) shows nothing. A part a function may return as None has the
    dimensions of its other values only where the read raises on None."""
    source = HEADER + textwrap.dedent("""
    def split(x, z=None):
        if z is None:
            kld = x.mean().squeeze()
        else:
            kld = None
        return x, kld


    def losses(parts):
        total = None
        for part in parts:
            total = part.sum()
        probe(total / len(parts)); probe(total.float()); probe(total)
        x, kld = split(torch.randn(2, 3))
        probe(kld.data); probe(kld)
    """)
    assert ask(source, dims.dims) == [0, 0, None, 0, None]
