"""libcst's node classes answer isinstance/issubclass through ``type``'s checks once the engine is
imported (``syntax.node_classes``): the answers must be the ABC machinery's, for every class."""

from __future__ import annotations

import abc
import subprocess
import sys

import libcst as cst

from conftest import FIXTURES
from torchfix_device import engine  # noqa: F401  (imports the syntax layer, which installs it)
from torchfix_device.syntax import node_classes


def test_every_node_class_checks_as_a_plain_class_once_the_engine_is_imported() -> None:
    classes = node_classes.node_classes()
    assert len(classes) > 300 and cst.Name in classes and cst.BaseExpression in classes
    assert all(type(c) is node_classes.PlainChecks for c in classes)


def test_subclass_answers_equal_the_abc_answers_for_every_pair_of_node_classes() -> None:
    classes = node_classes.node_classes()
    differ = [(a.__name__, b.__name__) for a in classes for b in classes
              if abc.ABCMeta.__subclasscheck__(b, a) != issubclass(a, b)]
    assert differ == []
    assert sum(issubclass(a, b) for a in classes for b in classes) > len(classes)  # a hierarchy, not only identity


def test_instance_answers_equal_the_abc_answers_on_the_nodes_of_fixtures() -> None:
    classes = node_classes.node_classes()
    nodes: list[cst.CSTNode] = []
    for path in sorted(FIXTURES.rglob("*.in.py"))[:40]:
        try:
            module = cst.parse_module(path.read_text(encoding="utf-8"))
        except cst.ParserSyntaxError:
            continue
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.children)
    kinds = {type(n): n for n in nodes}  # one node of each class met
    assert len(kinds) > 40
    differ = [(type(n).__name__, c.__name__) for n in kinds.values() for c in classes
              if abc.ABCMeta.__instancecheck__(c, n) != isinstance(n, c)]
    assert differ == []


def test_a_virtual_subclass_registered_later_puts_the_abc_checks_back() -> None:
    """In a process of its own: registering leaves libcst's classes changed for good."""
    code = (
        "import libcst as cst, abc\n"
        "from torchfix_device.syntax import node_classes\n"
        "assert type(cst.Name) is node_classes.PlainChecks\n"
        "class Mine: pass\n"
        "cst.BaseExpression.register(Mine)\n"
        "assert isinstance(Mine(), cst.BaseExpression) and issubclass(Mine, cst.CSTNode)\n"
        "assert type(cst.Name) is abc.ABCMeta and not node_classes.install()\n"
        "assert type(cst.Name) is abc.ABCMeta\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
