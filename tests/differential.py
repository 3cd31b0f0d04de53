"""Differential execution: run a source before and after the tool's safe rewrite, compare.

A helper module (not collected by pytest). :func:`run_sources` starts ONE worker interpreter
(this file run as a script), which imports torch once and then forks a fresh child process for
every execution, so no state leaks from one run into the next and torch is imported once.

Each execution is a *leg*:

``cpu``
    ``.cuda()`` on tensors and modules is a recorded move to the CPU (``verify.legacy``'s shim),
    and so is ``.to()`` of a CUDA device (the CPU plays the GPU a user flag asked for);
    ``torch.cuda.is_available()`` is False: values are real and compared.
``gpu``
    a machine where CUDA "is available": ``torch.cuda.is_available()`` is True, and ``meta`` (the
    stand-in second device, as ``verify`` uses it) plays the GPU: ``.cuda()`` moves to ``meta``
    and ``.to(...)`` of a CUDA device goes to ``meta``. Values are meaningless there; devices,
    ``state_dict`` keys, ``requires_grad`` and exception types are compared.

``bare``
    this machine's torch as it is, nothing patched (no CUDA here): what a user without a GPU
    meets, the exception a CUDA move raises included. Values are real and compared.

``argv`` sets ``sys.argv[1:]`` (the user's flags, e.g. ``--no-cuda``).

Each source runs as the script it is (``__name__ == "__main__"``, so a fixture's guarded main
block runs too). What is observed (:func:`compare` says what must be equal): what the
module-level code prints, the type of the exception it raises, the tensors bound at module level, and for every
``nn.Module`` instance in the namespace and every ``nn.Module`` subclass defined there that is
constructible without arguments: ``state_dict()`` keys, ``requires_grad`` and device of every
parameter and buffer, and the outputs of calling it on ``__inputs__[name]`` (a tuple of
arguments) where the source defines ``__inputs__``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
NOT_EXECUTABLE = ("NameError", "ImportError", "ModuleNotFoundError", "FileNotFoundError", "UnboundLocalError")
"""An exception of one of these types raised by *before* means the snippet cannot run as it is
(an undefined ``args``, ``model``, a missing file or package): it is not executable, not a pass."""
MODULE_NAME = "differential_subject"
CHILD_TIMEOUT_S = 30


# -- the parent side ------------------------------------------------------------------------------
def rewrite(text: str, filename: str = "<generated>") -> str:
    """The tool's safe output for ``text`` (every codemod, safe fixes only)."""
    from torchfix_device.codemods.catalog import all_codemods
    from torchfix_device.engine import transform_source

    return transform_source(text, all_codemods(), filename=filename).text


def run_sources(jobs: list[dict], timeout: float = 600) -> list[dict]:
    """Execute ``jobs`` (each ``{"source", "leg", "argv"}``) in one worker; one record each."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker"],
        input=json.dumps(jobs), capture_output=True, text=True, env=env, timeout=timeout,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"differential worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    records = json.loads(proc.stdout.splitlines()[-1])
    assert len(records) == len(jobs)
    return records


def python3(text: str) -> bool:
    """``text`` compiles on this Python (an input of the token pass, ``.cuda(async=True)``, does not)."""
    try:
        compile(text, "<fixture>", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def not_executable(record: dict) -> bool:
    return record["error"] is not None and record["error"] in NOT_EXECUTABLE


def compare(before: dict, after: dict) -> list[str]:
    """The differences a user could observe between two records of the same leg ([] if none).

    Allowed, as "becoming device-correct": *after* registers state the original left
    unregistered (``state_dict`` keys added, none removed or renamed), and *after* runs where
    *before* failed with a device-mismatch error."""
    diffs: list[str] = []
    device_fix = before.get("device_error") and after["error"] is None
    if before["error"] != after["error"] and not device_fix:
        diffs.append(f"exception: {before['error']} -> {after['error']} ({after.get('message', '')[:200]})")
    if device_fix:
        return diffs
    if before["stdout"] != after["stdout"]:
        diffs.append(f"stdout: {before['stdout'][-300:]!r} -> {after['stdout'][-300:]!r}")
    for name, value in before["tensors"].items():
        other = after["tensors"].get(name)
        if other != value:
            diffs.append(f"tensor {name}: {value} -> {other}")
    for name, value in before.get("loaded", {}).items():
        other = dict(after.get("loaded", {}).get(name) or {}, device=value["device"])
        if other != value:  # where a loaded state dict lands is the fix's choice; not what it holds
            diffs.append(f"loaded {name}: {value} -> {after.get('loaded', {}).get(name)}")
    for name, desc in before["modules"].items():
        other = after["modules"].get(name)
        if other is None:
            diffs.append(f"module {name}: gone")
            continue
        diffs.extend(_compare_module(name, desc, other))
    return diffs


def _compare_module(name: str, before: dict, after: dict) -> list[str]:
    diffs = []
    if "error" in before or "error" in after:
        if before.get("error") != after.get("error"):
            diffs.append(f"module {name}: {before.get('error')} -> {after.get('error')}")
        return diffs
    missing = [k for k in before["keys"] if k not in after["keys"]]
    if missing:
        diffs.append(f"module {name}: state_dict keys lost {missing[:5]}")
    for key, state in before["state"].items():
        if key in after["state"] and after["state"][key] != state:
            diffs.append(f"module {name}.{key}: {state} -> {after['state'][key]}")
    if before.get("output") != after.get("output") and not (before.get("output_device_error") and after.get("output") and "error" not in after["output"]):
        diffs.append(f"module {name} output: {before.get('output')} -> {after.get('output')}")
    return diffs


def devices_seen(record: dict) -> set[str]:
    """Every device a tensor, parameter, buffer or output of ``record`` ended up on."""
    seen = {t["device"] for t in [*record["tensors"].values(), *record.get("loaded", {}).values()]}
    for desc in record["modules"].values():
        seen |= {s["device"] for s in desc.get("state", {}).values()}
        for out in (desc.get("output") or {}).get("tensors", []):
            seen.add(out["device"])
    return seen


# -- the worker side (runs in the worker interpreter; imports torch) ------------------------------
def _describe_tensor(t, values: bool) -> dict:
    out = {"device": str(t.device), "dtype": str(t.dtype), "shape": list(t.shape), "requires_grad": t.requires_grad}
    if values and t.device.type == "cpu" and t.numel() <= 64:
        out["values"] = [round(float(v), 4) for v in t.detach().double().flatten().tolist()]
    return out


def _describe_output(torch, output, values: bool) -> dict:
    items = output if isinstance(output, (tuple, list)) else [output]
    tensors, others = [], []
    for item in items:
        if isinstance(item, torch.Tensor):
            tensors.append(_describe_tensor(item, values))
        else:
            others.append(repr(item)[:200])
    return {"tensors": tensors, "others": others}


def _describe_module(torch, module, inputs, values: bool) -> dict:
    desc: dict = {"keys": list(module.state_dict().keys()), "state": {}}
    for key, p in list(module.named_parameters()) + list(module.named_buffers()):
        desc["state"][key] = {"device": str(p.device), "requires_grad": p.requires_grad}
    if inputs is not None:
        try:
            torch.manual_seed(0)
            desc["output"] = _describe_output(torch, module(*inputs), values)
        except Exception as exc:  # noqa: BLE001 - observed, not handled
            from torchfix_device.verify.checker import is_device_error

            desc["output"] = {"error": type(exc).__name__}
            desc["output_device_error"] = is_device_error(str(exc))
    return desc


def _install(torch, leg: str) -> None:
    from torchfix_device.verify import legacy

    if leg == "bare":
        return
    if leg == "cpu":  # the CPU plays the GPU the user asked for: .cuda() and .to("cuda") stay on it
        target = torch.device("cpu")
        legacy.install(target)
        torch.cuda.is_available = lambda: False
    else:
        target = torch.device("meta")
        legacy.install(target)
        torch.cuda.is_available = lambda: True
        torch.cuda.device_count = lambda: 1
    meta = target
    tensor_to = torch.Tensor.to

    def _map(arg):
        if isinstance(arg, torch.device) and arg.type == "cuda":
            return meta
        if isinstance(arg, str) and arg.startswith("cuda"):
            return meta
        return arg

    def to(self, *args, **kwargs):
        args = tuple(_map(a) for a in args)
        if "device" in kwargs:
            kwargs["device"] = _map(kwargs["device"])
        return tensor_to(self, *args, **kwargs)

    torch.Tensor.to = to
    for name in FACTORIES:  # torch.empty(..., device=torch.device("cuda")): the stand-in
        setattr(torch, name, _factory(getattr(torch, name), _map))
    _legacy_cuda_types(torch, target)
    load = torch.load

    def load_(*args, **kwargs):  # map_location="cuda" / a CUDA device: the stand-in
        if "map_location" in kwargs:
            kwargs["map_location"] = _map(kwargs["map_location"])
        return load(*args, **kwargs)

    torch.load = load_


FACTORIES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "tensor", "as_tensor", "eye", "linspace")


def _factory(original, _map):
    def factory(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _map(kwargs["device"])
        return original(*args, **kwargs)

    return factory


def _legacy_cuda_types(torch, target) -> None:
    """``torch.cuda.FloatTensor`` & co.: a constructor giving what the CPU type gives, on the
    stand-in; ``isinstance`` true for a strided tensor of that dtype on the stand-in ``meta``
    (on the CPU leg nothing is CUDA to a type test, as ``is_cuda`` says); ``x.type(T)`` moves
    and converts. In the "gpu" leg ``is_cuda`` is true on ``meta``, the device playing CUDA."""
    from torchfix_device.torch_api import LEGACY_TENSOR_DTYPES

    fakes = {}
    for name, dtype_name in LEGACY_TENSOR_DTYPES.items():
        cpu_type = getattr(torch, name)
        dtype = getattr(torch, dtype_name)

        class _Meta(type):
            def __call__(cls, *args):
                return cls.cpu_type(*args).to(target)

            def __instancecheck__(cls, obj):
                return isinstance(obj, torch.Tensor) and target.type == "meta" and obj.device.type == "meta" \
                    and obj.layout == torch.strided and obj.dtype == cls.dtype

        fake = _Meta(name, (), {"cpu_type": cpu_type, "dtype": dtype})
        fakes[fake] = dtype
        setattr(torch.cuda, name, fake)
    tensor_type = torch.Tensor.type

    def type_(self, dtype=None, non_blocking=False, **kwargs):
        if dtype in fakes:
            return self.to(target, fakes[dtype], non_blocking=non_blocking)
        if dtype is None:
            return tensor_type(self)
        return tensor_type(self, dtype, non_blocking, **kwargs)

    torch.Tensor.type = type_
    if target.type == "meta":
        is_cuda = torch.Tensor.is_cuda
        torch.Tensor.is_cuda = property(lambda self: self.device.type == "meta" or is_cuda.__get__(self))


def _execute(job: dict) -> dict:
    import contextlib
    import io
    import random
    import tempfile
    import types

    import torch

    from torchfix_device.verify.checker import is_device_error

    leg = job["leg"]
    values = leg in ("cpu", "bare")
    _install(torch, leg)
    random.seed(0)
    torch.manual_seed(0)
    try:
        import numpy

        numpy.random.seed(0)
    except ImportError:  # pragma: no cover - numpy comes with torch
        pass
    sys.argv = ["script.py", *job.get("argv", [])]
    os.chdir(tempfile.mkdtemp(prefix="tfd-diff-"))  # files a script saves stay out of the tree
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = job.get("filename", "script.py")
    module.__dict__["__name__"] = "__main__"  # run as the script it is: its `if __name__ == "__main__":` block too
    sys.modules[MODULE_NAME] = module
    record: dict = {"error": None, "message": "", "device_error": False, "tensors": {}, "modules": {},
                    "loaded": {}}
    buffer = io.StringIO()
    try:
        code = compile(job["source"], module.__file__, "exec")
        with contextlib.redirect_stdout(buffer):
            exec(code, module.__dict__)
    except SystemExit as exc:
        record["error"] = f"SystemExit({exc.code})"
    except BaseException as exc:  # noqa: BLE001 - observed
        record["error"] = type(exc).__name__
        record["message"] = str(exc)[:500]
        record["device_error"] = is_device_error(str(exc))
    record["stdout"] = buffer.getvalue()[-4000:]
    if record["error"] is not None:
        return record
    namespace = module.__dict__
    inputs = namespace.get("__inputs__", {}) or {}
    for name, value in sorted(namespace.items()):
        if name.startswith("__"):
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            if isinstance(value, torch.Tensor):
                record["tensors"][name] = _describe_tensor(value, values)
            elif isinstance(value, dict) and value and all(isinstance(v, torch.Tensor) for v in value.values()):
                for key, tensor in value.items():  # a state dict
                    record["loaded"][f"{name}[{key!r}]"] = _describe_tensor(tensor, values)
            elif isinstance(value, torch.nn.Module):
                record["modules"][name] = _describe_module(torch, value, inputs.get(name), values)
            elif (
                isinstance(value, type) and issubclass(value, torch.nn.Module)
                and value.__module__ == MODULE_NAME
            ):
                try:
                    torch.manual_seed(0)
                    instance = value()
                except TypeError:
                    continue  # needs arguments
                except Exception as exc:  # noqa: BLE001
                    record["modules"][f"{name}()"] = {"error": type(exc).__name__}
                    continue
                record["modules"][f"{name}()"] = _describe_module(torch, instance, inputs.get(name), values)
    return record


LAZY_IMPORT = "torch._dynamo"
"""What torch imports on first need (a layer's first call on ``meta``), about a second a child:
once a child has needed it, the worker imports it before the next forks. Only then: a batch that
never needs it does not pay for it."""


def _worker() -> None:
    import torch  # noqa: F401 - imported once, before the forks

    try:
        import numpy.random  # noqa: F401 - every child seeds it
    except ImportError:  # pragma: no cover - numpy comes with torch
        pass

    import torchfix_device.torch_api  # noqa: F401 - the legacy tensor types' table (libcst: 0.5 s a child otherwise)
    import torchfix_device.verify.checker  # noqa: F401
    import torchfix_device.verify.legacy  # noqa: F401

    jobs = json.loads(sys.stdin.read())
    records = []
    # Each execution's own folder (``_execute``) is made in one folder of the batch, removed at
    # the end: before, each left a ``tfd-diff-*`` folder in the temporary folder for good.
    tempfile.tempdir = tempfile.mkdtemp(prefix="tfd-diff-batch-")
    try:
        _run_batch(jobs, records)
    finally:
        shutil.rmtree(tempfile.tempdir, ignore_errors=True)
    sys.stdout.write("\n" + json.dumps(records) + "\n")


def _run_batch(jobs: list[dict], records: list[dict]) -> None:
    """Each job executed in a fresh fork of this worker; its record appended to ``records``."""
    for job in jobs:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one fresh process per execution
            os.close(read)
            import signal

            signal.alarm(CHILD_TIMEOUT_S)
            try:
                result = _execute(job)
            except BaseException as exc:  # noqa: BLE001
                result = {"error": f"HarnessError:{type(exc).__name__}", "message": str(exc)[:500],
                          "device_error": False, "tensors": {}, "modules": {}, "stdout": ""}
            data = json.dumps(result, default=str).encode()
            with os.fdopen(write, "wb") as f:
                f.write((b"+" if LAZY_IMPORT in sys.modules else b"-") + data)
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            lazy, data = f.read(1), f.read()
        os.waitpid(pid, 0)
        if lazy == b"+" and LAZY_IMPORT not in sys.modules:
            importlib.import_module(LAZY_IMPORT)  # the next children find it imported, as they find torch
        records.append(json.loads(data) if data else {
            "error": "HarnessError:crashed", "message": "", "device_error": False,
            "tensors": {}, "modules": {}, "stdout": ""})


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _worker()
