import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax.imports import torch_module_alias

ARGUMENTS = 7
"""``apply(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)``."""


class EmbeddingBackendApply(Codemod):
    """
    ## What it does
    Rewrites `embed._backend.Embedding.apply(words, weight, padding_idx, max_norm, norm_type,
    scale_grad_by_freq, sparse)`, the embedding dropout of AWD-LSTM and the many projects that
    copied its `embedded_dropout`, to `torch.nn.functional.embedding(...)` with the same
    arguments, a `padding_idx` of `-1` (the old backend's "no padding") becoming `None`.

    ## Why is this bad?
    `Module._backend` (the THNN function table) is gone since PyTorch 1.0: on torch 2.x the line
    raises `AttributeError: 'Embedding' object has no attribute '_backend'` at the first forward.
    `torch.nn.functional.embedding` takes the same seven arguments in the same order and computes
    the same lookup, the same in-place renormalisation with `max_norm` and the same gradient.

    ## Example
    ```python
    padding_idx = embed.padding_idx
    if padding_idx is None:
        padding_idx = -1
    X = embed._backend.Embedding.apply(words, masked_embed_weight,
      padding_idx, embed.max_norm, embed.norm_type,
      embed.scale_grad_by_freq, embed.sparse
    )
    ```

    ## Use instead
    ```python
    padding_idx = embed.padding_idx
    if padding_idx is None:
        padding_idx = -1
    X = torch.nn.functional.embedding(words, masked_embed_weight,
      None if padding_idx is None or padding_idx < 0 else padding_idx, embed.max_norm, embed.norm_type,
      embed.scale_grad_by_freq, embed.sparse
    )
    ```

    ## Not rewritten
    Other `_backend` functions, and calls with keyword or starred arguments, another number of
    arguments or a `padding_idx` that is neither a literal nor a name (reported for review). A file
    that does not `import torch` (or `import torch.<x>`) at module level.

    ## Fix safety
    Safe: the original raises on every torch since 1.0, so only runs that failed change, and the
    functional call computes what the backend computed. The old backend took a negative
    `padding_idx` as no padding index at all; `F.embedding` counts a negative one from the end
    of the vocabulary (the last word's row would get no gradient), hence the conversion.
    """

    code = "TFD027"
    name = "embedding-backend-apply"
    summary = "`embed._backend.Embedding.apply(...)` is gone since PyTorch 1.0: use `torch.nn.functional.embedding(...)`"
    safe = True
    triggers = ("_backend",)

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        for node, _, _ in facts.contexts:
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and func.attr == "apply" and isinstance(func.value, ast.Attribute) \
                    and func.value.attr == "Embedding" and isinstance(func.value.value, ast.Attribute) \
                    and func.value.value.attr == "_backend":
                yield node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "apply" and isinstance(func.value, cst.Attribute)
                and func.value.attr.value == "Embedding" and isinstance(func.value.value, cst.Attribute)
                and func.value.value.attr.value == "_backend"):
            return updated_node
        torch = torch_module_alias(self.values.module)
        if torch is None:
            return updated_node
        padding = _no_padding_as_none(original_node.args[2].value) if len(original_node.args) > 2 else None
        if len(original_node.args) != ARGUMENTS or any(a.keyword is not None or a.star for a in original_node.args) \
                or padding is None:
            self.report(original_node, "`._backend.Embedding.apply(...)` is gone since PyTorch 1.0: call "
                        "`torch.nn.functional.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, "
                        "sparse)` by hand (a negative `padding_idx` meant none: pass `None`)", fixable=False)
            return updated_node
        message = ("`._backend.Embedding.apply(...)` is gone since PyTorch 1.0 (AttributeError): "
                   f"`{torch}.nn.functional.embedding(...)` takes the same arguments; the old backend's negative "
                   "`padding_idx` (no padding) is `None` there")
        if not self.report(original_node, message):
            return updated_node
        args = list(updated_node.args)
        args[2] = args[2].with_changes(value=padding)
        return updated_node.with_changes(func=cst.parse_expression(f"{torch}.nn.functional.embedding"), args=args)


def _no_padding_as_none(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The ``padding_idx`` for ``F.embedding``: ``-1`` → ``None``, a name → ``None if p is None or
    p < 0 else p``, a non-negative literal or ``None`` as it is; None for anything else."""
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and isinstance(value.expression, cst.Integer):
        return cst.Name("None")
    if isinstance(value, cst.Integer) or (isinstance(value, cst.Name) and value.value == "None"):
        return value
    if isinstance(value, cst.Name):
        return cst.parse_expression(f"None if {value.value} is None or {value.value} < 0 else {value.value}")
    return None
