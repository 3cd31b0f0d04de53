"""TFD006 loss-data-index: the rule (:mod:`.rule`) and its own helpers (:mod:`.accumulated`).

The class is re-exported here, so ``python -m libcst.tool codemod loss_data_index.LossDataIndex`` finds it.
"""

from torchfix_device.codemods.loss_data_index.rule import LossDataIndex

__all__ = ["LossDataIndex"]
