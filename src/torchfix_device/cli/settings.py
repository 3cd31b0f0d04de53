"""From the command line and the configuration to what a run needs: the codemods, the files'
filters, the options, the cache. The command line wins over the configuration file; every
problem is a :class:`~torchfix_device.cli.arguments.UsageError` naming its source."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from torchfix_device.cli.arguments import Arguments, UsageError
from torchfix_device.run.cache import ResultCache, default_cache_folder
from torchfix_device.codemods.catalog import CodemodRef, UnknownRuleError, select_refs
from torchfix_device.run.catalog_memo import load_catalog
from torchfix_device.cli.config import TABLE, Config, ConfigError, load_settings, parse_size
from torchfix_device.devices.expression import DeviceExpressionError, validate_device_expression
from torchfix_device.options import RunOptions, default_jobs
from torchfix_device.run.shard import Shard, ShardError
from torchfix_device.run.stdin import STDIN, is_stdin

CACHE_DIR_ENV = "TORCHFIX_DEVICE_CACHE_DIR"


@dataclass
class Settings:
    paths: list[Path]
    config: Config
    codemods: list[CodemodRef]
    exclude: list[str]
    options: RunOptions
    missing: list[Path]
    """Paths given that do not exist: reported, the others still run, exit 2."""
    stdin: bool
    cache: ResultCache | None = None
    jobs: int = 1
    shard: Shard | None = None


def split(values: list[str] | None) -> list[str]:
    """``--select A,B --select C`` → ``[A, B, C]``."""
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def config_start(args: Arguments) -> Path:
    """Where the nearest ``pyproject.toml`` is searched from."""
    if is_stdin(args.paths):
        if len(args.paths) > 1:
            raise UsageError("`-` (stdin) cannot be combined with other paths")
        return Path(args.stdin_filename) if args.stdin_filename else Path.cwd()
    return args.paths[0] if args.paths else Path.cwd()


def _configuration(args: Arguments, start: Path) -> Config:
    files = [Path(c) for c in args.config if Path(c).is_file() or "=" not in c]
    overrides = [c for c in args.config if not (Path(c).is_file() or "=" not in c)]
    if len(files) > 1:
        raise UsageError("--config names more than one file: " + ", ".join(map(str, files)))
    try:
        return load_settings(start, config_file=files[0] if files else None, overrides=overrides, isolated=args.isolated)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def resolve(args: Arguments) -> Settings:
    """The settings of one ``check`` or ``apply`` run (no file is read but the configuration)."""
    start = config_start(args)
    config = _configuration(args, start)
    stdin = is_stdin(args.paths)
    folder = None if args.no_cache or stdin else cache_folder(args, config)
    if folder is not None:
        load_catalog(folder)
    try:
        select_refs(config.select, config.ignore, config.extend_select)  # the file's codes are checked on their own
    except UnknownRuleError as exc:
        raise UsageError(f"{config.source}: [tool.{TABLE}]: {exc}") from None
    try:
        codemods = select_refs(
            split(args.select) or config.select, split(args.ignore) or config.ignore,
            config.extend_select + split(args.extend_select),
        )
    except UnknownRuleError as exc:
        raise UsageError(str(exc)) from None
    missing = [p for p in args.paths if not p.exists() and not p.is_symlink() and str(p) != STDIN]
    exclude = (split(args.exclude) if args.exclude is not None else config.exclude) + config.extend_exclude + split(args.extend_exclude)
    settings = Settings(
        paths=[p for p in args.paths if p not in missing],
        config=config,
        codemods=codemods,
        exclude=exclude,
        options=_run_options(args, config),
        missing=missing,
        stdin=stdin,
    )
    if not stdin:
        try:
            settings.shard = Shard.parse(args.shard) if args.shard is not None else None
        except ShardError as exc:
            raise UsageError(str(exc)) from None
        settings.jobs = args.jobs or default_jobs()
        settings.cache = None if folder is None else ResultCache(folder, codemods, settings.options)
    return settings


def _run_options(args: Arguments, config: Config) -> RunOptions:
    try:
        expression = (
            validate_device_expression(args.device_expression) if args.device_expression is not None else config.device_expression
        )
    except DeviceExpressionError as exc:
        raise UsageError(str(exc)) from None
    try:
        size = parse_size(args.max_file_size) if args.max_file_size is not None else config.max_file_size
    except ValueError as exc:
        raise UsageError(f"--max-file-size: {exc}") from None
    return RunOptions(
        per_file_ignores=_per_file_ignores(config),
        per_file_root=str(config.source.parent.absolute()) if config.source is not None and config.source.is_file() else None,
        unsafe_fixes=config.unsafe_fixes if args.unsafe_fixes is None else args.unsafe_fixes,
        write=args.writes,
        device_expression=expression,
        include_generated=args.include_generated,
        respect_gitignore=args.respect_gitignore,
        report_unused_suppressions=args.show_unused,
        max_file_bytes=size,
        force_exclude=config.force_exclude if args.force_exclude is None else args.force_exclude,
        file_time_limit=config.file_time_limit,
        file_memory_limit=config.file_memory_limit,
    )


def _per_file_ignores(config: Config) -> tuple[tuple[str, frozenset[str]], ...]:
    """``per-file-ignores`` with each entry's codes, names and prefixes made codes."""
    pairs = []
    for pattern, entries in config.per_file_ignores.items():
        try:
            codes = frozenset(ref.code for ref in select_refs(entries, [], [])) if entries else frozenset()
        except UnknownRuleError as exc:
            raise UsageError(f"{config.source}: [tool.{TABLE}] per-file-ignores {pattern!r}: {exc}") from None
        pairs.append((pattern, codes))
    return tuple(pairs)


def cache_folder(args: Arguments, config: Config) -> Path:
    """``--cache-dir``, else ``$TORCHFIX_DEVICE_CACHE_DIR``, else ``cache-dir`` of the
    configuration, else the default (next to the nearest ``pyproject.toml``)."""
    if args.cache_dir is not None:
        return args.cache_dir
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    if config.cache_dir is not None:
        return config.cache_dir
    return default_cache_folder(args.paths)
