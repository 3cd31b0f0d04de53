from __future__ import annotations

import ast
from typing import NamedTuple

import libcst as cst
import libcst.matchers as m
from torchfix_device.codemods.common import legacy_constructors
from torchfix_device.syntax import imports, nodes, traversal
from torchfix_device import torch_api
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.codemods.cuda_tensor_type.aliases import MODULE, Alias, attribute_device, find_aliases, read_kind, unread_goes
from torchfix_device.devices.source import NoDevice
from torchfix_device.devices.flag_scan import statements_of
from torchfix_device.facts import kinds
from torchfix_device.facts import values as facts_values

SET_DEFAULT_LAST = frozenset({"set_default_tensor_type"})


ALL_READS_SUPPRESSED = "every read of it is suppressed"
"""Why an alias stays that is not reported: the user suppressed each place it would change."""

class CudaTensorType(Codemod):
    """
    ## What it does
    Rewrites the legacy CUDA tensor types to device-agnostic code:
    `torch.cuda.FloatTensor(2, 3)` → `torch.empty(2, 3, dtype=torch.float32, device=device)`,
    `torch.cuda.LongTensor([1, 2])` → `torch.tensor([1, 2], dtype=torch.int64, device=device)`,
    `x.type(torch.cuda.FloatTensor)` → `x.to(device=device, dtype=torch.float32)`, and
    `isinstance(x.data, torch.cuda.FloatTensor)` → `(x.is_cuda and x.layout == torch.strided and
    x.dtype == torch.float32)`, what that type test checks (with `isinstance(x, torch.Tensor) and`
    first where `x` is not shown to be a tensor: for a NumPy array the test stays False). The device is chosen as for `.cuda()`
    (TFD001). `y.type(type(x.data))` (0.3's way to give `y` the type and device of `x`) →
    `y.type_as(x)`.

    Tensor-type aliases, `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`
    (`torch.Tensor` in the `else` too), bound once and read only after, go with their reads:
    `Tensor(n, 1)`, `Tensor(imgs.shape[0], *patch)` → `torch.empty(..., dtype=torch.float32,
    device=device)`; `Tensor([1.0])` → `torch.tensor(...)`; a NumPy array of at least one
    dimension, `Tensor(np.random.normal(0, 1, (n, d)))` or a name bound to one →
    `torch.as_tensor(..., dtype=torch.float32, device=device)`; `x.type(Tensor)` →
    `x.to(device=device, dtype=torch.float32)`. The device is the alias's own condition: the
    user's flag device (`device = torch.device("cuda" if cuda else "cpu")`, see TFD001) where the
    condition is that flag (the line goes, its comments go to the next), else the alias line
    becomes `device = torch.device("cuda" if cond else "cpu")` with a free name. Module aliases,
    `tt = torch.cuda if cuda else torch` (and `self.tt = ...` in `__init__`, read as
    `self.tt.LongTensor(...)` by the class's methods), go the same way, each read taking its own
    type's dtype: the alias line binds the device (`self.device = torch.device("cuda" if cuda
    else "cpu")`, a free attribute name). A tensor-type alias set on `self` in `__init__`
    (`self.dtype = torch.cuda.FloatTensor if args.cuda else torch.FloatTensor`) goes the same way;
    the aliases of one `__init__` on the same condition share the first one's device attribute
    (their lines go), where nothing between them calls anything or rebinds what the condition reads.
    A CUDA type bound with no condition (`dtype = torch.cuda.FloatTensor`) is an alias on
    `torch.cuda.is_available()`, the device a hard-coded `.cuda()` gets; such names share one binding.
    An alias nothing reads goes (`FloatTensor = ...` beside the `LongTensor = ...` a notebook
    uses): a function's own, or a module's where no file of the run imports the module, in a file
    that reads no name by its string (`globals()`, `eval`...), on a flag's condition.

    ## Why is this bad?
    `torch.cuda.FloatTensor` exists only with CUDA: the code fails on a CPU-only machine
    (`TypeError: type torch.cuda.FloatTensor not available`), and the types are deprecated in
    favour of a `dtype` plus a `device`.

    ## Example
    ```python
    mask = torch.cuda.ByteTensor(batch, steps)
    x = x.type(torch.cuda.FloatTensor)
    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
    valid = Tensor(imgs.shape[0], 1).fill_(1.0)
    ```

    ## Use instead
    ```python
    mask = torch.empty(batch, steps, dtype=torch.uint8, device=device)
    x = x.to(device=device, dtype=torch.float32)
    device = torch.device("cuda" if cuda else "cpu")
    valid = torch.empty(imgs.shape[0], 1, dtype=torch.float32, device=device).fill_(1.0)
    ```

    ## Not rewritten
    A constructor given a lone argument the facts do not show to be a size, data or an array
    (`torch.cuda.FloatTensor(n)`, `n` a parameter; a name bound to a size on one branch and a
    list on the other) or keyword arguments, and the types used as values: reported for manual
    review. Sizes: `int(...)`, `len(...)`, `x.size(i)`, `x.shape[i]` and their arithmetic; data:
    displays, `list(...)`, a part of `a, b = zip(...)`; a name where every binding reaching it is
    one of these (both branches of an `if` too). An alias any of whose
    reads cannot be rewritten — an argument that shows neither a size nor data (`Tensor(x)`, a
    0-dimensional array, `Tensor(*shape)`), the alias passed as a value or to `isinstance`, a
    read before it is bound, a second binding of its name — is left whole, with its reads, and
    reported; so is a module alias handed out as a value or whose attribute is bound in two
    places of the file. An alias nothing reads in a module another file imports (or may import),
    or on a condition that calls something, is reported. CPU types outside `nn.Module` methods (`torch.FloatTensor(...)`) are left alone;
    inside them TFD003 handles them.

    ## Fix safety
    Safe. `torch.empty` and the legacy size constructor both return uninitialised memory of the
    same shape and dtype; `torch.tensor` copies the same data; `torch.as_tensor`, like the legacy
    constructor, shares a NumPy array's memory on the CPU when the dtype matches and copies it
    otherwise; `.to(device=, dtype=)` converts like `.type()` did. An alias's reads get the device
    its condition chose. An alias nothing can read does nothing but evaluate its flag, which
    has no effect. An attribute alias's reads are those of its file: a subclass in another
    file reading `self.tt` would no longer find it. On a machine without CUDA the code now runs on the CPU instead of failing.
    `y.type_as(x)` gives `y` the type `type(x.data)` was in 0.3, device included (since 0.4
    `type(x.data)` is `torch.Tensor`: the old code moves `y` to the CPU).
    """

    code = "TFD008"
    name = "cuda-tensor-type"
    summary = "`torch.cuda.FloatTensor` & co. exist only with CUDA: use a dtype and a device"
    safe = True
    triggers = ("Tensor", "type(type(")

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """An expression naming ``torch.cuda.FloatTensor`` or another CUDA tensor type (called,
        passed to ``.type()`` or used as a value), or ``.type(type(...))``."""
        if facts.torch_imported and "type" in facts.call_attrs and any(
            isinstance(node, ast.Call) and _type_of_type(node) for node, _, _ in facts.contexts
        ):
            return True
        if not (facts.torch_imported and "cuda" in facts.names and facts.names & LEGACY_TYPE_NAMES):
            return False
        scan = facts.scan
        return any(
            isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
            and (scan.opaque or any(_is_cuda_legacy_type(q) for q in scan.qualified(node)))
            or isinstance(node, ast.IfExp) and "torch.cuda" in scan.qualified(node.body) and "torch" in scan.qualified(node.orelse)
            for node, _, _ in facts.contexts
        )

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._torch = imports.torch_module_alias(node) or "torch"
        self._handled: set[int] = set()
        self._reads: dict[int, tuple[Alias, str, _Read]] = {}
        self._alias_of: dict[int, Alias] = {}
        self._blockers: dict[int, Alias] = {}
        """A read (a call, or a name used otherwise) that keeps its alias from going: reported there."""
        self._removed: list[cst.CSTNode] = []
        """The alias statements that go (the objects: the engine may keep either)."""
        self._devices_given: list[Alias] = []
        """The aliases given a device so far (of ``self`` or not), in the order of the file."""
        aliases = [a for found in find_aliases(self, node).values() for a in found]
        if aliases:
            self._plan(node, aliases)
        return None

    # -- tensor-type aliases ----------------------------------------------------------------
    def _plan(self, module: cst.Module, aliases: list[Alias]) -> None:
        """Decide, before any rewrite, which aliases go: all of their reads are rewritten or none."""
        wanted = {id(r): a for a in aliases for r in a.reads}
        seen: dict[int, _Read] = {}
        _walk_reads(module, wanted, seen)
        outer = {id(f) for key, read in seen.items() for f in read.chain if wanted[key].scope is not f}  # read an outer alias
        for alias in aliases:
            self._alias_of[id(alias.statement)] = alias
            self._handled.update(id(n) for n in (alias.choice.body, alias.choice.orelse))
            if alias.reason is None and not alias.reads and unread_goes(self, alias):
                alias.removed = True  # nothing reads it: it goes, and no device is bound
                continue
            if alias.reason is None:
                alias.reason, blocker = self._why_not(module, alias, seen)
                if blocker is not None:
                    self._blockers[id(blocker)] = alias
            if alias.reason is not None:
                continue
            self._choose_device(alias, [seen[id(r)].chain for r in alias.reads], outer)
            for read in alias.reads:
                found = seen[id(read)]
                kind = read_kind(self, read, found.parent, found.grand, alias)
                call = found.parent if kind == "call" else found.grand
                self._reads[id(call)] = (alias, cst.ensure_type(kind, str), found)

    def _why_not(self, module: cst.Module, alias: Alias, seen: dict) -> tuple[str | None, cst.CSTNode | None]:
        """Why ``alias`` cannot go, and the read that keeps it (None: the alias statement itself)."""
        if not alias.reads:
            return "it is never called", None
        if self.is_suppressed(alias.statement):
            return "its line is suppressed", None
        index = next(i for i, s in enumerate(statements_of(alias.scope)) if s is alias.statement)
        for read in alias.reads:
            found = seen.get(id(read))
            if found is None:
                return f"`{alias.name}` is read where it cannot be followed", None
            parent, grand, chain, top = found.parent, found.grand, found.chain, found.top
            if alias.owner is not None and not _a_method_reads_its_own(alias.owner, chain, read):
                return f"`{nodes.code_of(read)}` is read outside the methods of `{alias.owner.name.value}`", read
            if alias.owner is None and isinstance(alias.scope, cst.FunctionDef) and not any(f is alias.scope for f in chain):
                return f"`{alias.name}` is read outside the function that binds it", read
            if (not chain or chain[-1] is alias.scope) and top <= index:
                return f"`{alias.name}` is read before it is bound", read
            kind = read_kind(self, read, parent, grand, alias)
            if kind is None:
                return f"`{alias.name}` is used as a value", read
            if self.is_suppressed(read):
                if all(self.is_suppressed(r) for r in alias.reads):
                    return ALL_READS_SUPPRESSED, None  # nothing the user left unsuppressed is held back
                return "one of its reads is suppressed", None
            if kind in ("call", "member"):
                call = cst.ensure_type(parent if kind == "call" else grand, cst.Call)
                made_by, why = legacy_constructors.factory(self, call)
                if made_by is None:
                    return why, call
        return None, None

    def _choose_device(self, alias: Alias, chains: list[list[cst.FunctionDef]], outer: set[int]) -> None:
        """The device of ``alias``: its flag's binding where the condition is a usable flag that
        is final at the alias, else a binding of the same value in place of the alias. Not the
        binding of a function's flag in a function (``outer``) that reads an alias bound
        outside it: those reads take a device the binding's name could hide."""
        if alias.owner is not None:
            attribute_device(alias, self._devices_given, _attribute_names(self.visited_module))
            return
        shared = next((a for a in self._devices_given if a.unconditional and a.scope is alias.scope and not a.removed), None)
        if alias.unconditional and shared is not None:  # `dtype = torch.cuda.FloatTensor`, `ltype = ...`: one device
            alias.device, alias.removed = shared.device, True
            return
        self._devices_given.append(alias)
        flags = self.device_source.flags
        flag = flags.guard_flag(alias.choice)
        if flag is not None and flag.usable and id(alias.choice) not in flag.before:
            placed = isinstance(alias.scope, cst.FunctionDef) or any(s is alias.statement for s in flag.statements()[flag.after + 1:])
            name = flags.binding_name(flag)
            hidden = id(flag.scope) in outer or any(name in traversal.all_names(f) for chain in chains for f in chain if f is not flag.scope)
            if placed and not hidden and statements_of(alias.scope)[-1] is not alias.statement:  # a block keeps a statement
                alias.device, alias.removed = flags.name_for(flag), True
                return
        taken = traversal.all_names(self.visited_module) | self.device_source.flags.reserved() | self.device_source.reserved_names
        alias.device = next((n for n in ("device", "torch_device", "default_device", "device_") if n not in taken), None) or \
            next(f"device{i}" for i in range(2, 1000) if f"device{i}" not in taken)
        self.device_source.reserved_names.add(alias.device)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if not self._removed:
            return updated_node
        return updated_node.with_changes(body=nodes.without_statements(updated_node.body, self._removed))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self._removed:
            updated_node = updated_node.with_changes(body=nodes.without_statements(updated_node.body, self._removed))
        return super().leave_Module(original_node, updated_node)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine) -> cst.BaseStatement:
        alias = self._alias_of.get(id(original_node))
        if alias is None:
            return updated_node
        test = nodes.code_of(alias.choice.test)
        what = "a CUDA tensor type alias" if alias.dtype != MODULE else "an alias of `torch.cuda` or `torch`"
        on = f"on `{test}`" if not alias.unconditional else "(CUDA only: the device becomes CUDA where there is one)"
        if alias.reason == "it is never called":
            self.report(original_node, f"`{alias.name}` is {what} that is never called: remove it", fixable=False)
            return updated_node
        if alias.reason is not None:
            if alias.reason is not ALL_READS_SUPPRESSED and not any(a is alias for a in self._blockers.values()):
                self.report(original_node, f"`{alias.name}` is {what} that stays because {alias.reason}: give its reads a dtype and a device by hand", fixable=False)
            return updated_node
        if alias.removed and not alias.reads:
            if self.report(original_node, f"`{alias.name}` is {what} that nothing reads: remove it"):
                self._removed += [original_node, updated_node]
            return updated_node
        if alias.removed:
            dtype = f"dtype={self._torch}.{alias.dtype}, " if alias.dtype != MODULE else "a dtype and "
            if self.report(original_node, f"`{alias.name}` is {what} {on}: its reads take `{dtype}device={alias.device}`"):
                self._removed += [original_node, updated_node]  # taken out of its block, its blank lines kept
            return updated_node
        if not self.report(original_node, f"`{alias.name}` is {what} {on}: bind the device instead, as `{alias.device}`"):
            return updated_node
        value = cst.parse_expression(f'{self._torch}.device("cuda" if {test} else "cpu")')
        assign = cst.ensure_type(updated_node.body[0], cst.Assign)
        target = cst.ensure_type(cst.parse_expression(cst.ensure_type(alias.device, str)), (cst.Name, cst.Attribute))
        new = assign.with_changes(targets=[assign.targets[0].with_changes(target=target)], value=value)
        return updated_node.with_changes(body=[new])

    def _cuda_dtype(self, node: cst.BaseExpression) -> str | None:
        legacy = torch_api.legacy_tensor_type(self.qualified_names(node, ending_in=torch_api.LEGACY_TENSOR_TYPE_NAMES))
        return legacy[0] if legacy and legacy[1] else None

    def visit_Call(self, node: cst.Call) -> bool | None:
        # Mark the type objects that a rewrite below consumes, so they are not reported as values.
        if self._cuda_dtype(node.func):
            self._handled.add(id(node.func))
        if m.matches(node.func, m.Attribute(attr=m.Name("type"))) and len(node.args) == 1 and self._cuda_dtype(node.args[0].value):
            self._handled.add(id(node.args[0].value))
        if "torch.set_default_tensor_type" in self.qualified_names(node.func, ending_in=SET_DEFAULT_LAST):
            self._handled.update(id(a.value) for a in node.args)  # TFD014's finding
        if isinstance(node.func, cst.Name) and node.func.value == "isinstance":
            found = self._isinstance_test(node)
            if found is not None:  # rewritten whole when the call is left: no finding of its own
                self._handled.update(id(t) for t in found[1])
        return None

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        self._report_blocker(original_node)
        return updated_node

    def _report_blocker(self, node: cst.CSTNode) -> None:
        alias = self._blockers.get(id(node))
        if alias is not None:
            what = "CUDA tensor type alias" if alias.dtype != MODULE else "alias"
            self.report(node, f"`{nodes.code_of(node)}` keeps the {what} `{alias.name}`: {alias.reason}; give it a dtype and a device by hand", fixable=False)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        self._report_blocker(original_node)
        planned = self._reads.get(id(original_node))
        if planned is not None:
            return self._alias_read(original_node, updated_node, *planned)
        if isinstance(original_node.func, cst.Name) and original_node.func.value == "isinstance":
            return self._isinstance(original_node, updated_node)
        dtype = self._cuda_dtype(original_node.func)
        if dtype is not None:
            return self._constructor(original_node, updated_node, dtype)
        if m.matches(original_node.func, m.Attribute(attr=m.Name("type"))) and len(original_node.args) == 1:
            arg = original_node.args[0]
            dtype = self._cuda_dtype(arg.value) if arg.keyword is None else None
            if dtype is not None:
                return self._type_call(original_node, updated_node, dtype)
            other = self._type_of(arg.value) if arg.keyword is None else None
            if other is not None:
                return self._type_as(original_node, updated_node, other)
        return updated_node

    def _type_of(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """``x`` of ``type(x.data)`` / ``type(x)`` (the builtin ``type``)."""
        if not (isinstance(node, cst.Call) and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star):
            return None
        if self.qualified_names(node.func) != {"builtins.type"}:
            return None
        value = node.args[0].value
        return value.value if m.matches(value, m.Attribute(attr=m.Name("data"))) else value  # type: ignore[attr-defined]

    def _type_as(self, original: cst.Call, updated: cst.Call, other: cst.BaseExpression) -> cst.BaseExpression:
        shown = nodes.code_of(other)
        message = (
            f"`.type(type(...))` took `{shown}`'s type with its device in PyTorch 0.3 (a `torch.cuda.FloatTensor`); "
            f"since 0.4 that type is `torch.Tensor`, which moves the tensor to the CPU: use `.type_as({shown})`"
        )
        if not self.report(original, message):
            return updated
        func = cst.ensure_type(updated.func, cst.Attribute)
        return updated.with_changes(func=func.with_changes(attr=cst.Name("type_as")), args=[cst.Arg(other)])

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        self._report_blocker(original_node)
        if id(original_node) not in self._handled and self._cuda_dtype(original_node):
            self.report(
                original_node,
                f"`{nodes.code_of(original_node)}` used as a value: replace it by a dtype and a device by hand",
                fixable=False,
            )
        return updated_node

    def _constructor(self, original: cst.Call, updated: cst.Call, dtype: str) -> cst.BaseExpression:
        shown = nodes.code_of(original.func)
        device = self.device_source.for_site(original)
        if isinstance(device, NoDevice):
            self.report(original, f"`{shown}(...)`: {device.reason}", fixable=False)
            return updated
        made_by, _ = legacy_constructors.factory(self, original)
        rewritten = legacy_constructors.rewritten(updated, self._torch, made_by, dtype, device.code) if made_by else None
        if rewritten is None:
            factory = f"{self._torch}.empty(..., dtype={self._torch}.{dtype}, device={device.code})"
            data = f"{self._torch}.tensor(..., dtype={self._torch}.{dtype}, device={device.code})"
            self.report(original, f"`{shown}(...)` exists only with CUDA and nothing shows whether its argument is a size or data: write `{factory}` for a size or `{data}` for data", fixable=False)
            return updated
        if self.report(original, f"`{shown}` exists only with CUDA: use `dtype={self._torch}.{dtype}, device={device.code}`"):
            return rewritten
        return updated

    def _alias_read(self, original: cst.Call, updated: cst.Call, alias: Alias, kind: str, read: "_Read") -> cst.BaseExpression:
        device = cst.ensure_type(alias.device, str)
        if kind == "type":
            if not self.report(original, f"`.type({alias.name})`: use `.to(device={device}, dtype={self._torch}.{alias.dtype})`"):
                return updated
            return self._to_call(updated, device, alias.dtype)
        dtype = _dtype_of(alias, original)
        made_by, _ = legacy_constructors.factory(self, original)
        if made_by is None:  # decided on the original call when planned: cannot happen
            return updated
        done = legacy_constructors.rewritten(updated, self._torch, made_by, dtype, device)
        factory = nodes.dotted_name(done.func)
        if self.report(original, f"`{nodes.code_of(original.func)}(...)`: use `{factory}(..., dtype={self._torch}.{dtype}, device={device})`"):
            return done
        return updated

    def _isinstance_test(self, call: cst.Call) -> tuple[str, list[cst.BaseExpression], list[str]] | None:
        """For ``isinstance(x.data, torch.cuda.FloatTensor)`` (or a tuple of CUDA types): the
        tested name (``.data`` dropped), the type expressions and their dtypes; None otherwise."""
        args = call.args
        if len(args) != 2 or any(a.keyword is not None or a.star for a in args):
            return None
        tested = nodes.dotted_name(args[0].value)
        types = [e.value for e in args[1].value.elements] if isinstance(args[1].value, cst.Tuple) else [args[1].value]
        dtypes = [self._cuda_dtype(t) for t in types]
        if tested is None or not types or any(d is None for d in dtypes):
            return None
        return (tested[: -len(".data")] if tested.endswith(".data") else tested), types, dtypes  # type: ignore[return-value]

    def _isinstance(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``isinstance(x.data, torch.cuda.FloatTensor)`` → ``(x.is_cuda and x.layout ==
        torch.strided and x.dtype == torch.float32)``: what the type check tests (``x.dtype in
        (...)`` for a tuple of types)."""
        found = self._isinstance_test(original)
        if found is None:
            return updated
        tested, types, dtypes = found
        t = self._torch
        dtype_test = f"{tested}.dtype == {t}.{dtypes[0]}" if len(dtypes) == 1 else f"{tested}.dtype in ({', '.join(f'{t}.{d}' for d in dtypes)})"
        value = original.args[0].value
        subject = value.value if isinstance(value, cst.Attribute) and value.attr.value == "data" else value
        # A value not shown to be a tensor (a NumPy array, a list) made the type test False: keep that.
        shown = kinds.is_tensor(facts_values.of(self), subject)
        code = f"({'' if shown else f'isinstance({tested}, {t}.Tensor) and '}{tested}.is_cuda and {tested}.layout == {t}.strided and {dtype_test})"
        if not self.report(original, f"`isinstance(..., {nodes.code_of(original.args[1].value)})` exists only with CUDA: test `{code}`"):
            return updated
        return cst.parse_expression(code).with_changes(lpar=updated.lpar or [cst.LeftParen()], rpar=updated.rpar or [cst.RightParen()])

    def _type_call(self, original: cst.Call, updated: cst.Call, dtype: str) -> cst.BaseExpression:
        device = self.device_source.for_site(original)
        if isinstance(device, NoDevice):
            self.report(original, f"`.type(...)` with a CUDA type: {device.reason}", fixable=False)
            return updated
        if not self.report(original, f"`.type(torch.cuda.*)` exists only with CUDA: use `.to(device={device.code}, dtype=...)`"):
            return updated
        return self._to_call(updated, device.code, dtype)

    def _to_call(self, updated: cst.Call, device: str, dtype: str) -> cst.Call:
        """``x.type(T)`` → ``x.to(device=<device>, dtype=torch.<dtype>)``."""
        template = cst.ensure_type(cst.parse_expression(f"_.to(device={device}, dtype={self._torch}.{dtype})"), cst.Call)
        func = cst.ensure_type(updated.func, cst.Attribute).with_changes(attr=cst.Name("to"))
        return template.with_changes(func=func, lpar=updated.lpar, rpar=updated.rpar)


def _dtype_of(alias: Alias, call: cst.Call) -> str:
    """The dtype a read of ``alias`` makes: the alias's, or for ``tt.LongTensor(...)`` the type's."""
    if alias.dtype != MODULE:
        return alias.dtype
    return torch_api.LEGACY_TENSOR_DTYPES[cst.ensure_type(call.func, cst.Attribute).attr.value]


def _a_method_reads_its_own(owner: cst.ClassDef, chain: list, read: cst.BaseExpression) -> bool:
    """``read`` is ``self.tt`` in a method of ``owner`` (not a nested function), ``self`` its
    first parameter."""
    if not chain or not any(method is chain[-1] for method in statements_of(owner)):
        return False
    method = cst.ensure_type(chain[-1], cst.FunctionDef)
    params = [*method.params.posonly_params, *method.params.params]
    return bool(params) and not method.decorators and m.matches(read, m.Attribute(value=m.Name(params[0].name.value)))


def _attribute_names(module: cst.Module) -> set[str]:
    return {node.attr.value for node in traversal.of_classes(module, cst.Attribute)}


class _Read(NamedTuple):
    """Where a read of an alias is (see :func:`_walk_reads`)."""

    parent: cst.CSTNode | None
    grand: cst.CSTNode | None
    chain: list
    top: int


def _walk_reads(module: cst.Module, wanted: dict[int, Alias], seen: dict) -> None:
    """For each read of ``wanted``: its parent, grandparent, the functions around it and the
    index of the statement of its scope's body holding it."""
    stack: list[tuple] = [(module, None, None, [], -1)]
    while stack:
        node, parent, grand, chain, top = stack.pop()
        if id(node) in wanted:
            seen[id(node)] = _Read(parent, grand, chain, top)
        inner = [*chain, node] if isinstance(node, cst.FunctionDef) else chain
        body = node.body if isinstance(node, (cst.Module, cst.IndentedBlock)) else None
        scope_body = isinstance(node, cst.Module) or (isinstance(node, cst.IndentedBlock) and isinstance(parent, cst.FunctionDef))
        for child in traversal.children(node):
            child_top = top
            if body is not None and scope_body and isinstance(child, cst.BaseStatement):
                child_top = next(i for i, s in enumerate(body) if s is child)
            stack.append((child, node, parent, inner, child_top))


# -- stage 1 ---------------------------------------------------------------------------------
LEGACY_TYPE_NAMES = frozenset(torch_api.LEGACY_TENSOR_DTYPES)


def _is_cuda_legacy_type(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "torch" and parts[1:-1] == ["cuda"] and parts[-1] in LEGACY_TYPE_NAMES


def _type_of_type(call: ast.Call) -> bool:
    """Stage 1 of ``x.type(type(y))``."""
    return (
        isinstance(call.func, ast.Attribute) and call.func.attr == "type" and len(call.args) == 1 and not call.keywords
        and isinstance(call.args[0], ast.Call) and isinstance(call.args[0].func, ast.Name) and call.args[0].func.id == "type"
    )
