"""The nearest ``pyproject.toml``: where the configuration is read and the result cache is kept."""

from __future__ import annotations

from pathlib import Path


def find_pyproject(start: Path) -> Path | None:
    """The ``pyproject.toml`` in ``start`` (a file's folder) or the nearest folder above it."""
    folder = start.absolute()
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None
