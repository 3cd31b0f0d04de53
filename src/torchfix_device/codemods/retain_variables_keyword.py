import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts import kinds
from torchfix_device.facts import values as facts_values
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes, traversal

OLD, NEW = "retain_variables", "retain_graph"
AUTOGRAD_BACKWARD = frozenset({"torch.autograd.backward"})


class RetainVariablesKeyword(Codemod):
    """
    ## What it does
    Renames the keyword argument `retain_variables=` of `x.backward(...)` and
    `torch.autograd.backward(...)` to `retain_graph=`, its name since PyTorch 0.4 (0.2 and 0.3
    took both, `retain_variables` deprecated).

    ## Why is this bad?
    PyTorch 0.4 removed the old name: on torch 2.x, `loss.backward(retain_variables=True)` raises
    `TypeError: Tensor.backward() got an unexpected keyword argument 'retain_variables'`, the
    first time a GAN or a style-transfer script takes a training step.

    ## Example
    ```python
    D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
    D_loss.backward(retain_variables=True)
    ```

    ## Use instead
    ```python
    D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
    D_loss.backward(retain_graph=True)
    ```

    ## Not rewritten
    Calls of anything but a `backward` method or `torch.autograd.backward`. Reported for manual
    review: a call that also passes `retain_graph=` or `**kwargs` (keep one name by hand), and any
    `x.backward(retain_variables=...)` in a file where a class defines its own `backward` with a
    `retain_variables` parameter (its callers keep the name).

    ## Fix safety
    Safe where the receiver is shown to be a tensor (made by torch, a loss, arithmetic on one),
    and for `torch.autograd.backward`: the flag is the same, only its name changed. Unsafe
    otherwise (`self.loss.backward(...)`, a parameter): a project object's own `backward`, defined
    in another file, may take the old name.
    """

    code = "TFD021"
    name = "retain-variables-keyword"
    summary = "`backward(retain_variables=...)` was renamed `retain_graph=` in PyTorch 0.4: torch 2.x raises TypeError"
    safe = True
    triggers = (OLD,)

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """Calls passing ``retain_variables=``."""
        if OLD not in facts.keywords:
            return
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Call) and any(k.arg == OLD for k in node.keywords):
                yield node

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self.values = facts_values.of(self)
        self.own_backward = any(
            isinstance(n, cst.FunctionDef) and n.name.value == "backward"
            and any(p.name.value == OLD for p in (*n.params.params, *n.params.kwonly_params, *n.params.posonly_params))
            for n in traversal.walk(node)
        )
        return None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        old = nodes.keyword_arg(original_node, OLD)
        if old is None:
            return updated_node
        func = original_node.func
        torch_function = bool(self.values.names(func) & AUTOGRAD_BACKWARD)
        method = isinstance(func, cst.Attribute) and func.attr.value == "backward" and not self.values.module_path(func)
        if not (torch_function or method):
            return updated_node
        if nodes.keyword_arg(original_node, NEW) is not None or any(a.star == "**" for a in original_node.args):
            self.report(original_node, f"`{OLD}=` was renamed `{NEW}=` in PyTorch 0.4 and this call also passes `{NEW}=` or `**kwargs`: keep one of them by hand", fixable=False)
            return updated_node
        message = f"`{OLD}=` was renamed `{NEW}=` in PyTorch 0.4 and torch 2.x raises TypeError on it: use `{NEW}=`"
        safe = True
        if not torch_function:
            receiver = cst.ensure_type(func, cst.Attribute).value
            if self.own_backward:
                self.report(original_node, f"`{OLD}=` may be a tensor's old keyword, but a class of this file defines `backward` with a `{OLD}` parameter: rename it by hand where the receiver is a tensor", fixable=False)
                return updated_node
            if not kinds.is_tensor(self.values, receiver):
                safe = False
                message += f"; unsafe: nothing shows `{nodes.code_of(receiver)}` is a tensor, and a project object's own `backward` may take the old name"
        if not self.report(original_node, message, safe=safe):
            return updated_node
        return updated_node.with_changes(
            args=[a.with_changes(keyword=cst.Name(NEW)) if a.keyword is not None and a.keyword.value == OLD else a for a in updated_node.args]
        )
