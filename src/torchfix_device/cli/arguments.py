"""The parsed command line of ``check`` and ``apply``: plain data, filled either by the typer
app (:mod:`torchfix_device.cli.app`) or by the fast path (:mod:`torchfix_device.cli.fast_parser`),
and run by :mod:`torchfix_device.cli.commands`. Field names are the options' names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class UsageError(Exception):
    """Bad usage: printed as ``error: ...``, exit 2."""


@dataclass
class Arguments:
    command: str
    """``check`` or ``apply``."""
    paths: list[Path] = field(default_factory=list)
    # what to run
    select: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    unsafe_fixes: bool | None = None
    device_expression: str | None = None
    # which files
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool | None = None
    include_generated: bool = False
    respect_gitignore: bool = True
    stdin_filename: str | None = None
    max_file_size: str | None = None
    # configuration
    config: list[str] = field(default_factory=list)
    isolated: bool = False
    # what to do
    fix: bool = False
    diff: bool = False
    add_noqa: bool = False
    allow_dirty: bool = False
    interactive: bool = False
    output_dir: Path | None = None
    report_file: Path | None = None
    # what to print, and the exit code
    output_format: str = "text"
    output_file: Path | None = None
    show_unused: bool = False
    show_fixes: bool = False
    statistics: bool = False
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    quiet: bool = False
    verbose: bool = False
    # speed
    jobs: int | None = None
    no_cache: bool = False
    cache_dir: Path | None = None
    shard: str | None = None

    @property
    def writes(self) -> bool:
        """Files are rewritten in place (``apply``, ``check --fix``) unless a dry run."""
        return (self.command == "apply" or self.fix) and not self.diff and self.output_dir is None
