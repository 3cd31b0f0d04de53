"""What both kinds of model run share inside the harness interpreter: seeding, importing the
model file, and the record of a failure (:mod:`~torchfix_device.verify.harness` for fixture
models, :mod:`~torchfix_device.verify.user_harness` for a user's file)."""

from __future__ import annotations

import importlib.util
import random
import sys
import traceback
from pathlib import Path


def seed_everything() -> None:
    import torch

    random.seed(0)
    try:
        import numpy

        numpy.random.seed(0)
    except ImportError:
        pass
    torch.manual_seed(0)


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def error_record(exc: BaseException, phase: str, model_path: Path) -> dict:
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


def shim_counts(used, mode) -> dict[str, int]:
    counts = dict(used)
    counts.update(getattr(mode, "placeholders", {}))
    return counts
