"""Stand-ins of the run harness (``benchmarks/run_harness``), installed by ``sitecustomize``.

What each stand-in does and why it is there: ``benchmarks/run_harness/README.md``. In short:

* ``limits``   (always): stop the run after ``HARNESS_STEPS`` optimizer steps (or
  ``HARNESS_FORWARDS`` module calls, for loops without an optimizer) with exit status 86 and a
  marker line; record steps, the uncaught exception and the peak CUDA memory in
  ``$HARNESS_RECORD_DIR/record.<pid>.json``.
* ``plot``     (always): matplotlib draws nowhere (Agg), ``show``/``pause`` return at once, and
  every array-like argument of a plotting call still goes through ``np.asarray``.
* ``datasets`` : torchvision datasets (MNIST & co, CIFAR10/100, SVHN, ImageFolder) hold random
  data of the real shapes and dtypes instead of reading or downloading files.
* ``pretrained``: torchvision model builders ignore ``pretrained=True``/``weights=`` (random
  weights instead of a download).
* ``gym``      : a tiny fake ``gym`` package (old 4-tuple API, the right spaces); see
  ``fake_modules/gym``.
* ``drift``    (always): the NumPy aliases removed in 1.24 (``np.float`` ...), ``scipy.misc``'s
  image functions; non-torch library drift only.

Which ones an entry needs is listed in the manifest (``HARNESS_STANDINS``, comma separated).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_HOOKS: dict[str, list] = {}
_BUSY: set[str] = set()


def enabled(name: str) -> bool:
    return name in {s.strip() for s in os.environ.get("HARNESS_STANDINS", "").split(",") if s.strip()}


def when_imported(name: str, hook) -> None:
    """Call ``hook(module)`` right after module ``name`` is first imported (or now, if it is)."""
    module = sys.modules.get(name)
    if module is not None:
        hook(module)
        return
    _HOOKS.setdefault(name, []).append(hook)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of a watched module so that its hooks run after it executes."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _HOOKS or fullname in _BUSY:
            return None
        _BUSY.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            _BUSY.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module, _original=original, _name=fullname):
            _original(module)
            for hook in _HOOKS.pop(_name, []):
                hook(module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    sys.meta_path.insert(0, _PostImportFinder())
    from . import drift, limits, plotting

    limits.install()
    plotting.install()
    drift.install()
    from . import vision

    vision.install(datasets=enabled("datasets"), pretrained=enabled("pretrained"))
    if enabled("gym"):
        fake = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fake_modules")
        sys.path.insert(0, fake)
