"""TFD009 where ``Variable`` or ``torch`` may come from a star import that could not be resolved.

A star import resolved over the run (:mod:`torchfix_device.facts.star_imports`) that proves
``Variable`` is ``torch.autograd.Variable`` makes the name count as if the file imported it
(``Codemod.qualified_names``). Where a star import may bind it but what it binds is not shown
(the module is not found, ``__all__`` is computed, the binding is conditional or an
assignment), the site is reported for review, naming the star import and what is missing; a
fix that would need ``torch`` where a star import may rebind ``torch`` is not made either.
"""

from __future__ import annotations

import libcst as cst


def spelt_variable(node: cst.BaseExpression) -> bool:
    """``node`` is the plain name ``Variable``."""
    return isinstance(node, cst.Name) and node.value == "Variable"


class StarImportReview:
    """Hooks mixed into :class:`~torchfix_device.codemods.variable_wrapper.VariableWrapper`."""

    star_imports: object

    def _star_review(self, node: cst.BaseExpression, what: str) -> None:
        """``Variable`` that a star import may bind, unresolved: a place for review."""
        doubt = self.star_doubt(node) if spelt_variable(node) else None  # type: ignore[attr-defined]
        if doubt is not None:
            self.report(  # type: ignore[attr-defined]
                node,
                f"{what}: `Variable` may come from a star import that could not be resolved ({doubt}): "
                "not rewritten; import it explicitly or check it by hand",
                fixable=False,
            )

    def _torch_doubt(self, site: cst.CSTNode, message: str, at: cst.CSTNode | None = None) -> bool:
        """A fix needing ``torch`` where a star import may bind ``torch`` to something not
        shown to be the torch module: the place is reported for review instead (True)."""
        doubt = self.star_doubt(site, "torch") if self.star_imports is not None else None  # type: ignore[attr-defined]
        if doubt is not None:
            self.report(at or site,  # type: ignore[attr-defined]
                f"{message}; not rewritten: `torch` would be needed, and {doubt}", fixable=False)
        return doubt is not None
