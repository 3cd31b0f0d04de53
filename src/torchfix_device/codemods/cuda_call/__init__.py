"""TFD001 cuda-call: the rule (:mod:`.rule`) and its own helpers (:mod:`.cuda_only`, :mod:`.flag_guards`, :mod:`.gpu_index`, :mod:`.guards`).

The class is re-exported here, so ``python -m libcst.tool codemod cuda_call.CudaCall`` finds it.
"""

from torchfix_device.codemods.cuda_call.rule import CudaCall

__all__ = ["CudaCall"]
