"""The facts of a rewritten tree derived from those of the tree it came from
(:mod:`torchfix_device.facts.tree`): the same parents and the same order as a walk of the whole
new tree gives, through chains of random rewrites of the fixture inputs (names renamed, calls
wrapped in a move, statements dropped, a value put in two places)."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchfix_device.engine  # noqa: F401  (its visits rebuild only what a hook changed, as in a run)
from torchfix_device.engine.shared import _holds_no_node_twice
from torchfix_device.facts.tree import OUTSIDE, TreeFacts, tree_facts
from torchfix_device.syntax import traversal

FIXTURES = sorted(
    path for path in (Path(__file__).parent / "fixtures").rglob("*.in.py")
    if len(path.read_text(encoding="utf-8")) < 6000
)


def _parse(path: Path) -> cst.Module | None:
    try:
        return cst.parse_module(path.read_text(encoding="utf-8"))
    except cst.ParserSyntaxError:
        return None  # a Python 2 input


class _Shake(cst.CSTTransformer):
    """Random rewrites of the kinds codemods make."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return updated.with_changes(value=updated.value + "_") if self.rng.random() < 0.03 else updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self.rng.random() < 0.1:  # the call moves under new nodes
            return cst.Call(func=cst.Attribute(value=updated, attr=cst.Name("to")), args=[cst.Arg(cst.Name("device"))])
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if self.rng.random() < 0.05:  # one value in two places
            return updated.with_changes(value=cst.Tuple([cst.Element(updated.value), cst.Element(updated.value)]))
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        return cst.RemoveFromParent() if self.rng.random() < 0.05 else updated


def _walk_numbers(module: cst.Module) -> tuple[dict[int, int], set[int]]:
    """How a walk of the whole tree numbers its nodes, and the nodes it meets twice."""
    order, twice = {id(module): 0}, set()
    for above in traversal.walk(module):
        for child in traversal.children(above):
            if id(child) in order:
                twice.add(id(child))
            order[id(child)] = len(order)
    return order, twice


def _check(facts: TreeFacts, module: cst.Module, *older: cst.Module) -> int:
    """``facts`` (derived from the trees ``older``) against a walk of ``module``; the number of nodes compared."""
    exact = TreeFacts(module)
    order, twice = _walk_numbers(module)
    assert facts.once == exact.once == _holds_no_node_twice(module)  # what the metadata wrapper asks
    if not facts.once:
        return 0  # a node in two places: the facts are a walk's
    tokens = {id(n) for n in traversal.walk(module) if isinstance(n, traversal.TRIVIA)}
    old_tokens = {id(n) for tree in older for n in traversal.walk(tree) if isinstance(n, traversal.TRIVIA)}
    assert exact.parents.keys() - tokens <= facts.parents.keys()
    assert facts.parents.keys() - exact.parents.keys() <= old_tokens  # a dropped token may keep its entry
    for key in exact.parents.keys() - tokens:
        assert facts.parents[key] is exact.parents[key]
    nodes = {id(n): n for n in traversal.walk(module) if id(n) not in twice and id(n) not in tokens}
    ranked = sorted(nodes.values(), key=lambda n: order[id(n)])
    places = [facts.place(n) for n in ranked]
    assert all(a < b for a, b in zip(places, places[1:])), "places sort otherwise than the walk numbers"
    assert places == [exact.place(n) for n in ranked]
    return len(ranked)


@settings(max_examples=80, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(FIXTURES) - 1), st.integers(0, 2**32), st.integers(1, 4))
def test_a_rewrite_has_the_parents_and_order_of_a_walk_of_it(index: int, seed: int, rewrites: int) -> None:
    module = _parse(FIXTURES[index])
    if module is None:
        return
    rng, older = random.Random(seed), [module]
    facts = TreeFacts(module)
    for _ in range(rewrites):
        rewritten = module.visit(_Shake(rng))
        derived = TreeFacts(rewritten, facts)
        _check(derived, rewritten, *older)
        module, facts = rewritten, derived
        older.append(module)


def test_rewrites_share_nodes_and_nodes_outside_come_last() -> None:
    """The visits a run installs rebuild only what changed: a derived tree walks little. A node
    of the old tree that the rewrite dropped has no parent and sorts after every node."""
    source = "import torch\nx = torch.zeros(3).cuda()\ny = 1\n" + "z = f(y)\n" * 50
    module = cst.parse_module(source)
    facts = tree_facts(module)

    class Move(cst.CSTTransformer):
        def leave_Attribute(self, original, updated):
            return updated.with_changes(attr=cst.Name("to")) if updated.attr.value == "cuda" else updated

    rewritten = module.visit(Move())
    assert sum(a is b for a, b in zip(module.body, rewritten.body)) == len(module.body) - 1
    derived = tree_facts(rewritten)
    assert tree_facts(rewritten) is derived and _check(derived, rewritten, module) > 300
    dropped = module.body[1].body[0].value.func.attr  # `cuda`
    assert derived.parents.get(id(dropped)) is None and derived.place(dropped) == OUTSIDE
    assert derived.place(rewritten.body[0]) < derived.place(rewritten.body[2]) < OUTSIDE


@pytest.mark.parametrize("path", FIXTURES[:40], ids=lambda p: p.parent.name + "/" + p.name)
def test_a_fixture_rewritten_twice(path: Path) -> None:
    module = _parse(path)
    if module is None:
        pytest.skip("a Python 2 input")
    facts, rng, older = TreeFacts(module), random.Random(path.name), [module]
    for _ in range(3):
        rewritten = module.visit(_Shake(rng))
        facts = TreeFacts(rewritten, facts)
        _check(facts, rewritten, *older)
        module = rewritten
        older.append(module)
