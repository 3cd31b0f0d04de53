from __future__ import annotations

import ast
from typing import Iterator
import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.devices.source import DeviceExpr

OLD_MODULES = ("torch.cuda.amp", "torch.cuda.amp.autocast_mode", "torch.cuda.amp.grad_scaler")
NAMES = ("autocast", "GradScaler")
# ``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)``: its positional parameters, which
# ``torch.amp.autocast(device_type, dtype, enabled, cache_enabled)`` takes in another order.
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")


def _old_name(qualified: set[str]) -> str | None:
    for q in qualified:
        module, _, name = q.rpartition(".")
        if module in OLD_MODULES and name in NAMES:
            return name
    return None


class CudaAmp(Codemod):
    """
    ## What it does
    Rewrites the deprecated CUDA-only mixed-precision API to `torch.amp`:
    `torch.cuda.amp.autocast(...)` → `torch.amp.autocast("cuda", ...)` and
    `torch.cuda.amp.GradScaler(...)` → `torch.amp.GradScaler("cuda", ...)`. With
    `from torch.cuda.amp import autocast, GradScaler` the import becomes
    `from torch.amp import autocast, GradScaler` and every call gains `"cuda"`. Positional
    arguments of `autocast` (`enabled`, `dtype`, `cache_enabled`) are passed by keyword, since
    `torch.amp.autocast` takes them in another order.

    ## Why is this bad?
    `torch.cuda.amp.autocast(args...)` and `torch.cuda.amp.GradScaler(args...)` are deprecated
    (`FutureWarning: torch.cuda.amp.autocast(args...) is deprecated. Please use
    torch.amp.autocast('cuda', args...) instead.`) and name CUDA in code that should say which
    device it runs on. `torch.amp` takes the device type as an argument, so the same code can run
    on `"cpu"`, `"mps"` or `"xpu"`.

    ## Example
    ```python
    from torch.cuda.amp import autocast, GradScaler

    scaler = GradScaler()
    with autocast():
        loss = model(x)
    ```

    ## Use instead
    ```python
    from torch.amp import autocast, GradScaler

    scaler = GradScaler("cuda")
    with autocast("cuda"):
        loss = model(x)
    ```
    The rewrite writes `"cuda"`, which is what the old code meant. With `--unsafe-fixes`, where
    the code already has a device at the call (a `device = torch.device(...)` binding or
    argument, or inside an `nn.Module` method the module's or input's device), it writes that
    device's type instead, so the same line also autocasts on the CPU:
    `torch.amp.autocast(device.type)`.

    ## Not rewritten
    Calls with `*args`; an imported `autocast`/`GradScaler` that is also used other than by
    calling it (`ctx = autocast if amp else nullcontext`), or whose import line imports other
    names too (`custom_fwd`); other spellings (`from torch.cuda import amp; amp.autocast()`):
    reported for manual review. `torch.cuda.amp.custom_fwd`/`custom_bwd` are left alone.

    ## Fix safety
    Safe: `torch.cuda.amp.autocast(...)` and `GradScaler(...)` are thin wrappers that call
    `torch.amp.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)` with the same
    arguments, so behaviour is unchanged (minus the warning). The `device.type` variant (only
    with `--unsafe-fixes`) is unsafe: on a machine without CUDA the old code disabled autocast
    with a warning, the new code autocasts on the CPU (bfloat16 by default), so the numbers
    change there.
    """

    code = "TFD011"
    name = "cuda-amp"
    summary = "`torch.cuda.amp.autocast`/`GradScaler` are deprecated: use `torch.amp` with a device type"
    safe = True
    triggers = ("amp",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        return facts.torch_imported and "amp" in facts.names and bool(facts.names & set(NAMES))

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """A call to ``torch.cuda.amp.autocast`` / ``GradScaler``, and the imports from
        ``torch.cuda.amp`` it moves to ``torch.amp``."""
        if not cls.may_match(facts):
            return
        scan = facts.scan
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Call) and scan.may_name(node.func, OLD_NAMES):
                yield node
            elif isinstance(node, ast.ImportFrom) and node.module == "torch.cuda.amp" and not node.level:
                yield node

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        callees: set[int] | None = None
        """``id`` of each callee called without ``*args`` (the calls rewritten)."""
        self._movable_imports: set[int] = set()
        self._name_calls: set[int] = set()
        for imp in traversal.walk_statements(node):
            if not isinstance(imp, cst.ImportFrom) or imp.relative or imp.module is None:
                continue
            if nodes.dotted_name(imp.module) != "torch.cuda.amp" or isinstance(imp.names, cst.ImportStar):
                continue
            names = [nodes.dotted_name(a.name) for a in imp.names]
            if not all(n in NAMES for n in names):
                continue
            uses = self.import_reads(imp)
            if uses is None:
                continue
            if callees is None:
                callees = {id(n.func) for n in traversal.walk(node) if isinstance(n, cst.Call) and not any(a.star for a in n.args)}
            # every use must be rewritten for the import to move: none may be suppressed
            if all(id(u) in callees and not self.is_suppressed(u) for u in uses):
                self._movable_imports.add(id(imp))
                self._name_calls.update(id(u) for u in uses)
        return None

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        # Every use is a call rewritten below (and reported there), so the import moves with them.
        if id(original_node) not in self._movable_imports:
            return updated_node
        return updated_node.with_changes(module=cst.parse_expression("torch.amp"))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = _old_name(self.qualified_names(original_node.func, ending_in=frozenset(NAMES)))
        if name is None:
            return updated_node
        old = f"torch.cuda.amp.{name}"
        func = original_node.func
        if any(a.star for a in original_node.args):
            self.report(original_node, f"`{old}` is deprecated: `*args` hides its arguments; rewrite by hand", fixable=False)
            return updated_node
        if isinstance(func, cst.Name):
            if id(func) not in self._name_calls:
                self.report(
                    original_node,
                    f"`{old}` is deprecated: use `torch.amp.{name}(\"cuda\", ...)` by hand, since its import cannot move to `torch.amp` with it",
                    fixable=False,
                )
                return updated_node
            new_func: cst.BaseExpression = updated_node.func
        elif (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Attribute)
            and func.value.attr.value == "amp"
            and isinstance(func.value.value, cst.Attribute)
            and func.value.value.attr.value == "cuda"
        ):
            torch_expr = func.value.value.value
            new_func = func.with_changes(value=func.value.with_changes(value=torch_expr))
        else:
            self.report(original_node, f"`{old}` is deprecated: use `torch.amp.{name}(\"cuda\", ...)`", fixable=False)
            return updated_node
        if not self.report(original_node, f"`{old}` is deprecated: use `torch.amp.{name}(\"cuda\", ...)`"):
            return updated_node
        args = list(updated_node.args)
        if name == "autocast":
            args = _positional_to_keywords(args)
        cuda = cst.Arg(self._device_type(original_node))
        if args:
            after = args[0].comma.whitespace_after if isinstance(args[0].comma, cst.Comma) else cst.SimpleWhitespace(" ")
            cuda = cuda.with_changes(comma=cst.Comma(whitespace_after=after))
        return updated_node.with_changes(func=new_func, args=[cuda, *args])

    def _device_type(self, call: cst.Call) -> cst.BaseExpression:
        """``"cuda"``; with ``--unsafe-fixes``, ``<device>.type`` of a device the code already has
        at the call (an existing binding, the module's or the input's device)."""
        if self.options.applies(safe=False):
            device = self.device_source.for_site(call)
            inserted = {self.device_source.inserted_name, *self.device_source.flags.requested_names()}
            if isinstance(device, DeviceExpr) and device.code not in inserted:
                return cst.parse_expression(f"{device.code}.type")
        return cst.SimpleString('"cuda"')


def _positional_to_keywords(args: list[cst.Arg]) -> list[cst.Arg]:
    template = cst.ensure_type(cst.parse_expression("f(k=v)"), cst.Call).args[0]
    out = []
    for index, arg in enumerate(args):
        if arg.keyword is None and index < len(AUTOCAST_POSITIONAL):
            arg = arg.with_changes(keyword=cst.Name(AUTOCAST_POSITIONAL[index]), equal=template.equal)
        out.append(arg)
    return out


OLD_NAMES = frozenset(f"{module}.{name}" for module in OLD_MODULES for name in NAMES)
