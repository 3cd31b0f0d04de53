"""The engine with every codemod at once: nested hits, one device line, positions, idempotence."""

from __future__ import annotations

import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import sweep_sample
from torchfix_device.options import RunOptions
from torchfix_device.syntax import traversal
from torchfix_device.codemods.catalog import all_codemods, lookup, select_codemods
from torchfix_device.engine import active_codemods, transform_source, transform_unfiltered


def rewrite(source: str, **kwargs):
    return transform_source(textwrap.dedent(source), all_codemods(), **kwargs)


def test_nested_hits_all_land_and_share_one_device_line() -> None:
    out = rewrite(
        """\
        import torch

        model = torch.load("m.pt").cuda()
        state = torch.load("s.pt")
        """
    )
    assert out.text == textwrap.dedent(
        """\
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        model = torch.load("m.pt", map_location=device).to(device)
        state = torch.load("s.pt", map_location=device)
        """
    )
    assert sorted({f.code for f in out.findings}) == ["TFD001", "TFD005"]


def test_findings_point_at_the_original_lines_even_after_an_insertion() -> None:
    out = rewrite(
        """\
        import torch

        x = torch.randn(3)
        x.cuda()
        y = torch.load("p")
        """
    )
    lines = {(f.code, f.line) for f in out.findings}
    assert ("TFD001", 4) in lines and ("TFD002", 4) in lines and ("TFD005", 5) in lines
    assert "x = x.to(device)" in out.text


def test_second_run_is_a_no_op() -> None:
    first = rewrite(
        """\
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

            def forward(self, x):
                return self.fc(x) + torch.randn(2)

        net = Net().cuda()
        loss = nn.MSELoss()(net(torch.randn(1, 2).cuda()), torch.zeros(1, 2).cuda())
        print(loss.data[0])
        """
    )
    assert first.text != ""
    second = transform_source(first.text, all_codemods())
    assert second.text == first.text
    assert [f for f in second.findings if f.fixed] == []


def test_file_without_triggers_is_not_parsed(monkeypatch) -> None:
    # Not even valid Python: proves the prefilter skips libcst's parse entirely; CPython's parser
    # still reads the file, so that its syntax error is reported like any other file's (issue 23).
    import libcst

    from torchfix_device import engine

    def refuse(*args, **kwargs):
        raise AssertionError("libcst parsed a file no codemod's trigger matches")

    monkeypatch.setattr(engine.cst, "parse_module", refuse)
    text = "def broken(:\n    return 1\n"
    assert active_codemods(text, all_codemods()) == []
    assert transform_source(text, all_codemods(), check_syntax=False).text == text
    try:
        transform_source(text, all_codemods())
    except libcst.ParserSyntaxError as exc:
        assert (exc.raw_line, exc.raw_column) == (1, 11)
    else:
        raise AssertionError("the syntax error was not reported")
    assert transform_source("import os\n", all_codemods()).text == "import os\n"


@contextmanager
def _unsafe_spam_renamer(*, mark_safe: bool | None = None):
    """A throw-away codemod whose fixes are unsafe: ``spam`` → ``eggs`` (``mark_safe`` is passed
    to ``report`` as the finding's own safety); registered only inside the ``with``."""
    import libcst as cst

    from torchfix_device.codemods.base import Codemod

    from torchfix_device.codemods.catalog import REGISTRY

    class RenameSpam(Codemod):
        """A throw-away unsafe codemod: ``spam`` → ``eggs``."""

        code = "TFD999"
        name = "test-rename-spam"
        summary = "test only"
        safe = False
        triggers = ("spam",)

        def leave_Name(self, original_node, updated_node):
            if original_node.value == "spam" and self.report(original_node, "spam", safe=mark_safe):
                return cst.Name("eggs")
            return updated_node

    try:
        yield RenameSpam
    finally:
        REGISTRY.pop("TFD999", None)


def test_unsafe_fix_is_held_back_without_the_flag() -> None:
    with _unsafe_spam_renamer() as rename_spam:
        held = transform_source("spam = 1\n", [rename_spam])
        assert held.text == "spam = 1\n"
        assert [(f.fixed, f.held_back) for f in held.findings] == [(False, True)]
        applied = transform_source("spam = 1\n", [rename_spam], options=RunOptions(unsafe_fixes=True))
        assert applied.text == "eggs = 1\n"
        assert [(f.fixed, f.held_back) for f in applied.findings] == [(True, False)]


def test_select_and_ignore_by_code_and_name() -> None:
    assert [c.code for c in select_codemods(["TFD005", "loss-data-index"], None)] == ["TFD005", "TFD006"]
    chosen = [c.code for c in select_codemods(None, ["cuda-call"])]
    assert "TFD001" not in chosen and "TFD005" in chosen
    assert lookup("tfd001").name == "cuda-call"


def test_a_run_that_replaces_no_node_is_not_rendered(monkeypatch) -> None:
    """libcst rebuilds every node it walks, so a codemod that only reports still returns a new
    tree; it is known unchanged (no hook replaced a node, no import scheduled) and not rendered:
    a file no codemod changes is never rendered at all (not even the untouched tree, which is
    rendered only to compare a rewrite with)."""
    import libcst as cst
    import pytest

    from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES

    from torchfix_device.codemods.catalog import REGISTRY

    if CHECK_FAST_NAMES:
        pytest.skip("TORCHFIX_DEVICE_CHECK_NAMES=1 renders every run to check this very shortcut")

    rendered: list[str] = []
    real, real_module_code = cst.Module.code.fget, traversal.module_code

    def counting(self):
        text = real(self)
        rendered.append(text)
        return text

    def counting_module_code(module, statement_codes):  # the engine renders modules with this
        text = real_module_code(module, statement_codes)
        rendered.append(text)
        return text

    monkeypatch.setattr(cst.Module, "code", property(counting))
    monkeypatch.setattr(traversal, "module_code", counting_module_code)
    manual_only = "import torch\n\nx = torch.zeros(3).cuda('cuda:1')\n"  # a device string: manual review
    out = transform_unfiltered(manual_only, [REGISTRY["TFD001"]])
    assert [f.fixed for f in out.findings] == [False] and out.text == manual_only
    assert rendered == []
    rendered.clear()
    fixed = transform_unfiltered("import torch\n\nx = torch.zeros(3).cuda()\n", [REGISTRY["TFD001"]])
    assert ".to(device)" in fixed.text and len(rendered) >= 2  # the rewrite is rendered, then checked


def test_a_codemod_created_without_libcsts_decorator_scan_has_the_same_state() -> None:
    """After the first instance of a codemod class, instances skip libcst's per-instance scan
    for matcher decorators (none of ours has any); what they hold must be what libcst's own
    ``__init__`` would leave."""
    from libcst.codemod import CodemodContext

    from torchfix_device.engine import visiting as codemod_module

    for cls in map(codemod_module.engine_class, all_codemods()):
        codemod_module._MATCHER_DECORATED.pop(cls, None)
        context = CodemodContext(filename="m.py")
        scanned = cls(context)
        assert codemod_module._MATCHER_DECORATED[cls] is False
        fast = cls(context)
        assert vars(fast).keys() == vars(scanned).keys()
        for name in ("metadata", "context", "_extra_visit_funcs", "_extra_leave_funcs", "_matcher_decorated"):
            assert getattr(fast, name) == getattr(scanned, name), (cls.code, name)
        assert fast._matchers == scanned._matchers == {}


def test_a_codemod_with_matcher_decorators_keeps_libcsts_dispatch() -> None:
    import libcst.matchers as m

    from torchfix_device.codemods.base import Codemod

    from torchfix_device.codemods.catalog import REGISTRY

    class Decorated(Codemod):
        """Renames `spam` through a matcher decorator."""

        code = "TFD998"
        name = "test-decorated"
        summary = "test only"
        triggers = ("spam",)

        @m.leave(m.Name("spam"))
        def rename(self, original_node, updated_node):
            return updated_node.with_changes(value="eggs") if self.report(original_node, "spam") else updated_node

    try:
        for _ in range(2):  # the second instance must not take the shortcut
            out = transform_source("spam = 1\n", [Decorated])
            assert out.text == "eggs = 1\n" and [f.code for f in out.findings] == ["TFD998"]
    finally:
        REGISTRY.pop("TFD998", None)


def test_walking_statements_finds_every_statement_the_full_walk_finds() -> None:
    """``walk_statements`` skips expressions, which hold no statement: the statements it yields
    are those of the full walk, in the same order (every fixture and snippet file)."""
    from pathlib import Path

    import libcst as cst

    def is_statement(node: cst.CSTNode) -> bool:
        return isinstance(node, (cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite, cst.ExceptHandler))

    files = sorted(Path(__file__).parent.joinpath("fixtures").rglob("*.py"))
    assert len(files) > 50
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            compile(text, str(path), "exec")
        except SyntaxError:
            continue  # an input of the token pass (`.cuda(async=True)`): not Python 3
        module = cst.parse_module(text)
        full = [n for n in traversal.walk(module) if is_statement(n)]
        assert [n for n in traversal.walk_statements(module) if is_statement(n)] == full, path
        assert sum(1 for _ in traversal.walk_statements(module)) <= sum(1 for _ in traversal.walk(module))


def test_a_codemod_that_can_only_report_runs_on_the_original_tree_alone(monkeypatch) -> None:
    """Without --unsafe-fixes an unsafe codemod (TFD012) changes nothing: after an earlier codemod
    rewrote the file it runs once, on the file's own tree, for its findings."""
    import pytest

    from torchfix_device.codemods.base import Codemod

    from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES

    from torchfix_device.codemods.catalog import all_codemods

    if CHECK_FAST_NAMES:
        pytest.skip("TORCHFIX_DEVICE_CHECK_NAMES=1 runs it on the rewrites too, to check it changes nothing")
    seen: list[tuple[str, bool]] = []
    real = Codemod.transform_module

    def spying(self, tree):
        seen.append((self.code, "map_location" in tree.code))
        return real(self, tree)

    monkeypatch.setattr(Codemod, "transform_module", spying)
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
        "        out = torch.relu(x)\n        out += x\n        return out\n\n\nstate = torch.load('m.pt')\n"
    )
    by_code = {c.code: c for c in all_codemods()}
    codemods = [by_code["TFD005"], by_code["TFD012"]]
    assert not by_code["TFD012"].safe
    out = transform_unfiltered(source, codemods)
    assert "map_location" in out.text and "out = out + x" not in out.text
    assert sorted(f.code for f in out.findings) == ["TFD005", "TFD012"]
    assert ("TFD012", True) not in seen and seen.count(("TFD012", False)) == 1
    seen.clear()
    unsafe = transform_unfiltered(source, codemods, options=RunOptions(unsafe_fixes=True))
    assert "out = out + x" in unsafe.text and ("TFD012", True) in seen


def test_an_unsafe_codemod_cannot_mark_a_finding_safe() -> None:
    import pytest

    with _unsafe_spam_renamer(mark_safe=True) as sneaky:
        assert not sneaky.may_change(RunOptions()) and sneaky.may_change(RunOptions(unsafe_fixes=True))
        with pytest.raises(Exception, match="marks no finding safe"):
            transform_unfiltered("spam = 1\n", [sneaky])


@pytest.mark.sweep
def test_children_read_from_fields_equal_libcsts_children() -> None:
    """``traversal.children`` reads a node's children from the fields libcst visits (read per node
    class from libcst's source, ``syntax.visits.fields_of``); it must equal libcst's own
    ``children`` on every node, whichever node of a class comes first (an f-string's
    ``format_spec`` is visited only when set)."""
    import libcst as cst
    from torchfix_device.syntax import visits

    root = Path(__file__).parent.parent
    files = sweep_sample([*root.joinpath("tests", "fixtures").rglob("*.py"), *root.joinpath("src").rglob("*.py")])
    extra = 'x = f"{a}{b!r:>{w}}{c=}{d:{e}.{g}}"\n'
    modules = [cst.parse_module(extra)]  # parsed once, walked in both orders
    for source in (p.read_text(encoding="utf-8") for p in files):
        try:
            modules.append(cst.parse_module(source))
        except cst.ParserSyntaxError:
            continue
    libcsts: dict[int, list[cst.CSTNode]] = {}  # libcst's answer, asked once per node (all held)
    for ordered in (modules, [modules[0], *modules[:0:-1]]):
        visits._FIELDS.clear()
        checked = 0
        for module in ordered:
            stack: list[cst.CSTNode] = [module]
            while stack:
                node = stack.pop()
                expected = libcsts.get(id(node))
                if expected is None:
                    expected = libcsts[id(node)] = list(node.children)
                got = list(traversal.children(node))
                assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), type(node).__name__
                stack.extend(expected)
                checked += 1
            traversal.forget_children()
        assert checked > 50000


def test_a_plain_visitor_with_a_per_field_hook_gets_it_called() -> None:
    """A plain visitor walks without libcst's per-field dispatch only where nothing could
    answer it: a hook defined on the class, on the instance, or in a batched visitor (a
    metadata provider's) is called as libcst calls it; one that defines none gets the same
    node visits."""
    import libcst as cst
    from libcst._batched_visitor import _BatchedCSTVisitor
    from torchfix_device.syntax import visits

    module = cst.parse_module("f(x)\nif y:\n    g(z)\n")

    class OnClass(cst.CSTVisitor):
        def __init__(self) -> None:
            self.calls: list[str] = []

        def visit_Call_func(self, node: cst.Call) -> None:
            self.calls.append("func " + cst.Module([]).code_for_node(node.func))

        def leave_If_test(self, node: cst.If) -> None:
            self.calls.append("test")

    class Plain(cst.CSTVisitor):
        def __init__(self) -> None:
            self.names: list[str] = []

        def visit_Name(self, node: cst.Name) -> None:
            self.names.append(node.value)

    on_class = OnClass()
    module.visit(on_class)
    assert on_class.calls == ["func f", "test", "func g"]
    on_instance, seen = Plain(), []
    on_instance.visit_Call_args = lambda node: seen.append(len(node.args))  # type: ignore[attr-defined]
    module.visit(on_instance)
    assert seen == [1, 1] and on_instance.names == ["f", "x", "y", "g", "z"]
    plain = Plain()
    assert not visits._has_field_hooks(plain)
    module.visit(plain)
    assert plain.names == ["f", "x", "y", "g", "z"]
    batched: list[str] = []
    visitor = _BatchedCSTVisitor({"visit_Call_func": [lambda node: batched.append("func")]})
    assert visits._has_field_hooks(visitor) and not visits._has_field_hooks(_BatchedCSTVisitor({"visit_Name": []}))
    module.visit(visitor)
    assert batched == ["func", "func"]


def test_a_codemod_with_a_per_field_hook_gets_it_called() -> None:
    """Codemods without ``visit_<Node>_<field>`` hooks skip libcst's per-field dispatch; one
    that defines such a hook still has it called, in libcst's order."""
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.codemods.catalog import REGISTRY
    from torchfix_device.syntax.visits import defines_field_hooks

    calls: list[str] = []

    class FieldHooks(Codemod):
        """Records the per-field hooks libcst calls around a call's callee."""

        code = "TFD995"
        name = "test-field-hooks"
        summary = "test only"
        triggers = ("spam",)

        def visit_Call_func(self, node) -> None:
            calls.append("visit func")

        def leave_Call_func(self, node) -> None:
            calls.append("leave func")

        def visit_Call_args(self, node) -> None:
            calls.append("visit args")

    try:
        assert defines_field_hooks(FieldHooks)
        assert not any(defines_field_hooks(c) for c in all_codemods() if c is not FieldHooks)
        transform_unfiltered("spam(1)\n", [FieldHooks])
        assert calls == ["visit func", "leave func", "visit args"]
    finally:
        REGISTRY.pop("TFD995", None)


def test_a_rewritten_tree_is_copied_for_metadata_only_when_it_holds_a_node_twice() -> None:
    """libcst keys metadata by node identity: a tree with one node object in two places must be
    deep-copied before metadata is computed; any other tree is wrapped as it is."""
    import libcst as cst
    from libcst.metadata import PositionProvider

    from torchfix_device.engine.shared import SharedWrapper

    shared_name = cst.Name("x")
    twice = cst.Module(body=[cst.SimpleStatementLine([cst.Expr(shared_name)]), cst.SimpleStatementLine([cst.Expr(shared_name)])])
    once = cst.Module(body=[cst.SimpleStatementLine([cst.Expr(cst.Name("x"))]), cst.SimpleStatementLine([cst.Expr(cst.Name("y"))])])
    shared = SharedWrapper()
    copied = shared.wrapper_for(twice)
    assert copied.module is not twice
    lines = sorted(p.start.line for n, p in copied.resolve(PositionProvider).items() if isinstance(n, cst.Name))
    assert lines == [1, 2]
    assert shared.wrapper_for(once).module is once


def test_a_tree_that_shares_only_tokens_is_wrapped_as_it_is_and_its_metadata_holds() -> None:
    """Every ``cst.Attribute`` built without a ``dot`` holds libcst's one default ``Dot()``: a
    rewrite that builds two leaves that token in two places, which asks for no copy (no
    metadata of a token is read), while the scopes and positions of the tree's names hold."""
    import libcst as cst
    from libcst.metadata import PositionProvider, ScopeProvider

    from torchfix_device.engine.shared import SharedWrapper

    built = [cst.Attribute(value=cst.Name(n), attr=cst.Name("item")) for n in ("a", "b")]
    assert built[0].dot is built[1].dot  # libcst's default instance
    tree = cst.Module(body=[cst.SimpleStatementLine([cst.Expr(cst.Call(func=a))]) for a in built])
    wrapper = SharedWrapper().wrapper_for(tree)
    assert wrapper.module is tree
    positions = wrapper.resolve(PositionProvider)
    assert [positions[a.value].start.line for a in built] == [1, 2]
    scope = wrapper.resolve(ScopeProvider)[tree]
    assert {access.node.value for access in scope.accesses} >= {"a", "b"}


def test_batched_visitors_found_once_per_class_equal_libcsts_search() -> None:
    """``syntax.batched_visitors``: the hooks of every batched libcst metadata provider, remembered per
    class, are libcst's own (same names, same order, bound to the instance asked); an instance
    with a hook of its own is searched afresh; and a scope analysis finds the same scopes and
    assignments either way."""
    import libcst as cst
    import libcst.metadata as md
    from libcst._batched_visitor import BatchableCSTVisitor
    from torchfix_device.syntax import batched_visitors

    assert BatchableCSTVisitor.get_visitors is batched_visitors.get_visitors  # installed on import
    providers = [
        getattr(md, name) for name in dir(md)
        if isinstance(getattr(md, name), type) and issubclass(getattr(md, name), md.BatchableMetadataProvider)
        and getattr(md, name) is not md.BatchableMetadataProvider
    ]
    assert md.ScopeProvider in providers and md.ParentNodeProvider in providers
    for provider in providers:
        try:
            first, second = provider(), provider()
        except TypeError:  # providers that need arguments (a cache of a full repository)
            continue
        for visitor in (first, second, first):
            remembered, searched = visitor.get_visitors(), batched_visitors.libcst_get_visitors(visitor)
            assert list(remembered) == list(searched), provider
            assert all(remembered[n] == searched[n] and remembered[n].__self__ is visitor for n in remembered)
    own = md.ScopeProvider()
    own.visit_Pass = lambda node: None  # type: ignore[attr-defined]  # a hook of the instance
    own.leave_Pass = own.visit_Module  # type: ignore[attr-defined]  # a bound method: libcst lists it
    assert "leave_Pass" in own.get_visitors() and list(own.get_visitors()) == list(batched_visitors.libcst_get_visitors(own))
    code = "import os\ndef f(a, b=1):\n    c = a + b\n    return [c for c in range(a)] + [os]\n"
    fast = cst.MetadataWrapper(cst.parse_module(code)).resolve(md.ScopeProvider)
    batched_visitors.BatchableCSTVisitor.get_visitors = batched_visitors.libcst_get_visitors  # type: ignore[method-assign]
    try:
        slow = cst.MetadataWrapper(cst.parse_module(code)).resolve(md.ScopeProvider)
    finally:
        batched_visitors.install()
    describe = lambda scopes: sorted(  # noqa: E731
        (type(n).__name__, type(s).__name__, tuple(sorted(a.name for a in s.assignments))) for n, s in scopes.items()
    )
    assert describe(fast) == describe(slow)


@pytest.mark.sweep
def test_visits_calls_libcst_hooks_in_libcst_order_on_every_fixture() -> None:
    """``syntax.visits``: a plain visitor walked without rebuilding the tree gets exactly
    the calls libcst's own ``visit`` makes (``on_visit``, ``on_visit_attribute``,
    ``on_leave_attribute``, ``on_leave``, on the same nodes, in the same order) over every
    fixture, example and corpus stand-in of the tests; a visitor that skips children (as
    libcst's scope analysis does for functions, then visits parts itself) too; every node class
    libcst parses into has its fields read from libcst's source; a transformer gets the same
    calls and makes the same tree, and an idle one gets the very module back."""
    import libcst as cst
    from libcst._nodes.base import CSTNode
    from torchfix_device.syntax import visits

    assert CSTNode.visit is visits._visit  # installed on import

    class AttributeCalls:
        """Records the per-field hooks (every visitor and transformer below)."""

        calls: list[tuple[str, int, str]]

        def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
            self.calls.append(("attr", id(node), attribute))

        def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
            self.calls.append(("/attr", id(original_node), attribute))

    class Recorder(AttributeCalls, cst.CSTVisitor):
        def __init__(self, skip: type | None = None) -> None:
            self.calls = []
            self.skip = skip

        def on_visit(self, node: cst.CSTNode) -> bool:
            self.calls.append(("visit", id(node), ""))
            if self.skip is not None and isinstance(node, self.skip):
                for child in reversed(node.children):  # by hand, in an order of its own
                    child.visit(self)
                return False
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            self.calls.append(("leave", id(original_node), ""))

    root = Path(__file__).parent
    paths = sweep_sample([*root.glob("fixtures/**/*.py"), *(root.parent / "examples").glob("**/*.py")])
    classes: set[type] = set()
    compared = 0
    for path in paths:
        try:
            module = cst.parse_module(path.read_bytes())
        except cst.ParserSyntaxError:
            continue
        for skip in (None, cst.FunctionDef):
            fast, slow = Recorder(skip), Recorder(skip)
            assert module.visit(fast) is module
            visits.libcst_visit(module, slow)
            assert fast.calls == slow.calls, path
        classes.update(type(n) for n in _walk_all(module))
        compared += 1
    assert compared > len(paths) * 9 // 10  # all but the token pass's inputs (not Python 3)
    assert all(visits.fields_of(cls) is not None for cls in classes), [
        c.__name__ for c in classes if visits.fields_of(c) is None
    ]

    class Rewriter(AttributeCalls, cst.CSTTransformer):
        """Replaces, removes and splices through every kind of field: names (required and in
        sequences), comments (optional fields), semicolons (sentinel fields), `pass` (an element
        of a statement line, the line dropped where that empties it), docstrings doubled (a
        FlattenSentinel in a block)."""

        def __init__(self, change: bool) -> None:
            self.change = change
            self.calls = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            self.calls.append(("visit", id(node), ""))
            return super().on_visit(node)

        def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> object:
            self.calls.append(("leave", id(original_node), type(updated_node).__name__))
            return super().on_leave(original_node, updated_node) if self.change else updated_node

        def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
            return updated_node.with_changes(value=updated_node.value + "_") if "a" in updated_node.value else updated_node

        def leave_Comment(self, original_node: cst.Comment, updated_node: cst.Comment) -> object:
            return cst.RemoveFromParent()

        def leave_Semicolon(self, original_node: cst.Semicolon, updated_node: cst.Semicolon) -> object:
            return cst.RemoveFromParent()

        def leave_Pass(self, original_node: cst.Pass, updated_node: cst.Pass) -> object:
            return cst.RemoveFromParent()

        def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> object:
            if isinstance(updated_node.value, cst.SimpleString):
                return cst.FlattenSentinel([updated_node, updated_node])
            return updated_node

    rewritten = 0
    for path in paths:
        try:
            module = cst.parse_module(path.read_bytes())
        except cst.ParserSyntaxError:
            continue
        idle = Rewriter(change=False)
        assert module.visit(idle) is module  # nothing replaced: nothing rebuilt
        fast, slow = Rewriter(change=True), Rewriter(change=True)
        mine, theirs = module.visit(fast), visits.libcst_visit(module, slow)
        assert fast.calls == slow.calls, path
        assert mine.code == theirs.code and mine.deep_equals(theirs), path
        rewritten += mine.code != module.code
    assert rewritten > compared * 3 // 4
    with pytest.raises(TypeError):  # a required field refuses a removal, as in libcst
        cst.parse_module("x = 1\n").visit(type("Drop", (cst.CSTTransformer,), {
            "leave_Integer": lambda self, o, u: cst.RemoveFromParent()})())


def _walk_all(node):
    yield node
    for child in node.children:
        yield from _walk_all(child)
