"""torch's API as data, for the engine that never imports torch: which names are legacy tensor
types, which classes are ``nn.Module`` classes."""

from __future__ import annotations



LEGACY_TENSOR_DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32",
    "ShortTensor": "int16", "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool",
}

LEGACY_TENSOR_TYPE_NAMES = frozenset(LEGACY_TENSOR_DTYPES)

"""The last parts of the names :func:`legacy_tensor_type` recognises."""

def legacy_tensor_type(qualified: set[str]) -> tuple[str, bool] | None:
    """``torch.FloatTensor`` → ("float32", False); ``torch.cuda.LongTensor`` → ("int64", True)."""
    for name in qualified:
        parts = name.split(".")
        if parts[0] != "torch" or parts[-1] not in LEGACY_TENSOR_DTYPES:
            continue
        if len(parts) == 2:
            return LEGACY_TENSOR_DTYPES[parts[-1]], False
        if parts[1:-1] == ["cuda"]:
            return LEGACY_TENSOR_DTYPES[parts[-1]], True
    return None


NOT_MODULE_NAMESPACES = {"utils", "functional", "init", "parameter", "grad", "attention", "common_types"}
NOT_MODULE_CLASSES = {"Parameter", "UninitializedParameter", "Buffer", "UninitializedBuffer"}


def is_torch_module_class(qualified: str) -> bool:
    """``torch.nn.Module``, ``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``: yes;
    ``torch.nn.utils.prune.BasePruningMethod``, ``torch.nn.Parameter``: no."""
    parts = qualified.split(".")
    return (
        len(parts) >= 3 and parts[:2] == ["torch", "nn"]
        and parts[2] not in NOT_MODULE_NAMESPACES and parts[-1] not in NOT_MODULE_CLASSES
        and parts[-1][:1].isupper()
    )
