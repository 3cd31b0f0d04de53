"""TFD008 cuda-tensor-type: the rule (:mod:`.rule`) and its own helpers (:mod:`.aliases`).

The class is re-exported here, so ``python -m libcst.tool codemod cuda_tensor_type.CudaTensorType`` finds it.
"""

from torchfix_device.codemods.cuda_tensor_type.rule import CudaTensorType

__all__ = ["CudaTensorType"]
