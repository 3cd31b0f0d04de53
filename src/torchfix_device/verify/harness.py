"""One model file, one device, one run — in the fresh interpreter the verifier starts.

    python -m torchfix_device.verify.harness MODEL.py --device DEV --result RESULT.json
        [--outputs OUTPUTS.pt] [--name MODULE_NAME] [--sys-path DIR]

Seeds every generator (``random``, ``numpy`` when present, ``torch``) with 0, installs the
:mod:`~torchfix_device.verify.legacy` shims for ``DEV``, imports the model file as module
``MODULE_NAME`` (registered in ``sys.modules``, so that pickling its classes works), calls
``run(torch.device(DEV))`` — under the :class:`~torchfix_device.verify.checker.DeviceChecker`
when ``DEV`` is ``meta`` — and then checks that every parameter and buffer of the returned
model is on ``DEV``.

The result is written as JSON to ``RESULT.json`` (the model's own prints go to stdout, so stdout
is not used for it); with ``--outputs`` the outputs and the model's ``state_dict`` are saved on
the CPU for the verifier to compare. A failure of the model is a result (exit 0); a non-zero
exit means the harness itself broke.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import random
import sys
import time
import traceback
import warnings
from pathlib import Path


def _seed_everything() -> None:
    import torch

    random.seed(0)
    try:
        import numpy

        numpy.random.seed(0)
    except ImportError:
        pass
    torch.manual_seed(0)


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _flatten_outputs(output) -> list:
    import torch

    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (tuple, list)) and output and all(isinstance(o, torch.Tensor) for o in output):
        return list(output)
    raise TypeError(f"run() must return (model, output) with output a tensor or a tuple of tensors, got {type(output).__name__}")


def _error(exc: BaseException, phase: str, model_path: Path) -> dict:
    from torchfix_device.verify.checker import is_device_error

    message = str(exc).strip() or type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    in_model = [f for f in frames if Path(f.filename).resolve() == model_path.resolve()]
    where = f"line {in_model[-1].lineno}: {in_model[-1].line}" if in_model else ""
    return {
        "phase": phase,
        "type": type(exc).__name__,
        "message": message,
        "where": where,
        "device_error": is_device_error(message),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    }


def _shims(used, mode) -> dict[str, int]:
    counts = dict(used)
    counts.update(getattr(mode, "placeholders", {}))
    return counts


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchfix_device.verify.harness", description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--device", required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--outputs", type=Path)
    parser.add_argument("--name", help="module name to import the file as (default: its stem)")
    parser.add_argument("--sys-path", action="append", default=[], help="a folder to put first on sys.path")
    args = parser.parse_args(argv)
    for folder in reversed(args.sys_path):
        sys.path.insert(0, folder)
    result = run_model(args.model, args.device, args.name or args.model.stem, args.outputs)
    args.result.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
