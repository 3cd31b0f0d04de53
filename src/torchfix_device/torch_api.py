"""torch's API as data, for the engine that never imports torch: which names are legacy tensor
types, which classes are ``nn.Module`` classes, which operators give one tensor (a table
``scripts/generate_torch_ops.py`` reads from torch's own schemas at development time)."""

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


# Attributes every ``nn.Module`` instance has (torch 2.x, dunders left out): a buffer or a
# ``ModuleDict``/``ParameterDict`` key with one of these names is refused by ``register_buffer`` /
# ``add_module`` ("attribute 'x' already exists"). Checked against the installed torch by the tests.
NN_MODULE_ATTRS = frozenset(
    {
        "T_destination", "_apply", "_backward_hooks", "_backward_pre_hooks", "_buffers",
        "_call_impl", "_compiled_call_impl", "_forward_hooks", "_forward_hooks_always_called",
        "_forward_hooks_with_kwargs", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
        "_get_backward_hooks", "_get_backward_pre_hooks", "_get_name", "_is_full_backward_hook",
        "_load_from_state_dict", "_load_state_dict_post_hooks", "_load_state_dict_pre_hooks",
        "_maybe_warn_non_full_backward_hook", "_modules", "_named_members",
        "_non_persistent_buffers_set", "_parameters", "_register_load_state_dict_pre_hook",
        "_register_state_dict_hook", "_replicate_for_data_parallel", "_save_to_state_dict",
        "_slow_forward", "_state_dict_hooks", "_state_dict_pre_hooks", "_version",
        "_wrapped_call_impl", "add_module", "apply", "bfloat16", "buffers", "call_super_init",
        "children", "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr",
        "float", "forward", "get_buffer", "get_extra_state", "get_parameter", "get_submodule",
        "half", "ipu", "load_state_dict", "modules", "mtia", "named_buffers", "named_children",
        "named_modules", "named_parameters", "parameters", "register_backward_hook",
        "register_buffer", "register_forward_hook", "register_forward_pre_hook",
        "register_full_backward_hook", "register_full_backward_pre_hook",
        "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook",
        "register_module", "register_parameter", "register_state_dict_post_hook",
        "register_state_dict_pre_hook", "requires_grad_", "set_extra_state", "set_submodule",
        "share_memory", "state_dict", "to", "to_empty", "train", "training", "type", "xpu",
        "zero_grad",
    }
)
# Extra attributes of ``ModuleDict`` / ``ParameterDict`` (keys with these names are refused too).
DICT_CONTAINER_ATTRS = frozenset(
    {
        "_key_to_attr", "_keys", "clear", "copy", "fromkeys", "get", "items", "keys", "pop",
        "popitem", "setdefault", "update", "values",
    }
)


def _read_ops() -> dict[str, frozenset[str]]:
    """The table ``scripts/generate_torch_ops.py`` made from torch's operator schemas
    (``data/torch_ops.txt``): kind (``function``, ``method``, ``device``) → names."""
    from importlib.resources import files

    found: dict[str, set[str]] = {"function": set(), "method": set(), "device": set()}
    for line in files(__package__).joinpath("data", "torch_ops.txt").read_text(encoding="utf-8").splitlines():
        kind, _, name = line.partition(" ")
        if kind in found:
            found[kind].add(name)
    return {kind: frozenset(names) for kind, names in found.items()}


_OPS = _read_ops()
ONE_TENSOR_FUNCTIONS = _OPS["function"]
"""``torch.NAME`` operators every overload of which gives one tensor (``torch.ger``, ``torch.outer``)."""
ONE_TENSOR_METHODS = _OPS["method"]
"""``Tensor.NAME`` methods of C every overload of which gives one tensor (``x.addmm(a, b)``, ``x.clamp(0)``)."""
DEVICE_OPERATORS = _OPS["device"]
"""Of those, the ones some overload of which takes a device (``zeros``, ``new_ones``, ``to``)."""


def torch_operators(qualified: set[str]) -> set[str] | None:
    """``{"ger"}`` for ``{"torch.ger"}``: the operator names where every one of ``qualified`` is a
    ``torch.NAME`` of :data:`ONE_TENSOR_FUNCTIONS`; None otherwise (``torch.nn.functional.relu``,
    ``torch.split``, nothing)."""
    found = {q[len("torch."):] for q in qualified if q.startswith("torch.")}
    return found if qualified and len(found) == len(qualified) and found <= ONE_TENSOR_FUNCTIONS else None
