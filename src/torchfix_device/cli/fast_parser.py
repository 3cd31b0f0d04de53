"""The common ``check`` and ``apply`` command lines, parsed without building the typer app.

Importing typer (and, through it, click, rich and pydantic) takes longer than answering a whole
run from the cache, so :func:`parse` reads the command lines made only of the options below and
hands them to :mod:`torchfix_device.cli.commands`, as the typer app would. Anything else (``--help``,
an unknown or malformed option, ``--interactive``, a value that typer would refuse) returns
None, and the typer app parses the command line and answers, errors included. The options here
have the typer app's names and meanings (``tests/test_fastpath.py`` compares the two: same
options, same output and exit code for the same command line). ``TORCHFIX_DEVICE_NO_FAST_PATH=1``
turns it off.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from torchfix_device.cli.arguments import Arguments

TRUE, FALSE, VALUE, LIST, PATH, INT, FORMAT = "true", "false", "value", "list", "path", "int", "format"
OUTPUT_FORMATS = ("text", "json", "github", "sarif")
DISABLE_ENV = "TORCHFIX_DEVICE_NO_FAST_PATH"

COMMON: dict[str, tuple[str, str]] = {
    "--diff": ("diff", TRUE),
    "--select": ("select", LIST),
    "--extend-select": ("extend_select", LIST),
    "--ignore": ("ignore", LIST),
    "--unsafe-fixes": ("unsafe_fixes", TRUE),
    "--no-unsafe-fixes": ("unsafe_fixes", FALSE),
    "--device-expression": ("device_expression", VALUE),
    "--exclude": ("exclude", LIST),
    "--extend-exclude": ("extend_exclude", LIST),
    "--force-exclude": ("force_exclude", TRUE),
    "--no-force-exclude": ("force_exclude", FALSE),
    "--include-generated": ("include_generated", TRUE),
    "--respect-gitignore": ("respect_gitignore", TRUE),
    "--no-respect-gitignore": ("respect_gitignore", FALSE),
    "--stdin-filename": ("stdin_filename", VALUE),
    "--max-file-size": ("max_file_size", VALUE),
    "--config": ("config", LIST),
    "--isolated": ("isolated", TRUE),
    "--allow-dirty": ("allow_dirty", TRUE),
    "--output-file": ("output_file", PATH),
    "-o": ("output_file", PATH),
    "--show-fixes": ("show_fixes", TRUE),
    "--exit-zero": ("exit_zero", TRUE),
    "--exit-non-zero-on-fix": ("exit_non_zero_on_fix", TRUE),
    "--quiet": ("quiet", TRUE),
    "-q": ("quiet", TRUE),
    "--verbose": ("verbose", TRUE),
    "-v": ("verbose", TRUE),
    "--jobs": ("jobs", INT),
    "-j": ("jobs", INT),
    "--no-cache": ("no_cache", TRUE),
    "--cache-dir": ("cache_dir", PATH),
    "--shard": ("shard", VALUE),
}
OPTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "check": {
        **COMMON,
        "--fix": ("fix", TRUE),
        "--no-fix": ("fix", FALSE),
        "--output-format": ("output_format", FORMAT),
        "--show-unused-suppressions": ("show_unused", TRUE),
        "--statistics": ("statistics", TRUE),
        "--add-noqa": ("add_noqa", TRUE),
    },
    "apply": {
        **COMMON,
        "--report": ("report_file", PATH),
        "--output-dir": ("output_dir", PATH),
    },
}
"""Per command: option → (field of :class:`Arguments`, kind)."""


class _Fallback(Exception):
    """Not a command line for the fast path: let typer read it."""


def parse(argv: Sequence[str]) -> Arguments | None:
    """The :class:`Arguments` of ``argv`` (without the program name), or None for typer."""
    if os.environ.get(DISABLE_ENV) or not argv or argv[0] not in OPTIONS:
        return None
    try:
        return _parse(argv[0], list(argv[1:]))
    except _Fallback:
        return None


def _parse(command: str, rest: list[str]) -> Arguments:
    table = OPTIONS[command]
    args = Arguments(command=command)
    while rest:
        token = rest.pop(0)
        if token == "-" or not token.startswith("-"):
            args.paths.append(Path(token))
            continue
        name, attached = (token.split("=", 1) + [None])[:2] if token.startswith("--") else (token, None)
        if name not in table:
            raise _Fallback  # --help, --, -i, combined short flags, unknown options: typer decides
        field, kind = table[name]
        if kind in (TRUE, FALSE):
            if attached is not None:
                raise _Fallback
            setattr(args, field, kind == TRUE)
            continue
        if attached is None:
            if not rest or (rest[0].startswith("-") and rest[0] != "-"):
                raise _Fallback
            attached = rest.pop(0)
        _store(args, field, kind, attached)
    if command == "apply" and not args.paths:
        raise _Fallback  # typer's "missing argument"
    return args


def _store(args: Arguments, field: str, kind: str, value: str) -> None:
    if kind == LIST:
        current = getattr(args, field)
        setattr(args, field, (current or []) + [value])
    elif kind == PATH:
        setattr(args, field, Path(value))
    elif kind == INT:
        try:
            number = int(value)
        except ValueError:
            raise _Fallback from None
        if number < 1:
            raise _Fallback
        setattr(args, field, number)
    elif kind == FORMAT:
        if value.lower() not in OUTPUT_FORMATS:
            raise _Fallback
        setattr(args, field, value.lower())
    else:
        setattr(args, field, value)
