"""The class index of a tree (:func:`torchfix_device.syntax.traversal.of_classes` and
:func:`~torchfix_device.syntax.traversal.of_classes_under`), which the facts and codemods ask in
place of a walk of their own: the same nodes, in the same order, as a walk filtered by class, for
the whole tree and under every inner node, one class or several at once; through chains of random
rewrites of the fixture inputs (a value in two places included), and for nodes the tree does not
hold (walked)."""

from __future__ import annotations

import random

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchfix_device.engine  # noqa: F401  (its visits rebuild only what a hook changed, as in a run)
from torchfix_device.syntax import traversal
from test_tree_facts import FIXTURES, _parse, _Shake

ASKED = (
    (cst.Name,),
    (cst.If, cst.IfExp),
    (cst.Call, cst.Arg, cst.Attribute, cst.ImportAlias),
    (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.NamedExpr),
    (cst.Lambda, cst.CompFor),
    (cst.Global,),  # none in most fixtures
)


def _walked(node: cst.CSTNode, classes: tuple[type, ...]) -> list[cst.CSTNode]:
    return [n for n in traversal.walk(node) if n.__class__ in classes]


def _same(found: list[cst.CSTNode], expected: list[cst.CSTNode]) -> bool:
    return len(found) == len(expected) and all(a is b for a, b in zip(found, expected))


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(FIXTURES) - 1), st.integers(0, 2**32), st.integers(0, 3))
def test_the_index_gives_what_a_walk_filtered_by_class_gives(index: int, seed: int, rewrites: int) -> None:
    module = _parse(FIXTURES[index])
    if module is None:
        return
    rng = random.Random(seed)
    for _ in range(rewrites):
        module = module.visit(_Shake(rng))
    traversal.forget_children()
    for classes in ASKED:
        assert _same(traversal.of_classes(module, *classes), _walked(module, classes))
    inner = [n for n in traversal.walk(module) if traversal.children(n)]
    for node in rng.sample(inner, min(60, len(inner))):
        for classes in ASKED:
            assert _same(traversal.of_classes_under(module, node, *classes), _walked(node, classes))
    traversal.forget_children()


def test_a_node_the_tree_does_not_hold_is_walked_and_leaves_have_no_span() -> None:
    module = cst.parse_module("import torch\nif cuda:\n    x = torch.zeros(3).cuda()\n")
    other = cst.parse_expression("f(a.cuda(), b if c else d)")
    assert [type(n) for n in traversal.of_classes_under(module, other, cst.Call, cst.IfExp)] == [cst.Call, cst.Call, cst.IfExp]
    leaf = module.body[1].test  # `cuda`
    assert traversal.of_classes_under(module, leaf, cst.Name) == [leaf]
    calls = traversal.of_classes(module, cst.Call)
    assert [c.func.attr.value for c in calls] == ["cuda", "zeros"]  # the walk's order: outer first
    assert traversal.of_classes(module, cst.Call) is calls  # one walk per tree, the answer kept
    traversal.forget_children()
    assert traversal.of_classes(module, cst.Call) is not calls
