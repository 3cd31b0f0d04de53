"""The command line's entry point (``torchfix-device``, ``python -m torchfix_device``).

A ``check`` or ``apply`` command line the fast path reads (:mod:`torchfix_device.cli.fast_parser`) goes
straight to :mod:`torchfix_device.cli.commands`; everything else to the typer app
(:mod:`torchfix_device.cli.app`), which gathers the same arguments and calls the same code. A
run answered from the cache so imports neither typer nor rich nor libcst.
"""

from __future__ import annotations

import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    from torchfix_device.run import interrupts

    interrupts.install()  # Ctrl-C, SIGTERM and SIGHUP: see torchfix_device.run.interrupts
    arguments = list(sys.argv[1:] if argv is None else argv)
    from torchfix_device.cli.fast_parser import parse

    parsed = parse(arguments)
    if parsed is not None:
        from torchfix_device.cli.commands import main as run_command

        sys.exit(run_command(parsed))
    from torchfix_device.cli.app import app

    app(args=arguments, prog_name="torchfix-device")
