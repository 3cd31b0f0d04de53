"""Defaults from ``[tool.torchfix-device]`` in the nearest ``pyproject.toml``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from torchfix_device import budget
from torchfix_device.device_expression import DeviceExpressionError, validate_device_expression

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KNOWN_KEYS = {"select", "ignore", "exclude", "unsafe-fixes", "device-expression", "file-time-limit", "file-memory-limit"}


class ConfigError(ValueError):
    pass


@dataclass
class Config:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    source: Path | None = None
    device_expression: str | None = None
    file_time_limit: float | None = budget.DEFAULT_SECONDS
    """Processor seconds one file may take (None: no limit)."""
    file_memory_limit: int | None = budget.DEFAULT_MEMORY
    """Bytes of memory one file may add to the process (None: no limit)."""


def find_pyproject(start: Path) -> Path | None:
    folder = start.absolute()
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def load_config(start: Path) -> Config:
    """The settings of the nearest ``pyproject.toml`` above ``start``; empty when there is none."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    tool = data.get("tool", {})
    table = tool.get("torchfix-device") if isinstance(tool, dict) else None
    if table is None:
        return Config(source=None)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchfix-device] must be a table, not {type(table).__name__}")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: [tool.torchfix-device]: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KNOWN_KEYS))}"
        )
    config = Config(source=path)
    for key in ("select", "ignore", "exclude"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [tool.torchfix-device] {key} must be a list of strings")
        setattr(config, key, value)
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{path}: [tool.torchfix-device] unsafe-fixes must be true or false")
    config.unsafe_fixes = unsafe
    config.device_expression = _device_expression(table, path)
    for key, parse, attribute in (
        ("file-time-limit", budget.parse_seconds, "file_time_limit"),
        ("file-memory-limit", budget.parse_memory, "file_memory_limit"),
    ):
        if key in table:
            try:
                setattr(config, attribute, parse(table[key]))
            except ValueError as exc:
                raise ConfigError(f"{path}: [tool.torchfix-device] {key}: {exc}") from None
    return config


def _device_expression(table: dict, path: Path) -> str | None:
    value = table.get("device-expression")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{path}: [tool.torchfix-device] device-expression must be a string")
    try:
        return validate_device_expression(value)
    except DeviceExpressionError as exc:
        raise ConfigError(f"{path}: [tool.torchfix-device] {exc}") from None
