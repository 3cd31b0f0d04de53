"""Plotting draws nowhere, but still sees its data (always installed).

The runner sets ``MPLBACKEND=Agg``; here ``pyplot.show``/``pause``/``ion``/``draw`` return at once
(no window, no sleep) and every plotting call (pyplot's and ``Axes``'s) first passes each
array-like argument through ``np.asarray``, then draws as usual on the Agg canvas. So a CUDA
tensor (or one that requires grad) reaching matplotlib fails exactly as it would on a screen:
``TypeError: can't convert cuda:0 device type tensor to numpy``.
"""

from __future__ import annotations

import functools

PLOTTING = (
    "plot", "scatter", "imshow", "hist", "bar", "barh", "fill_between", "fill", "text",
    "annotate", "contour", "contourf", "pcolor", "pcolormesh", "errorbar", "step", "stem",
    "semilogx", "semilogy", "loglog", "matshow", "plot_surface", "plot_wireframe", "quiver",
    "xlim", "ylim", "set_xlim", "set_ylim", "set_data", "set_ydata", "set_xdata",
)


def _array_like(value) -> bool:
    if isinstance(value, (str, bytes, dict)) or value is None:
        return False
    return hasattr(value, "__array__") or hasattr(value, "numpy") or isinstance(value, (list, tuple))


def _touch(value) -> None:
    import numpy as np

    if not _array_like(value):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            if hasattr(item, "__array__") or hasattr(item, "numpy"):
                np.asarray(item)
        return
    np.asarray(value)


def _checked(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            _touch(value)
        return function(*args, **kwargs)

    wrapper._run_harness = True
    return wrapper


def _no_op(*args, **kwargs):
    return None


def _patch_pyplot(plt) -> None:
    for name in PLOTTING:
        function = getattr(plt, name, None)
        if callable(function) and not getattr(function, "_run_harness", False):
            setattr(plt, name, _checked(function))
    plt.show = _no_op
    plt.pause = _no_op
    plt.ion = _no_op
    plt.draw = _no_op


def _patch_classes(module_name: str, class_names: tuple[str, ...]):
    def patch(module) -> None:
        for class_name in class_names:
            cls = getattr(module, class_name, None)
            if cls is None:
                continue
            for name in PLOTTING:
                function = cls.__dict__.get(name)
                if callable(function) and not getattr(function, "_run_harness", False):
                    setattr(cls, name, _checked(function))

    return patch


def install() -> None:
    from . import when_imported

    when_imported("matplotlib.pyplot", _patch_pyplot)
    when_imported("matplotlib.axes", _patch_classes("matplotlib.axes", ("Axes",)))
    when_imported("matplotlib.lines", _patch_classes("matplotlib.lines", ("Line2D",)))
    when_imported("matplotlib.image", _patch_classes("matplotlib.image", ("AxesImage",)))
    when_imported("mpl_toolkits.mplot3d.axes3d", _patch_classes("mpl_toolkits.mplot3d.axes3d", ("Axes3D",)))
