"""A user's model file on one device, inside the harness interpreter (``--models auto``).

The models of a file are, in the order they are defined:

- ``make_model()`` when the file defines it (with ``example_inputs()`` giving the inputs:
  a tensor or a tuple of tensors, on the CPU); otherwise
- each ``nn.Module`` subclass defined in the file whose constructor needs no argument and that
  has a ``forward`` of its own (one that needs arguments is listed as skipped, with the reason).

Each model is built with every generator seeded (0), moved to the device (``model.to(device)``,
as a user's training script does) and called on inputs moved there too: those of
``example_inputs()``, else inputs guessed from its first layer (``nn.Linear(4, ...)`` takes a
batch of shape ``(2, 4)``, ``nn.Conv2d(3, ...)`` one of ``(2, 3, 16, 16)``; without such a
layer the model is built and moved but not called). On ``meta`` the call runs under the device
checker; after it every parameter and buffer must be on the device. On the CPU the outputs and
the ``state_dict`` are saved for the comparison of original and rewrite, and, for a model that
keeps layers in a plain list, tuple or dict (invisible to ``eval()``: what TFD004 registers), the
outputs it gives with those layers put in its own mode, as the rewrite puts them
(``as_registered``): the verifier tells the rewrite's intended change from any other by them.

The user's code sees ``sys.argv == [MODEL.py]``, as a script run without arguments: an
``argparse`` parser at its top level does not read the harness's own arguments.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from pathlib import Path

def _models(module) -> tuple[list[tuple[str, object, object]], list[dict]]:
    """``(name, factory, example_inputs or None)`` of each model, and the classes skipped."""
    import torch

    make_model = getattr(module, "make_model", None)
    if callable(make_model):
        return [("make_model", make_model, getattr(module, "example_inputs", None))], []
    found, skipped = [], []
    for name, value in list(vars(module).items()):
        if not (isinstance(value, type) and issubclass(value, torch.nn.Module) and value.__module__ == module.__name__):
            continue
        if value.forward is torch.nn.Module.forward:
            skipped.append({"model": name, "reason": "defines no forward()"})
            continue
        needed = _required_parameters(value)
        if needed:
            skipped.append({"model": name, "reason": f"its constructor needs {', '.join(needed)}: define make_model() in the file"})
            continue
        found.append((name, value, None))
    return found, skipped


def _required_parameters(cls) -> list[str]:
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return ["arguments"]
    return [
        p.name for p in parameters
        if p.default is inspect.Parameter.empty and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def guess_inputs(model):
    """Inputs for ``model`` from its first layer (a tuple of CPU tensors), or None."""
    import torch
    from torch import nn

    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            return (torch.randn(2, layer.in_features),)
        if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            size = {nn.Conv1d: (16,), nn.Conv2d: (16, 16), nn.Conv3d: (8, 8, 8)}[type(layer)]
            return (torch.randn(2, layer.in_channels, *size),)
        if isinstance(layer, (nn.Embedding, nn.EmbeddingBag)):
            return (torch.randint(0, layer.num_embeddings, (2, 5)),)
        if isinstance(layer, (nn.RNN, nn.LSTM, nn.GRU)):
            return (torch.randn(2, 5, layer.input_size) if layer.batch_first else torch.randn(5, 2, layer.input_size),)
        if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
            extra = () if isinstance(layer, nn.BatchNorm1d) else (8, 8)
            return (torch.randn(2, layer.num_features, *extra),)
        if isinstance(layer, nn.LayerNorm):
            return (torch.randn(2, *layer.normalized_shape),)
    return None


def _as_tuple(value) -> tuple:
    import torch

    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        return tuple(value)
    raise TypeError(f"example_inputs() must return a tensor or a tuple of tensors, got {type(value).__name__}")


def _outputs(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _outputs(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _outputs(v)]
    return []


def run_user_models(path: Path, device: str, name: str, outputs_dir: Path | None) -> dict:
    """Build and run each model of the file on ``device``; the leg's record."""
    import torch

    from torchfix_device.verify import checker, legacy
    from torchfix_device.verify.runtime import error_record as _error
    from torchfix_device.verify.runtime import load_module as _load_module
    from torchfix_device.verify.runtime import seed_everything as _seed_everything
    from torchfix_device.verify.runtime import shim_counts as _shims

    target = torch.device(device)
    used = legacy.install(target)
    leg: dict = {"device": str(target), "status": "ran", "error": None, "models": [], "skipped": []}
    mode = checker.DeviceChecker() if target.type == "meta" else contextlib.nullcontext()
    with mode:  # the first dispatch mode imports torch._dynamo: not the model's time
        pass
    _seed_everything()
    import sys

    sys.argv = [str(path)]  # as a script run without arguments, not the harness's own
    try:
        with mode:
            module = _load_module(path, name)
        models, leg["skipped"] = _models(module)
        leg["order"] = [name for name, value in vars(module).items() if isinstance(value, type)] + ["make_model"]
    except BaseException as exc:  # noqa: BLE001 - any failure of user code is a result
        leg["status"], leg["error"] = "failed", _error(exc, "import", path)
        leg["shims"] = _shims(used, mode)
        return leg
    for model_name, factory, example_inputs in models:
        leg["models"].append(_run_one(model_name, factory, example_inputs, target, mode, path, outputs_dir))
    leg["shims"] = _shims(used, mode)
    return leg


def _run_one(model_name: str, factory, example_inputs, target, mode, path: Path, outputs_dir: Path | None) -> dict:
    import torch

    from torchfix_device.verify import checker
    from torchfix_device.verify.runtime import error_record as _error
    from torchfix_device.verify.runtime import seed_everything as _seed_everything

    record: dict = {"model": model_name, "status": "failed", "error": None, "inputs": None}
    started = time.perf_counter()
    try:
        _seed_everything()
        with mode:
            model = factory()
            if not isinstance(model, torch.nn.Module):
                raise TypeError(f"make_model() returned a {type(model).__name__}, not an nn.Module")
            model = model.to(target)
        _seed_everything()
        inputs = _as_tuple(example_inputs()) if example_inputs is not None else guess_inputs(model)
        if inputs is None:
            record["status"], record["inputs"] = "built", "none: no first layer to guess them from (define example_inputs())"
            checker.check_module(model, target)
            return record
        record["inputs"] = ", ".join(f"{tuple(t.shape)}" for t in inputs) + ("" if example_inputs is not None else " (guessed)")
        inputs = tuple(t.to(target) for t in inputs)
        model.eval()
        with torch.no_grad(), mode:
            output = model(*inputs)
        checker.check_module(model, target)
    except BaseException as exc:  # noqa: BLE001
        record["error"] = _error(exc, "run", path)
        record["seconds"] = round(time.perf_counter() - started, 3)
        return record
    record["status"], record["seconds"] = "ran", round(time.perf_counter() - started, 3)
    tensors = _outputs(output)
    record["outputs"] = [{"shape": list(t.shape), "dtype": str(t.dtype)} for t in tensors]
    if outputs_dir is not None and target.type != "meta":
        state = {k: v.detach().cpu() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
        saved = {"outputs": [t.detach().cpu() for t in tensors], "state_dict": state}
        as_registered = _outputs_as_registered(factory, example_inputs, target)
        if as_registered is not None:
            saved["as_registered"] = [t.detach().cpu() for t in as_registered]
        torch.save(saved, outputs_dir / f"{model_name}.pt")
    return record


def match_unregistered_modes(model) -> int:
    """Put each layer that a module of ``model`` keeps in a plain list, tuple or dict attribute
    (not registered: ``train()``/``eval()`` never reach it; TFD004 registers it) in the mode of
    the module holding it, as ``eval()`` does once it is registered; how many were switched."""
    import torch

    switched = 0
    pending, seen = [model], set()
    while pending:
        module = pending.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        pending.extend(module.children())
        for name, value in vars(module).items():
            if name in ("_modules", "_parameters", "_buffers"):
                continue
            items = list(value) if isinstance(value, (list, tuple)) else list(value.values()) if isinstance(value, dict) else []
            for item in items:
                if isinstance(item, torch.nn.Module):
                    if any(layer.training != module.training for layer in item.modules()):
                        item.train(module.training)
                        switched += 1
                    pending.append(item)
    return switched


def _outputs_as_registered(factory, example_inputs, target) -> list | None:
    """The model's outputs built and called as in :func:`_run_one`, with its unregistered layers
    in its own mode (:func:`match_unregistered_modes`); None when it has no such layer in
    another mode, or when this second run fails."""
    import torch

    from torchfix_device.verify.runtime import seed_everything as _seed_everything

    try:
        _seed_everything()
        model = factory().to(target)
        _seed_everything()
        inputs = _as_tuple(example_inputs()) if example_inputs is not None else guess_inputs(model)
        if inputs is None:
            return None
        inputs = tuple(t.to(target) for t in inputs)
        model.eval()
        if not match_unregistered_modes(model):
            return None
        with torch.no_grad():
            return _outputs(model(*inputs))
    except Exception:  # noqa: BLE001 - only a second opinion: without it the difference stays unexplained
        return None
