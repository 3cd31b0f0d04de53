"""TFD009 variable-wrapper: the rule (:mod:`.rule`) and its own helpers (:mod:`.exact_detach`, :mod:`.import_removal`, :mod:`.no_grad_loops`, :mod:`.shapes`, :mod:`.star_doubts`).

The class is re-exported here, so ``python -m libcst.tool codemod variable_wrapper.VariableWrapper`` finds it.
"""

from torchfix_device.codemods.variable_wrapper.rule import VariableWrapper

__all__ = ["VariableWrapper"]
