from __future__ import annotations

import ast
from typing import Iterator
import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from torchfix_device.syntax import imports as _imports
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.base import Codemod
from torchfix_device.codemods.cuda_call.gpu_index import PRESUMED, UNKNOWN, catching_runtime_error, index_evidence
from torchfix_device.codemods.cuda_call.guards import (
    contains_move, guard_kind, header_comment, moved_value, moves_onto, rebinds, small_statements,
)
from torchfix_device.codemods.cuda_call.flag_guards import FlagGuards
from torchfix_device.codemods.cuda_call import cuda_assert
from torchfix_device.codemods.cuda_call.move_wrappers import MoveWrappers, wrapper_names
from torchfix_device.codemods.cuda_call.cuda_only import cuda_only_calls
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.devices import module_device_test
from torchfix_device.facts.kinds import OWN, moves_itself
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.devices.source import DeviceExpr, NoDevice

NOT_TORCH_PREFIXES = ("numba", "cupy", "pycuda", "jax", "tensorflow", "cudf", "mxnet", "chainer")
MOVE_METHODS = {"cuda", "to"}


class CudaCall(Codemod):
    """
    ## What it does
    Rewrites `.cuda()` calls to `.to(device)`: `model.cuda()`, `x.cuda()`, chains such as
    `torch.randn(3).cuda()`, `Net().cuda()`, `torch.load(p).cuda()`, and
    `.cuda(non_blocking=True)` → `.to(device, non_blocking=True)`; `.cuda(t.get_device())` →
    `.to(t.device)`; a GPU index, `.cuda(0)` / `.cuda(device=0)` / `.cuda(cd)` where every
    binding of `cd` in its scope is an int literal, → `.to(torch.device("cuda", 0))`; a guard
    around it stays (the move keeps its index: no device is built from the guard).

    The device comes from where the call is (see `torchfix_device.devices.source`): inside an
    `nn.Module` method the module's own device (`x.device` of `forward`'s input, or
    `self.weight.device`), never a module-level global; in a function with a `device` argument,
    that argument. Where the user's own flag decides (`if args.cuda:`, `if use_gpu:`,
    `x.cuda() if use_cuda else x`), the device is built from that flag,
    `device = torch.device("cuda" if args.cuda else "cpu")`, placed right after the statement
    from which the flag no longer changes (after `args.cuda = not args.no_cuda and
    torch.cuda.is_available()`; inside `main()` when the flag is parsed there; at the top of a
    function whose parameter it is; never above `import torch`), and every move after it takes
    that device, so `--no-cuda` still means the CPU (`and torch.cuda.is_available()` is added
    when the flag does not ask it itself). Elsewhere an existing `device = torch.device(...)` binding, or
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` inserted once after
    the imports (with a free name when `device` is already bound to something else).

    A guard on the flag goes when its body only moves existing values, it has no `else`, and
    each value is shown to be on the CPU just before it (made by a torch factory without
    `device=`, a CPU tensor type, a `torch.nn` layer or loss, or an `nn.Module` class of the file
    that neither moves nor loads anything): `if args.cuda: model.cuda()` → `model.to(device)`,
    `x.cuda() if use_cuda else x` → `x.to(device)`. A guard that only existed to call `.cuda()`
    — `if torch.cuda.is_available(): model.cuda()` — goes the same way (the device asks the same
    question), and a guard on a tensor's device (`if boxes.is_cuda: v = v.cuda()`) too, its moves
    taking that tensor's device: `v = v.to(boxes.device)`; and a module's own device test, a
    method whose whole body returns where its tensors are (`self.is_cuda()` returning
    `'cuda' in str(type(self.lstm.bias_hh_l0.data))`, which is always false on torch 2.x, whose
    tensors all have the type `torch.Tensor`), its moves taking the device the method computes on.

    A module-level lambda that moves what it returns when the flag is on, `Variable = lambda
    *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else
    autograd.Variable(*args, **kwargs)`, goes, and each call `Variable(x, volatile=True)` becomes
    `autograd.Variable(x, volatile=True).to(device)` (see `cuda_call/move_wrappers.py` for when).

    `assert torch.cuda.is_available()` standing on its own line, which stops the program without
    a GPU before its device-agnostic code can run on the CPU, goes with `--unsafe-fixes`.

    ## Why is this bad?
    `.cuda()` hard-codes one kind of hardware: the code crashes on a CPU-only machine, an Apple
    GPU or an XPU, and every tensor and module must be moved by hand to the same place.
    A single device expression makes the code run anywhere and keeps every tensor on one device,
    avoiding `RuntimeError: Expected all tensors to be on the same device`.

    ## Example
    ```python
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    model = nn.Linear(4, 2)
    if args.cuda:
        model.cuda()
    inputs = inputs.cuda(non_blocking=True)
    ```

    ## Use instead
    ```python
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cuda" if args.cuda else "cpu")
    model = nn.Linear(4, 2)
    model.to(device)
    inputs = inputs.to(device, non_blocking=True)
    ```

    ## Not rewritten
    - An index only named like one (`args.gpu`, `gpu_id`, `device_id`, `local_rank`) is
      rewritten the same way with `--unsafe-fixes` only; one ordered against an int by the guard
      around the call (`if self.gpu >= 0: x = x.cuda(self.gpu)`) is an int-like number or fails
      that guard, and is rewritten by default. An index
      that may be a `torch.device`, a string or `None` (`.cuda("cuda:1")`, a parameter, a name
      bound to a string on some path, `x /= 2`) is reported for manual review:
      `torch.device("cuda", i)` raises `TypeError` where `.cuda(i)` moved.
    - `self.cuda()` inside a class (the object moves itself: only its caller knows where to),
      and `.cuda()` inside `__init__` or nested functions of an `nn.Module` (no module device
      exists there; a static or class method takes the device as a function does): reported for
      manual review.
    - `x.cuda` without a call, the `torch.cuda.*` namespace (`torch.cuda.is_available()`,
      `torch.cuda.synchronize()`), and objects that are not torch (numba's `cuda`, cupy, pycuda,
      a class's own `cuda` method called on `self`).
    - Guards on a flag stay, only the calls inside being rewritten, when the flag cannot give
      the device — it changes after the guard or in another function, is bound only on some
      paths, belongs to an imported object (`cfg.CUDA`), or the guards of the scope test
      different flags (`use_cuda` and `opt.cuda`); a GPU index (`if args.gpu >= 0:` around
      `.cuda(args.gpu)`) is no flag — or when nothing shows a moved value is on the CPU (a
      parameter, a loop variable, a loaded model), the guard has an `else`, or its body does
      more than move (`if args.multi_gpu: model = nn.DataParallel(model).cuda()`). The message
      says which. Names such as `multi_gpu`, `n_gpu`, `gpu_ids` are not flags.
    - Guards on `torch.cuda.is_available()` with an `else` or doing more than move: only the
      calls inside are rewritten; when one such guard stays, every guard on the same condition
      stays.
    - `assert torch.cuda.is_available()` in a file that imports a CUDA-only library, one that
      removing would take a comment with it or leave its block empty: reported.
    - `.cuda()` among the statements of a block that imports a CUDA-only library (cupy, pycuda,
      pynvrtc, numba's `cuda`): it sets CUDA up for that library (a kernel compiled with NVRTC
      runs in the context it creates), and no other device can run the block. Reported for
      manual review; a guard around it stays.

    ## Fix safety
    Safe. With the flag on, or on a machine with CUDA, the chosen device is the current CUDA
    device, as `.cuda()` was; with the flag off, a guard goes only where `.to(device)` leaves the
    value where it was, on the CPU. A `.cuda()` outside any guard, after the flag is final, now
    follows the flag: with `--no-cuda` it stays on the CPU, as the guarded code does, where it
    went to the GPU and met CPU tensors before. Without CUDA the code runs on the CPU instead of
    raising. `.cuda(i)` with an int `i` is `.to(torch.device("cuda", i))` on tensors and modules
    (a negative `i` raises the same `RuntimeError`); without CUDA both raise, torch 2.13 giving
    `.cuda(0)` a `RuntimeError` and the rewrite the `AssertionError` that `.cuda()` raises on a
    CPU build. An index ordered against an int by its guard is a number: a float or a bool fails
    both spellings with `TypeError`; only a 0-dim tensor index, refused by `.cuda(i)` but taken by
    `torch.device`, would now run. With an index only named like one the fix is unsafe: a string
    or a device there makes it raise `TypeError`; so is it inside a `try` whose handler catches `RuntimeError` (and
    not `AssertionError`): without CUDA the handler ran before, the rewrite's error escapes it.
    A call of a moving lambda is safe where the flag asks `torch.cuda.is_available()` or what it
    wraps is `Variable` of a value shown to be on the CPU; elsewhere unsafe (with the flag off,
    `.to(device)` would bring a value from wherever it was to the CPU); the lambda goes once every
    call is rewritten.
    Taking `assert torch.cuda.is_available()` away is unsafe: it says the program needs a GPU,
    which only its author can take back; with a GPU nothing changes, without one the program runs
    on the CPU where it stopped.
    In a method of an `nn.Module` that makes no parameter or buffer of its own but is given its
    submodules (`self.extractor = extractor` in `__init__`) or is a base that classes of the run
    subclass (their file importing its file: an abstract base whose subclasses build its layers),
    `.to(next(self.parameters()).device)` is unsafe: nothing shows the module has a parameter
    when it runs, without which `next(...)` raises `StopIteration`.
    """

    code = "TFD001"
    skips_within_statements = True
    name = "cuda-call"
    summary = "`.cuda()` hard-codes CUDA: use `.to(device)` with one device expression"
    safe = True
    triggers = ("cuda",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        return "cuda" in facts.call_attrs or next(cls.sites(facts), None) is not None

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``x.cuda(...)`` (a guard or conditional it rewrites holds one), and ``assert
        <...>.is_available()``."""
        cuda, asserts = "cuda" in facts.call_attrs, "is_available" in facts.names
        if not (cuda or asserts):
            return
        wrappers = wrapper_names(facts.tree) if cuda and facts.tree is not None else set()
        for node, _, _ in facts.contexts:
            if cuda and type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "cuda":
                yield node
            elif wrappers and type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in wrappers:
                yield node
            elif asserts and type(node) is ast.Assert and cuda_assert.may_ask_cuda_available(node.test):
                yield node

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._own_cuda_classes = {
            id(c) for c in _walk_classes(node)
            if any(isinstance(s, cst.FunctionDef) and s.name.value == "cuda" for s in c.body.body)
        }
        self._rewritten: set[int] = set()
        self._declined: set[int] = set()
        self._cuda_only = cuda_only_calls(node)
        self._kept_conditions = self._conditions_of_guards_that_stay(node)
        self._guard_devices = self._devices_from_guards(node)
        self._flag_guards = FlagGuards(self, node)
        self._asks_itself = self._calls_under_is_available(node)
        self._device_of: dict[int, str] = {}
        self._wrappers = MoveWrappers(self, node)
        self._wrapper_lines: list[tuple[cst.SimpleStatementLine, cst.SimpleStatementLine]] = []
        return None

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        gone = {id(s) for s in self._wrappers.removed()}
        removed = [s for o, s in self._wrapper_lines if id(o) in gone]
        if removed:
            updated_node = updated_node.with_changes(body=nodes.without_statements(updated_node.body, removed))
        return super().leave_Module(original_node, updated_node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not m.matches(original_node.func, m.Attribute(attr=m.Name("cuda"))):
            return self._wrappers.rewrite(original_node, updated_node) or updated_node
        if self._wrappers.skips(original_node):
            return updated_node
        receiver = cst.ensure_type(original_node.func, cst.Attribute).value
        if self._not_torch(receiver):
            return updated_node
        library = self._cuda_only.get(id(original_node))
        if library is not None:
            self._declined.add(id(original_node))
            message = (
                f"`.cuda()` in a block that imports `{library}`, a CUDA-only library: it sets CUDA up"
                " for that library, and no other device can run the block (left as it is)"
            )
            self.report(original_node, message, fixable=False)
            return updated_node
        explicit = [a for a in original_node.args if a.keyword is None or a.keyword.value == "device"]
        single = len(explicit) == 1 and not nodes.has_star_args(original_node)
        if single and _get_device_of(explicit) is None:  # `.cuda(0)`, `.cuda(args.gpu)`
            return self._index_move(original_node, updated_node, receiver, explicit[0])
        if m.matches(receiver, m.Name("self")):
            self._declined.add(id(original_node))
            self.report(original_node, "`self.cuda()`: the object moves itself; let its caller choose the device", fixable=False)
            return updated_node
        doubt = moves_itself(self, receiver, original_node)
        if doubt is not None and doubt[0] == OWN:
            return self._moves_itself(original_node, updated_node, receiver, doubt[1])
        follows = _get_device_of(explicit) if single else None
        if follows is not None:  # `.cuda(t.get_device())`: where `t` is
            if not self.report(original_node, f"`.cuda({nodes.code_of(explicit[0].value)})` follows a tensor: use `.to({follows}.device)`"):
                return updated_node
            self._rewritten.add(id(original_node))
            kept = [a for a, o in zip(updated_node.args, original_node.args) if o is not explicit[0]]
            return _to_device_call(updated_node.with_changes(args=kept), f"{follows}.device")
        if explicit or nodes.has_star_args(original_node):
            self._declined.add(id(original_node))
            shown = nodes.code_of(original_node)
            self.report(original_node, f"`{shown}` names a device explicitly: choose a device expression by hand", fixable=False)
            return updated_node
        guarded = self._guard_devices.get(id(original_node))
        if guarded is not None:
            device: DeviceExpr | NoDevice = DeviceExpr(guarded)
        else:
            device = self.device_source.for_site(original_node, ignore_flag=id(original_node) in self._asks_itself, unproven=True)
        if isinstance(device, NoDevice):
            self._declined.add(id(original_node))
            self.report(original_node, f"`.cuda()`: {device.reason}", fixable=False)
            return updated_node
        message = f"`{_short(receiver)}.cuda()` hard-codes CUDA: use `.to({device.code})`"
        flag_guard = self._flag_guards.guard_of(original_node)
        if flag_guard is not None and (stays := self._flag_guards.why_it_stays(flag_guard)) is not None:
            message += f"; the guard `{self._flag_guards.shown(flag_guard)}` stays because {stays}"
        if doubt is not None:
            message += f"; unsafe: the run defines {doubt[1]} with their own `cuda()`/`to()`, and nothing shows what `{nodes.code_of(receiver)}` is"
        elif device.unproven is not None:
            message += f"; unsafe: {device.unproven}"
        if not self.report(original_node, message, safe=False if doubt is not None or device.unproven is not None else None):
            return updated_node
        self._rewritten.add(id(original_node))
        self._device_of[id(original_node)] = device.code
        return _to_device_call(updated_node, device.code)

    def _moves_itself(self, node: cst.Call, updated: cst.Call, receiver: cst.BaseExpression, classes: str) -> cst.Call:
        self._declined.add(id(node))
        shown = nodes.code_of(receiver)
        message = f"`{shown}` may be a `{classes}`, which defines its own `cuda()`: `.to()` is another method, so move it by hand"
        self.report(node, message, fixable=False)
        return updated

    def _index_move(self, node: cst.Call, updated: cst.Call, receiver: cst.BaseExpression, index: cst.Arg) -> cst.Call:
        """``x.cuda(i)`` → ``x.to(torch.device("cuda", i))``, safe where ``i`` is shown to be an
        int (``_gpu_index``). Its guard stays: it tests the index, not a user's flag."""
        doubt = moves_itself(self, receiver, node)
        if doubt is not None and doubt[0] == OWN:
            return self._moves_itself(node, updated, receiver, doubt[1])
        shown = nodes.code_of(node)
        kind, evidence = index_evidence(self, node, index.value)
        if kind == UNKNOWN:
            self._declined.add(id(node))
            self.report(node, f"`{shown}` names a device explicitly and {evidence}: choose a device expression by hand", fixable=False)
            return updated
        torch_name = _imports.torch_module_alias(self.visited_module)
        new_index = next(u for u, o in zip(updated.args, node.args) if o is index)
        device = f'{torch_name or "torch"}.device("cuda", {nodes.code_of(new_index.value)})'
        message = f"`{shown}` moves to CUDA device `{nodes.code_of(index.value)}`: use `.to({device})`"
        handler = catching_runtime_error(self, node, index.value)
        if kind == PRESUMED:
            why = f"{evidence}; nothing shows it is an int, not a `torch.device` or a string"
        elif handler is not None:
            why = f"`except {handler}` around it: without a GPU `.cuda(i)` raises RuntimeError, the rewrite AssertionError"
        elif doubt is not None:
            why = f"the run defines {doubt[1]} with their own `cuda()`/`to()`, and nothing shows what `{nodes.code_of(receiver)}` is"
        else:
            why = None
        if why is not None:
            message += f"; unsafe: {why}"
        if not self.report(node, message, safe=False if why is not None else None):
            return updated
        if torch_name is None:
            AddImportsVisitor.add_needed_import(self.context, "torch")
        kept = [a for a in updated.args if a is not new_index]
        return _to_device_call(updated.with_changes(args=kept), device)

    # -- guards -----------------------------------------------------------------------------
    def _devices_from_guards(self, module: cst.Module) -> dict[int, str]:
        """``.cuda()`` calls guarded by a tensor's device (``if boxes.is_cuda:``, ``x.cuda() if
        t.is_cuda else x``) → that tensor's device (``boxes.device``)."""
        found: dict[int, str] = {}
        for node in traversal.of_classes(module, cst.If, cst.IfExp):
            if guard_kind(node.test) == "tensor":
                tensor = cst.ensure_type(node.test, cst.Attribute).value
                if rebinds(node.body, tensor):
                    continue  # `t.device` may no longer be the device that was tested
                device = f"{nodes.code_of(tensor)}.device"
                for n in traversal.of_classes_under(module, node.body, cst.Call):
                    if m.matches(n.func, m.Attribute(attr=m.Name("cuda"))):
                        found.setdefault(id(n), device)
        return found

    def _conditions_of_guards_that_stay(self, module: cst.Module) -> set[str]:
        """Conditions (as code) of CUDA guards around moves that cannot all be dropped.

        A user flag (``if args.cuda:``) must mean one thing in a file: dropping some of its
        guards and keeping others would put the model on one device and its inputs on another.
        """
        kept = set()
        for node in traversal.walk_statements(module):
            if isinstance(node, cst.If) and self._guard_may_go(node.test) and contains_move(node.body):
                if not self._guard_can_go(node) or self._holds_call_that_stays(node.body):
                    kept.add(nodes.code_of(node.test))
        return kept

    def _holds_call_that_stays(self, body: cst.BaseSuite) -> bool:
        """A ``.cuda()`` under ``body`` carries ``# noqa`` or serves a CUDA-only library: it
        stays, so its guard stays too."""
        return any(
            isinstance(n, cst.Call) and m.matches(n.func, m.Attribute(attr=m.Name("cuda")))
            and (id(n) in self._cuda_only or self.is_suppressed(n))
            for n in traversal.walk(body)
        )

    def _guard_can_go(self, node: cst.If) -> bool:
        if node.orelse is not None:
            return False
        statements = small_statements(node.body)
        if not statements or not all(self._is_move(s) for s in statements):
            return False
        calls = [n for n in traversal.walk(node.body) if isinstance(n, cst.Call) and m.matches(n.func, m.Attribute(attr=m.Name("cuda")))]
        return not any(a.keyword is None or a.keyword.value == "device" for c in calls for a in c.args)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if any(original_node is w.statement for w in self._wrappers.wrappers):
            self._wrapper_lines.append((original_node, updated_node))
        return cuda_assert.leave_line(self, original_node, updated_node)

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.BaseStatement | cst.FlattenSentinel:
        if self._flag_guards.flag_of(original_node) is not None:
            if not self._flag_guard_goes(original_node, original_node.body):
                return updated_node
        elif not self._guard_may_go(original_node.test) or not self._guard_can_go(original_node):
            return updated_node
        elif nodes.code_of(original_node.test) in self._kept_conditions:
            return updated_node
        if not self._all_cuda_calls_rewritten(original_node.body):
            return updated_node
        body = updated_node.body
        if isinstance(body, cst.SimpleStatementSuite):
            small = [s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for s in body.body]
            lines: list[cst.BaseStatement] = [cst.SimpleStatementLine(body=small, trailing_whitespace=body.trailing_whitespace)]
        else:
            lines = list(cst.ensure_type(body, cst.IndentedBlock).body)
        comment = header_comment(updated_node)
        first = lines[0]
        leading = [*updated_node.leading_lines, *([comment] if comment else []), *first.leading_lines]
        lines[0] = first.with_changes(leading_lines=leading)
        return cst.FlattenSentinel(lines)

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        """``x.cuda() if use_cuda else x`` → ``x.to(device)``."""
        if not (isinstance(original_node.body, cst.Call) and id(original_node.body) in self._rewritten):
            return updated_node
        if self._flag_guards.flag_of(original_node) is not None:
            if not self._flag_guard_goes(original_node, original_node.body):
                return updated_node
        elif not self._guard_may_go(original_node.test):
            return updated_node
        elif nodes.code_of(original_node.test) in self._kept_conditions:
            return updated_node
        receiver = cst.ensure_type(original_node.body.func, cst.Attribute).value
        if not original_node.orelse.deep_equals(receiver):
            return updated_node
        return updated_node.body.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)

    def _flag_guard_goes(self, guard: cst.If | cst.IfExp, body: cst.CSTNode) -> bool:
        """A guard on a user's flag goes when nothing keeps it and every move in it took the
        flag's own device (not a module's, nor one declined)."""
        flag = self._flag_guards.flag_of(guard)
        if flag is None or self._flag_guards.why_it_stays(guard) is not None or self.is_suppressed(guard):
            return False
        name = self.device_source.flags.binding_name(flag)
        calls = [n for n in traversal.walk(body) if isinstance(n, cst.Call) and m.matches(n.func, m.Attribute(attr=m.Name("cuda")))]
        return bool(calls) and all(self._device_of.get(id(c)) == name for c in calls)

    def _calls_under_is_available(self, module: cst.Module) -> set[int]:
        """``.cuda()`` calls under a guard asking ``torch.cuda.is_available()`` itself: they take
        the default device, which asks the same, and not a user flag's."""
        found: set[int] = set()
        for node in traversal.of_classes(module, cst.If, cst.IfExp):
            if isinstance(node.test, cst.Call) and self._is_cuda_condition(node.test):
                found.update(id(n) for n in traversal.of_classes_under(module, node.body, cst.Call) if m.matches(n.func, m.Attribute(attr=m.Name("cuda"))))
        return found

    def _guard_may_go(self, test: cst.BaseExpression) -> bool:
        """:meth:`_is_cuda_condition`, or the module's own device test (``self.is_cuda()``:
        :func:`~torchfix_device.facts.devices.module_device_test`)."""
        return self._is_cuda_condition(test) or module_device_test(facts_values.of(self), test)

    def _is_cuda_condition(self, test: cst.BaseExpression) -> bool:
        """A guard that may go once its moves are rewritten: ``torch.cuda.is_available()``
        (the device expression asks the same question) or ``t.is_cuda`` (the moves take
        ``t.device``). A user's flag (``args.cuda``, ``use_gpu``) is never one: dropping it would
        make ``--no-cuda`` train on the GPU."""
        if isinstance(test, cst.Call):
            return cuda_assert.asks_cuda_available(self, test)
        return guard_kind(test) == "tensor"

    def _is_move(self, stmt: cst.BaseSmallStatement) -> bool:
        """A move of an existing value and nothing else: ``x.cuda()``, ``x = x.to(d)``,
        ``a, b = a.cuda(), b.cuda()``. Not ``model = nn.DataParallel(model).cuda()`` nor
        ``x = y.cuda()``: those do more than move, so their guard stays."""
        if isinstance(stmt, cst.Expr):
            return moved_value(stmt.value) is not None
        if not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1:
            return False
        target = stmt.targets[0].target
        if isinstance(stmt.value, cst.Tuple) and isinstance(target, cst.Tuple):
            pairs = list(zip(target.elements, stmt.value.elements))
            if len(target.elements) != len(stmt.value.elements):
                return False
            return all(moves_onto(t.value, v.value) for t, v in pairs)
        return moves_onto(target, stmt.value)

    def _all_cuda_calls_rewritten(self, body: cst.BaseSuite) -> bool:
        calls = [n for n in traversal.walk(body) if isinstance(n, cst.Call) and m.matches(n.func, m.Attribute(attr=m.Name("cuda")))]
        return bool(calls) and all(id(c) in self._rewritten for c in calls)

    def _not_torch(self, receiver: cst.BaseExpression) -> bool:
        if m.matches(receiver, m.Name("self")) and self.class_stack and id(self.class_stack[-1]) in self._own_cuda_classes:
            return True
        for q in self.qualified_names(receiver):
            if q == "torch" or q.split(".")[0] in NOT_TORCH_PREFIXES:
                return True
        return False


def _get_device_of(args: list[cst.Arg]) -> str | None:
    """``t`` for the one argument ``t.get_device()`` (a plain name or attribute chain)."""
    value = args[0].value
    if isinstance(value, cst.Call) and not value.args and m.matches(value.func, m.Attribute(attr=m.Name("get_device"))):
        return nodes.dotted_name(cst.ensure_type(value.func, cst.Attribute).value)
    return None


def _to_device_call(call: cst.Call, device_code: str) -> cst.Call:
    """``r.cuda(kw=v)`` → ``r.to(<device>, kw=v)``."""
    func = cst.ensure_type(call.func, cst.Attribute).with_changes(attr=cst.Name("to"))
    new = cst.ensure_type(cst.parse_expression(f"_.to({device_code})"), cst.Call).with_changes(
        func=func, lpar=call.lpar, rpar=call.rpar, whitespace_after_func=call.whitespace_after_func
    )
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value != "async":
            new = nodes.add_keyword_arg(new, arg.keyword.value, arg.value)
    return new


def _walk_classes(node: cst.CSTNode):
    return (n for n in traversal.walk_statements(node) if isinstance(n, cst.ClassDef))


def _short(node: cst.CSTNode, limit: int = 40) -> str:
    """The code of ``node`` on one line, cut to ``limit`` characters (``...`` in the middle)."""
    text = " ".join(nodes.code_of(node).split())
    return text if len(text) <= limit else text[: limit // 2 - 2] + "..." + text[-(limit // 2 - 1):]
