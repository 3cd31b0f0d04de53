"""Non-torch library drift between 2017 and today (always installed, all variants alike).

* NumPy 1.24 removed the aliases ``np.float``, ``np.int``, ``np.bool``, ``np.object``,
  ``np.long``, ``np.complex``, ``np.str``: they are put back as the builtins they were.
* scikit-learn 1.5/1.7 renamed ``TSNE(n_iter=)`` ``max_iter``: the old keyword is passed on.
* SciPy 1.2/1.3 removed ``scipy.misc.imread``/``imsave``/``imresize``: put back on top of
  Pillow (as the SciPy versions of the time did).

Nothing torch-related is shimmed here: the point of the harness is to see what the migration
fixes.
"""

from __future__ import annotations

import builtins

NUMPY_ALIASES = {
    "float": builtins.float,
    "int": builtins.int,
    "bool": builtins.bool,
    "object": builtins.object,
    "long": builtins.int,
    "complex": builtins.complex,
    "str": builtins.str,
    "unicode": builtins.str,
}


def _patch_numpy(np) -> None:
    for name, value in NUMPY_ALIASES.items():
        if name not in np.__dict__:
            setattr(np, name, value)


def _imread(name, flatten=False, mode=None):
    import numpy as np
    from PIL import Image

    image = Image.open(name)
    if mode:
        image = image.convert(mode)
    elif flatten:
        image = image.convert("F")
    return np.array(image)


def _imsave(name, arr, format=None):
    import numpy as np
    from PIL import Image

    arr = np.asarray(arr)
    if arr.dtype != np.uint8:
        low, high = float(arr.min()), float(arr.max())
        arr = ((arr - low) / ((high - low) or 1.0) * 255).astype(np.uint8)
    Image.fromarray(arr).save(name, format=format)


def _imresize(arr, size, interp="bilinear", mode=None):
    import numpy as np
    from PIL import Image

    arr = np.asarray(arr)
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        scale = size / 100.0 if isinstance(size, int) else size
        size = (int(arr.shape[0] * scale), int(arr.shape[1] * scale))
    resample = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}.get(interp, Image.BILINEAR)
    image = Image.fromarray(arr if arr.dtype == np.uint8 else arr.astype(np.uint8))
    return np.array(image.resize((size[1], size[0]), resample))


def _patch_scipy_misc(misc) -> None:
    for name, value in {"imread": _imread, "imsave": _imsave, "imresize": _imresize}.items():
        if not hasattr(misc, name):
            setattr(misc, name, value)


def _patch_tsne(manifold) -> None:
    """scikit-learn 1.5 renamed ``TSNE(n_iter=)`` ``max_iter`` (1.7 removed the old name)."""
    tsne = manifold.TSNE
    init = tsne.__init__
    if getattr(init, "_run_harness", False):
        return

    def __init__(self, *args, **kwargs):
        if "n_iter" in kwargs:
            kwargs.setdefault("max_iter", kwargs.pop("n_iter"))
        init(self, *args, **kwargs)

    __init__._run_harness = True
    __init__.__signature__ = __import__("inspect").signature(init)  # sklearn reads its parameters
    tsne.__init__ = __init__


def install() -> None:
    from . import when_imported

    when_imported("numpy", _patch_numpy)
    when_imported("scipy.misc", _patch_scipy_misc)
    when_imported("sklearn.manifold", _patch_tsne)
