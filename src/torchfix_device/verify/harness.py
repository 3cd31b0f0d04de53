"""One model file, run on one or more devices — in the fresh interpreter the verifier starts.

    python -m torchfix_device.verify.harness MODEL.py --device DEV [--device cpu ...]
        --result RESULT.json [--outputs-dir DIR] [--name MODULE_NAME] [--sys-path DIR]
        [--models contract|auto]

For each device in turn (one interpreter serves the original, or the rewrite, on every device:
one pair of interpreters per model file): seeds every generator (``random``, ``numpy`` when
present, ``torch``) with 0, installs the :mod:`~torchfix_device.verify.legacy` shims for the
device, imports the model file afresh as module ``MODULE_NAME`` (registered in ``sys.modules``,
so that pickling its classes works) and runs it — under the
:class:`~torchfix_device.verify.checker.DeviceChecker` when the device is ``meta`` — then checks
that every parameter and buffer of the model is on the device.

``--models contract`` (a fixture model) calls ``run(torch.device(DEV))``; ``--models auto`` (a
user's model file) builds and runs each model the file defines
(:mod:`~torchfix_device.verify.user_harness`).

The result is written as JSON to ``RESULT.json``, one record per device (the model's own prints
go to stdout, so stdout is not used for it); with ``--outputs-dir`` the CPU outputs and the
models' ``state_dict`` are saved there for the verifier to compare. A failure of the model is a
result (exit 0); a non-zero exit means the harness itself broke.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import warnings
from pathlib import Path

from torchfix_device.verify.runtime import error_record as _error
from torchfix_device.verify.runtime import load_module as _load_module
from torchfix_device.verify.runtime import seed_everything as _seed_everything
from torchfix_device.verify.runtime import shim_counts as _shims


def _flatten_outputs(output) -> list:
    import torch

    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (tuple, list)) and output and all(isinstance(o, torch.Tensor) for o in output):
        return list(output)
    raise TypeError(f"run() must return (model, output) with output a tensor or a tuple of tensors, got {type(output).__name__}")


def run_model(path: Path, device: str, name: str, outputs_file: Path | None) -> dict:
    """Run one model file on ``device``; the result record (see the module docstring)."""
    import torch

    from torchfix_device.verify import checker, legacy

    warnings.simplefilter("ignore")
    target = torch.device(device)
    _seed_everything()
    used = legacy.install(target)
    result: dict = {"device": str(target), "status": "failed", "error": None}
    mode = checker.DeviceChecker() if target.type == "meta" else contextlib.nullcontext()
    with mode:  # entering a dispatch mode the first time imports torch._dynamo (~1.5 s): not the model's time
        pass
    started = time.perf_counter()
    try:
        with mode:
            module = _load_module(path, name)
        run = getattr(module, "run", None)
        if not callable(run):
            raise TypeError("the model file defines no function run(device)")
    except BaseException as exc:  # noqa: BLE001 - any failure of user code is a result
        result["error"] = _error(exc, "import", path)
        result["shims"] = _shims(used, mode)
        return result
    try:
        with mode:
            returned = run(target)
        if not (isinstance(returned, tuple) and len(returned) == 2):
            raise TypeError("run() must return a pair (model, output)")
        model, output = returned
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"run() returned a {type(model).__name__} as the model: an nn.Module or None expected")
        outputs = _flatten_outputs(output)
    except BaseException as exc:  # noqa: BLE001
        result["error"] = _error(exc, "run", path)
        result["shims"] = _shims(used, mode)
        result["seconds"] = round(time.perf_counter() - started, 3)
        return result
    result["seconds"] = round(time.perf_counter() - started, 3)
    result["shims"] = _shims(used, mode)
    result["outputs"] = [{"shape": list(t.shape), "dtype": str(t.dtype), "device": str(t.device)} for t in outputs]
    if model is not None:
        result["model"] = {
            "parameters": sum(1 for _ in model.parameters()),
            "numel": sum(p.numel() for p in model.parameters()),
            "buffers": sum(1 for _ in model.buffers()),
        }
        try:
            checker.check_module(model, target)
        except checker.DeviceMismatchError as exc:
            result["error"] = _error(exc, "check", path)
            return result
    if outputs_file is not None and target.type != "meta":  # meta tensors hold no numbers to save
        state = model.state_dict() if model is not None else {}
        torch.save(
            {
                "outputs": [t.detach().cpu() for t in outputs],
                "state_dict": {k: v.detach().cpu() for k, v in state.items() if isinstance(v, torch.Tensor)},
            },
            outputs_file,
        )
    result["status"] = "ran"
    return result


def run_legs(path: Path, devices: list[str], name: str, outputs_dir: Path | None, models: str) -> dict:
    """Every device's record, run one after the other in this interpreter."""
    from torchfix_device.verify import legacy

    legs: dict = {}
    for device in devices:
        if models == "auto":
            from torchfix_device.verify.user_harness import run_user_models

            legs[device] = run_user_models(path, device, name, outputs_dir)
        else:
            outputs = outputs_dir / f"outputs-{device.replace(':', '_')}.pt" if outputs_dir is not None else None
            legs[device] = run_model(path, device, name, outputs)
        legacy.uninstall()
    return {"legs": legs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchfix_device.verify.harness", description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--device", action="append", required=True, help="a device to run on (repeat for several)")
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--outputs-dir", type=Path)
    parser.add_argument("--name", help="module name to import the file as (default: its stem)")
    parser.add_argument("--sys-path", action="append", default=[], help="a folder to put first on sys.path")
    parser.add_argument("--models", choices=("contract", "auto"), default="contract")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # torch's own (a missing numpy, deprecations) are not the model's result
    for folder in reversed(args.sys_path):
        sys.path.insert(0, folder)
    result = run_legs(args.model, args.device, args.name or args.model.stem, args.outputs_dir, args.models)
    args.result.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
