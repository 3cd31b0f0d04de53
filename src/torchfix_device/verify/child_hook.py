"""The start-up hook of ``torchfix-device verify --run``: what every Python process of the user's
command loads first, as ``sitecustomize``.

:mod:`~torchfix_device.verify.user_run` writes this file's text as ``sitecustomize.py`` into a
temp folder (with :mod:`~torchfix_device.verify.checker` and
:mod:`~torchfix_device.verify.legacy` beside it, under private names) and puts that folder first
on the command's ``PYTHONPATH``. The command's Python need not have torchfix-device installed:
this file imports nothing of the package, only the stdlib (and torch, once the program imports
it). It runs on the Python the command names, so it keeps to old syntax.

In every run it

- records the first uncaught exception of the process (type, message, the innermost frame in
  the project) and, at exit, whether torch was imported, whether CUDA was available, whether the
  program asked for a GPU (``torch.cuda.is_available()`` or ``device_count()`` called from the
  project's code, ``.cuda()`` called) and which modules were imported from the user's own tree
  instead of the copy (an editable install), as JSON in ``$TORCHFIX_DEVICE_RUN_RECORDS/<pid>.json``;
- points ``sys.path`` entries and editable-install finders that name the user's project at the
  copy, so that the copy's code runs, not the original's.

With ``TORCHFIX_DEVICE_RUN_STAND_IN=1`` (a machine without CUDA), once torch is imported it also
makes ``meta`` stand in for a GPU: ``torch.cuda.is_available()`` is True, one device is counted,
``"cuda"`` devices become ``meta`` (a ``TorchFunctionMode``), ``.cuda()`` means ``.to("meta")``,
one-device ``DataParallel`` runs its module on meta, and the device checker raises on mixed
devices as CUDA does, recording where the first mismatch happened even if the program catches
it. Meta tensors hold no data: ``.item()``, ``float()`` and ``int()`` give placeholder zeros.

Nothing here may break the program: every step of the hook is guarded, and a failure of the
hook itself is recorded, not raised.
"""

import atexit
import json
import os
import sys
import time
import traceback

RECORDS_ENV = "TORCHFIX_DEVICE_RUN_RECORDS"
COPY_ENV = "TORCHFIX_DEVICE_RUN_COPY"
ORIGIN_ENV = "TORCHFIX_DEVICE_RUN_ORIGIN"
STAND_IN_ENV = "TORCHFIX_DEVICE_RUN_STAND_IN"
CHECKER_MODULE = "_torchfix_device_checker"
LEGACY_MODULE = "_torchfix_device_legacy"

_HERE = os.path.dirname(os.path.abspath(__file__))
_COPY = os.path.realpath(os.environ.get(COPY_ENV, "") or _HERE)
_ORIGIN = os.path.realpath(os.environ.get(ORIGIN_ENV, "") or _HERE)
_STATE = {
    "pid": os.getpid(),
    "started": time.time(),
    "exception": None,
    "torch": False,
    "cuda_available": None,
    "cuda_asked": 0,
    "stand_in": False,
    "gpu_uses": 0,
    "stand_in_checked": 0,
    "placeholders": 0,
    "device_mismatch": None,
    "from_origin": [],
    "hook_errors": [],
}


def _inside(path, root):
    try:
        path = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _where(frames):
    """The innermost frame in the project's copy (else the innermost frame) as a dict."""
    frames = list(frames)
    mine = [f for f in frames if _inside(f.filename, _COPY)]
    frame = (mine or frames or [None])[-1]
    if frame is None:
        return {"file": None, "line": None, "code": None, "in_project": False}
    in_project = bool(mine)
    name = os.path.relpath(os.path.realpath(frame.filename), _COPY) if in_project else frame.filename
    return {"file": name, "line": frame.lineno, "code": (frame.line or "").strip(), "in_project": in_project}


def _exception_record(exc_type, exc, tb):
    message = str(exc).strip()
    record = {"type": getattr(exc_type, "__name__", str(exc_type)), "message": message[:2000], "time": time.time()}
    record.update(_where(traceback.extract_tb(tb)))
    return record


def _guarded(step):
    def run(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the hook must never break the program
            _STATE["hook_errors"].append("%s: %s: %s" % (step.__name__, type(exc).__name__, exc))
            return None

    run.__name__ = step.__name__
    return run


# -- what every run records ----------------------------------------------------------------------
_previous_excepthook = sys.excepthook


def _excepthook(exc_type, exc, tb):
    try:
        if _STATE["exception"] is None and not issubclass(exc_type, SystemExit):
            _STATE["exception"] = _exception_record(exc_type, exc, tb)
    except Exception:  # noqa: BLE001
        pass
    _previous_excepthook(exc_type, exc, tb)


@_guarded
def _modules_from_origin():
    """Modules imported from the user's own tree: they ran unmigrated (or un-copied)."""
    if _ORIGIN == _COPY:
        return []
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and _inside(path, _ORIGIN) and not _inside(path, _COPY):
            found.append(os.path.relpath(os.path.realpath(path), _ORIGIN))
    return sorted(set(found))[:20]


def _write_record():
    try:
        torch = sys.modules.get("torch")
        if torch is not None and _STATE["cuda_available"] is None:
            _STATE["torch"] = True
            real = getattr(torch.cuda, "_torchfix_device_real_is_available", None) or torch.cuda.is_available
            _STATE["cuda_available"] = bool(real())
        _STATE["from_origin"] = _modules_from_origin() or []
        _STATE["ended"] = time.time()
        _classify(_STATE["exception"])
        folder = os.environ.get(RECORDS_ENV)
        if not folder:
            return
        # read once the command has ended; a record cut short (the process killed) is skipped
        with open(os.path.join(folder, "%d.json" % os.getpid()), "w") as out:
            out.write(json.dumps(_STATE, default=str))
    except Exception:  # noqa: BLE001 - never an error at exit of the user's program
        pass


@_guarded
def _classify(record):
    """Is the exception a device mismatch? (Only torch raises those: asked only once torch is
    loaded, with the checker's own patterns.)"""
    if record is not None and "torch" in sys.modules:
        checker = sys.modules.get(CHECKER_MODULE) or _load_beside(CHECKER_MODULE)
        record["device_error"] = bool(checker.is_device_error(record.get("message") or ""))


@_guarded
def _point_paths_at_the_copy():
    """``sys.path`` entries (a ``.pth`` of an editable install, ``PYTHONPATH``) and editable
    finders (setuptools' ``__editable___*_finder``) that name the user's tree: the copy instead."""
    if _ORIGIN == _COPY:
        return

    def moved(path):
        if isinstance(path, str) and path and _inside(path, _ORIGIN) and not _inside(path, _COPY):
            return os.path.join(_COPY, os.path.relpath(os.path.realpath(path), _ORIGIN))
        return path

    sys.path[:] = [moved(p) for p in sys.path]
    for name, module in list(sys.modules.items()):
        if name.startswith("__editable__") and isinstance(getattr(module, "MAPPING", None), dict):
            for key, value in list(module.MAPPING.items()):
                module.MAPPING[key] = moved(value)


# -- torch: counted questions in every run, the stand-in GPU on request --------------------------
def _asked_from_project():
    frame = sys._getframe(2)
    return frame is not None and _inside(frame.f_code.co_filename, _COPY)


@_guarded
def _count_gpu_questions(torch):
    cuda = torch.cuda
    real_available, real_count = cuda.is_available, cuda.device_count
    cuda._torchfix_device_real_is_available = real_available

    def is_available(*args, **kwargs):
        if _asked_from_project():
            _STATE["cuda_asked"] += 1
        return real_available(*args, **kwargs)

    def device_count(*args, **kwargs):
        if _asked_from_project():
            _STATE["cuda_asked"] += 1
        return real_count(*args, **kwargs)

    cuda.is_available, cuda.device_count = is_available, device_count
    for owner in (torch.Tensor, torch.nn.Module):
        _count_cuda_calls(owner)


def _count_cuda_calls(owner):
    real = owner.cuda

    def cuda(self, *args, **kwargs):
        _STATE["cuda_asked"] += 1
        return real(self, *args, **kwargs)

    owner.cuda = cuda


def _load_beside(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@_guarded
def _stand_in(torch):
    """``meta`` plays the GPU (see the module docstring)."""
    from torch.overrides import TorchFunctionMode

    checker, legacy = _load_beside(CHECKER_MODULE), _load_beside(LEGACY_MODULE)
    meta = torch.device("meta")
    _STATE["stand_in"] = True
    used = legacy.install(meta)  # .cuda() -> .to(meta); loss.data[0]; .item() of a meta tensor
    _STATE["legacy_shims"] = used

    def is_cuda_device(value):
        if isinstance(value, torch.device):
            return value.type == "cuda"
        return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))

    class GpuIsMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.device and (is_cuda_device(args[0] if args else kwargs.get("type"))):
                _STATE["gpu_uses"] += 1
                return meta  # torch.device("cuda", 0) too: one stand-in GPU
            if any(is_cuda_device(a) for a in args):
                args = tuple(meta if is_cuda_device(a) else a for a in args)
                _STATE["gpu_uses"] += 1
            if is_cuda_device(kwargs.get("device")):
                kwargs = dict(kwargs, device=meta)
                _STATE["gpu_uses"] += 1
            return func(*args, **kwargs)

    check = checker.DeviceChecker.__torch_dispatch__
    check = getattr(check, "__wrapped__", check)  # torch wraps it to import torch._dynamo (1-2 s) when first called

    class RecordingChecker(checker.DeviceChecker):
        @classmethod
        def _should_skip_dynamo(cls):
            return False  # leave this method unwrapped too: the program's own torch.compile is not checked

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            _STATE["stand_in_checked"] += 1
            try:
                return check(self, func, types, args, kwargs)
            except checker.DeviceMismatchError as exc:
                if _STATE["device_mismatch"] is None:
                    record = {"type": type(exc).__name__, "message": str(exc), "time": time.time()}
                    record.update(_where(traceback.extract_stack()[:-1]))
                    _STATE["device_mismatch"] = record
                raise

    _pretend_one_gpu(torch, meta)
    GpuIsMeta().__enter__()
    RecordingChecker().__enter__()


def _pretend_one_gpu(torch, meta):
    import types

    cuda = torch.cuda

    def available():
        if _asked_from_project():
            _STATE["cuda_asked"] += 1
        return True

    def one():
        if _asked_from_project():
            _STATE["cuda_asked"] += 1
        return 1

    properties = types.SimpleNamespace(
        name="stand-in GPU (meta)", major=8, minor=0, total_memory=16 << 30, multi_processor_count=1,
    )
    cuda.is_available, cuda.device_count = available, one
    cuda.current_device = lambda: 0
    cuda.get_device_name = lambda *a, **k: properties.name
    cuda.get_device_properties = lambda *a, **k: properties
    cuda.get_device_capability = lambda *a, **k: (8, 0)
    for name in ("synchronize", "empty_cache", "set_device", "ipc_collect", "reset_peak_memory_stats"):
        setattr(cuda, name, lambda *a, **k: None)
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(cuda, name, lambda *a, **k: 0)
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", "meta"))
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    for dunder, zero in (("__float__", 0.0), ("__int__", 0)):
        _meta_placeholder(torch, dunder, zero)
    _one_gpu_data_parallel(torch, meta)


def _meta_placeholder(torch, dunder, zero):
    real = getattr(torch.Tensor, dunder)

    def method(self):
        if self.is_meta:
            _STATE["placeholders"] += 1
            return zero
        return real(self)

    setattr(torch.Tensor, dunder, method)


def _one_gpu_data_parallel(torch, meta):
    """``DataParallel`` on one GPU: its inputs go to the device, then its module runs."""
    from torch.nn.parallel import DataParallel

    def to_meta(value):
        if isinstance(value, torch.Tensor):
            return value.to(meta)
        if isinstance(value, (list, tuple)):
            return type(value)(to_meta(v) for v in value)
        if isinstance(value, dict):
            return {k: to_meta(v) for k, v in value.items()}
        return value

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        return self.module(*to_meta(inputs), **to_meta(kwargs))

    DataParallel.forward = forward


def _torch_loaded(torch):
    _STATE["torch"] = True
    _count_gpu_questions(torch)
    if os.environ.get(STAND_IN_ENV) == "1":
        real = getattr(torch.cuda, "_torchfix_device_real_is_available", torch.cuda.is_available)
        if not real():  # never on a real GPU
            _stand_in(torch)


class _AfterTorch(object):
    """A meta path finder that lets torch import, then calls :func:`_torch_loaded`."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.util

        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _guarded(_torch_loaded)(module)

        spec.loader.exec_module = exec_module
        return spec


@_guarded
def _chain_sitecustomize():
    """Run the ``sitecustomize`` this file hides (a virtualenv's or the distribution's)."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(_HERE)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _install():
    sys.excepthook = _excepthook
    atexit.register(_write_record)
    _point_paths_at_the_copy()
    if "torch" in sys.modules:
        _guarded(_torch_loaded)(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorch())
    _chain_sitecustomize()


if __name__ == "sitecustomize" and os.environ.get(RECORDS_ENV):  # imported for its names, it does nothing
    _install()
