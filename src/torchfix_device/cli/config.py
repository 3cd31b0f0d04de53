"""Defaults from ``[tool.torchfix-device]`` in the nearest ``pyproject.toml``, or from the file
``--config FILE`` names, with ``--config "KEY = VALUE"`` overrides on top; ``--isolated`` reads
no file. ``[tool.torchfix_device]`` (underscore) is the same table; a file may not hold both."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from torchfix_device.run import budget
from torchfix_device.files.pyproject import find_pyproject
from torchfix_device.devices.expression import DeviceExpressionError, validate_device_expression

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = "torchfix-device"
TABLE_ALIAS = "torchfix_device"
LIST_KEYS = ("select", "extend-select", "ignore", "exclude", "extend-exclude")
KNOWN_KEYS = {*LIST_KEYS, "unsafe-fixes", "device-expression", "force-exclude", "max-file-size", "cache-dir",
              "file-time-limit", "file-memory-limit", "per-file-ignores"}
SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3, "gib": 1024**3}


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
    extend_select: list[str] = field(default_factory=list)
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool = False
    max_file_size: int | None = None
    cache_dir: Path | None = None
    """Relative paths are taken from the configuration file's folder."""
    table: dict = field(default_factory=dict, repr=False)
    """The keys as read (``--config KEY=VALUE`` overrides are laid over them)."""
    file_time_limit: float | None = budget.DEFAULT_SECONDS
    """Processor seconds one file may take (None: no limit)."""
    file_memory_limit: int | None = budget.DEFAULT_MEMORY
    """Bytes of memory one file may add to the process (None: no limit)."""
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    """``per-file-ignores``: a glob (relative to the configuration file's folder; ``!`` negates
    it) to the codes, names or prefixes left out for the files it matches, as ruff's."""


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _our_table(data: dict, path: Path, *, top_level_fallback: bool) -> dict | None:
    """``[tool.torchfix-device]`` (or its underscore spelling) of a parsed file; with
    ``top_level_fallback``, the file's own keys when it has neither (a ``--config`` file)."""
    tool = data.get("tool", {})
    tables = {name: tool[name] for name in (TABLE, TABLE_ALIAS) if isinstance(tool, dict) and name in tool}
    if len(tables) == 2:
        raise ConfigError(f"{path}: both [tool.{TABLE}] and [tool.{TABLE_ALIAS}]: keep one")
    if not tables:
        return {k: v for k, v in data.items() if k != "tool"} if top_level_fallback else None
    name, table = tables.popitem()
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{name}] must be a table, not {type(table).__name__}")
    return table


def load_config(start: Path) -> Config:
    """The settings of the nearest ``pyproject.toml`` above ``start``; empty when there is none."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    table = _our_table(_read_toml(path), path, top_level_fallback=False)
    return Config(source=None) if table is None else parse_table(table, path)


def load_settings(start: Path, *, config_file: Path | None = None, overrides: Sequence[str] = (), isolated: bool = False) -> Config:
    """The configuration a run uses: ``config_file`` (``--config FILE``) instead of the nearest
    ``pyproject.toml``, none with ``isolated``, then each ``KEY = VALUE`` of ``overrides``."""
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"--config {config_file}: no such file")
        table = _our_table(_read_toml(config_file), config_file, top_level_fallback=True) or {}
        config = parse_table(table, config_file)
    elif isolated:
        config = Config()
    else:
        config = load_config(start)
    if overrides:
        table = dict(config.table)
        for override in overrides:
            try:
                table.update(tomllib.loads(override))
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"--config {override!r}: neither a file nor a `KEY = VALUE` setting: {exc}") from None
        source = config.source
        config = parse_table(table, source or Path("--config"))
        config.source = source
    return config


def parse_table(table: dict, path: Path) -> Config:
    """A :class:`Config` from the keys of our table in the file ``path``."""
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: [tool.{TABLE}]: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KNOWN_KEYS))}"
        )
    config = Config(source=path)
    for key in LIST_KEYS:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [tool.{TABLE}] {key} must be a list of strings")
        setattr(config, key.replace("-", "_"), value)
    for key in ("unsafe-fixes", "force-exclude"):
        value = table.get(key, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: [tool.{TABLE}] {key} must be true or false")
        setattr(config, key.replace("-", "_"), value)
    config.device_expression = _device_expression(table, path)
    ignores = table.get("per-file-ignores", {})
    if not isinstance(ignores, dict) or not all(
        isinstance(codes, list) and all(isinstance(c, str) for c in codes) for codes in ignores.values()
    ):
        raise ConfigError(
            f"{path}: [tool.{TABLE}] per-file-ignores must be a table of glob = [codes], "
            'e.g. "tests/*" = ["TFD001"]'
        )
    config.per_file_ignores = {str(pattern): list(codes) for pattern, codes in ignores.items()}
    if "max-file-size" in table:
        try:
            config.max_file_size = parse_size(table["max-file-size"])
        except ValueError as exc:
            raise ConfigError(f"{path}: [tool.{TABLE}] max-file-size: {exc}") from None
    if "cache-dir" in table:
        if not isinstance(table["cache-dir"], str) or not table["cache-dir"]:
            raise ConfigError(f"{path}: [tool.{TABLE}] cache-dir must be a folder name")
        config.cache_dir = (path.parent / table["cache-dir"]) if path.is_file() else Path(table["cache-dir"])
    for key, parse, attribute in (
        ("file-time-limit", budget.parse_seconds, "file_time_limit"),
        ("file-memory-limit", budget.parse_memory, "file_memory_limit"),
    ):
        if key in table:
            try:
                setattr(config, attribute, parse(table[key]))
            except ValueError as exc:
                raise ConfigError(f"{path}: [tool.{TABLE}] {key}: {exc}") from None
    config.table = dict(table)
    return config


def parse_size(value: object) -> int:
    """Bytes from ``2000000``, ``"2MB"``, ``"1.5 MiB"`` or ``"500kB"``."""
    if isinstance(value, bool):
        raise ValueError("a size in bytes (2000000) or with a unit (\"2MB\") expected")
    if isinstance(value, int):
        number, unit = float(value), ""
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        number_text, unit = digits, text[len(digits):]
        try:
            number = float(number_text)
        except ValueError:
            raise ValueError(f"{value!r} is not a size (e.g. 2000000, \"2MB\", \"500kB\")") from None
    else:
        raise ValueError(f"{value!r} is not a size (e.g. 2000000, \"2MB\", \"500kB\")")
    if unit not in SIZE_UNITS:
        raise ValueError(f"unknown unit {unit!r} in {value!r} (B, kB, MB, GB, KiB, MiB, GiB)")
    size = int(number * SIZE_UNITS[unit])
    if size <= 0:
        raise ValueError(f"{value!r}: the size must be positive")
    return size


def _device_expression(table: dict, path: Path) -> str | None:
    value = table.get("device-expression")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{path}: [tool.{TABLE}] device-expression must be a string")
    try:
        return validate_device_expression(value)
    except DeviceExpressionError as exc:
        raise ConfigError(f"{path}: [tool.{TABLE}] {exc}") from None
