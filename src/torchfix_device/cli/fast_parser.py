"""The common ``check`` and ``apply`` command lines, parsed without building the typer app.

Importing typer (and, through it, click, rich and pydantic) takes longer than answering a whole
run from the cache, so :func:`parse` reads the command lines made only of the options below and
hands them to :mod:`torchfix_device.cli.commands`, as the typer app would. Anything else (``--help``,
an unknown or malformed option, ``--interactive``, a value that typer would refuse) returns
None, and the typer app parses the command line and answers, errors included. Both read the
options from one table (:mod:`torchfix_device.cli.flags`); ``tests/test_fastpath.py`` checks that
they give the same output and exit code for the same command line.
``TORCHFIX_DEVICE_NO_FAST_PATH=1`` turns it off.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from torchfix_device.cli import flags
from torchfix_device.cli.arguments import Arguments

TRUE, FALSE = "true", "false"
DISABLE_ENV = "TORCHFIX_DEVICE_NO_FAST_PATH"


def _table(command: str) -> dict[str, tuple[str, str]]:
    """Option spelling → (field of :class:`Arguments`, kind): a switch's two spellings as TRUE and
    FALSE, the other kinds as :mod:`.flags` names them."""
    table: dict[str, tuple[str, str]] = {}
    for flag in flags.flags_of(command):
        if not flag.fast:
            continue
        for name in flag.names:
            table[name] = (flag.field, TRUE if flag.kind == flags.SWITCH else flag.kind)
        if flag.negative:
            table[flag.negative] = (flag.field, FALSE)
    return table


OPTIONS: dict[str, dict[str, tuple[str, str]]] = {command: _table(command) for command in flags.BOTH}
"""Per command: option → (field of :class:`Arguments`, kind), built from :data:`flags.FLAGS`."""
CHOICES = {flag.field: flag.choices for flag in flags.FLAGS if flag.kind == flags.CHOICE}


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
    return args


def _store(args: Arguments, field: str, kind: str, value: str) -> None:
    if kind == flags.LIST:
        current = getattr(args, field)
        setattr(args, field, (current or []) + [value])
    elif kind == flags.PATH:
        setattr(args, field, Path(value))
    elif kind == flags.INT:
        try:
            number = int(value)
        except ValueError:
            raise _Fallback from None
        if number < 1:
            raise _Fallback
        setattr(args, field, number)
    elif kind == flags.CHOICE:
        if value.lower() not in CHOICES[field]:
            raise _Fallback
        setattr(args, field, value.lower())
    else:
        setattr(args, field, value)
