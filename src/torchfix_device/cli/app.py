"""The typer app: every command and option, with its help. ``check`` and ``apply`` only gather
their options into :class:`~torchfix_device.cli.arguments.Arguments` for
:mod:`torchfix_device.cli.commands`; the common ``check`` and ``apply`` command lines skip this module
altogether (:mod:`torchfix_device.cli.fast_parser`), with the same result.

Help is plain text (click's formatter): it wraps at the terminal's width and never cuts an
option's name.
"""

from __future__ import annotations

import inspect
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
import typer.core

from torchfix_device import __version__
from torchfix_device.cli import commands, flags
from torchfix_device.cli.arguments import Arguments

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Make legacy PyTorch code device-correct and device-agnostic.",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)

EXIT_OK, EXIT_USAGE = commands.EXIT_OK, commands.EXIT_USAGE


def _quiet_argument_type(display_type):  # noqa: ANN001, ANN202 - typer's method
    """Recent typer writes an argument's Python type beside its name in the help
    (``PATH <list[Path]>``); the help reads ``PATH``, as the usage line does."""

    def display_type_rich(self, ctx):  # noqa: ANN001, ANN202
        return None if self.metavar == "PATH" else display_type(self, ctx)

    return display_type_rich


if hasattr(typer.core.TyperArgument, "display_type_rich"):
    typer.core.TyperArgument.display_type_rich = _quiet_argument_type(typer.core.TyperArgument.display_type_rich)


def _option(flag: flags.Flag) -> tuple[object, object]:
    """(annotation, typer default) of one option of :data:`flags.FLAGS`."""
    if flag.kind == flags.SWITCH:
        names = (f"{flag.names[0]}/{flag.negative}", *flag.names[1:]) if flag.negative else flag.names
        return (Optional[bool] if flag.negative else bool), typer.Option(flag.default, *names, help=flag.help)
    if flag.kind == flags.CHOICE:
        choice = Enum(flag.field, {c: c for c in flag.choices}, type=str)  # typer lists the choices
        return choice, typer.Option(choice(flag.default), *flag.names, help=flag.help, case_sensitive=False, metavar=flag.metavar)
    annotation = {flags.LIST: Optional[List[str]], flags.PATH: Optional[Path], flags.INT: Optional[int]}.get(flag.kind, Optional[str])
    extra = {"min": 1} if flag.kind == flags.INT else {}
    return annotation, typer.Option(None, *flag.names, help=flag.help, metavar=flag.metavar, show_default=False, **extra)


def _add_command(command: str) -> None:
    """``check`` or ``apply``: PATH... and every option :data:`flags.FLAGS` gives the command; the
    values go to :mod:`torchfix_device.cli.commands` as :class:`Arguments`."""
    parameters = [
        inspect.Parameter(
            "paths", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[List[Path]],
            default=typer.Argument(None, help=flags.PATHS_HELP + " Default: the current folder.", show_default=False, metavar="PATH"),
        )
    ]
    for flag in flags.flags_of(command):
        annotation, default = _option(flag)
        parameters.append(inspect.Parameter(flag.field, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default))

    def run(**values: object) -> None:
        raise typer.Exit(commands.main(_arguments(command, values)))

    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    run.__doc__ = flags.COMMAND_HELP[command]
    app.command(name=command)(run)


def _arguments(command: str, values: dict) -> Arguments:
    """Typer's values as :class:`Arguments`: an option not given (None) keeps the field's default
    (``--exclude`` absent: the configuration's), a choice gives its text."""
    fields: dict[str, object] = {"paths": list(values.get("paths") or [])}
    for flag in flags.flags_of(command):
        value = values.get(flag.field)
        if value is not None:
            fields[flag.field] = list(value) if flag.kind == flags.LIST else value.value if isinstance(value, Enum) else value
    return Arguments(command=command, **fields)


_add_command(flags.APPLY)
_add_command(flags.CHECK)


@app.command()
def rules(
    output_format: str = typer.Option("text", "--output-format", metavar="[text|json]", help="A table (text) or a JSON list."),
) -> None:
    """List the codemods: code, name, fix (safe fix, unsafe fix or report only) and summary."""
    from torchfix_device.report import console as report

    if output_format.lower() not in ("text", "json"):
        report.usage_error(f"--output-format {output_format!r}: choose text or json")
        raise typer.Exit(EXIT_USAGE)
    report.print_rules(json_output=output_format.lower() == "json")


@app.command()
def explain(
    code: Optional[str] = typer.Argument(None, help="A codemod code (TFD005) or name.", show_default=False),
    all_rules: bool = typer.Option(False, "--all", help="Every codemod's documentation, one after the other."),
) -> None:
    """Show one codemod's documentation (or every one with --all)."""
    from torchfix_device.report import console as report
    from torchfix_device.codemods.catalog import UnknownRuleError, all_codemods, lookup

    if all_rules == (code is not None):
        report.usage_error("give a CODE or --all (not both)")
        raise typer.Exit(EXIT_USAGE)
    try:
        chosen = all_codemods() if all_rules else [lookup(code or "")]
    except UnknownRuleError as exc:
        report.usage_error(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    report.print_explanations(chosen)


@app.command()
def verify(
    paths: Optional[List[Path]] = typer.Argument(None, help="Model files: fixture models, or files defining nn.Module classes (default: the bundled models). With --run: the project's folder (default: the current folder).", show_default=False, metavar="PATH"),
    device: Optional[str] = typer.Option(None, "--device", help="Target device (default: cuda, mps or xpu if present, else meta)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
    run: Optional[str] = typer.Option(None, "--run", metavar="COMMAND", help='Your own check: run COMMAND (e.g. "python train.py --epochs 1") in a copy of the project before and after the migration, and say whether it runs.'),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS", help="With --run: stop each run of the command after SECONDS."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="With --run: migrate with the unsafe fixes too."),
    stand_in: Optional[bool] = typer.Option(None, "--stand-in/--no-stand-in", help="With --run on a machine without CUDA: run again with meta standing in for a GPU to find device mismatches (default: when the program asks for a GPU)."),
) -> None:
    """Run models, or your own command (--run), before and after the rewrite on this hardware."""
    if run is None:
        given = [name for name, value in (("--timeout", timeout), ("--unsafe-fixes", unsafe_fixes or None), ("--stand-in/--no-stand-in", stand_in)) if value is not None]
        if given:
            _verify_usage_error(f"{', '.join(given)}: only with --run COMMAND")
        from torchfix_device.verify.cli import run_verify

        raise typer.Exit(run_verify(paths or [], device, as_json))
    if device is not None:
        _verify_usage_error("--device does not apply to --run: the command runs on what the machine has")
    from torchfix_device.verify.run_cli import run_user_command

    raise typer.Exit(run_user_command(run, paths or [], timeout=timeout, unsafe_fixes=unsafe_fixes, stand_in=stand_in, as_json=as_json))


def _verify_usage_error(text: str) -> None:
    from torchfix_device.report import console as report

    report.usage_error(text)
    raise typer.Exit(EXIT_USAGE)


def _version_callback(value: bool) -> None:
    if value:
        print(f"torchfix-device {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Show the version."),
) -> None:
    """Make legacy PyTorch code device-correct and device-agnostic."""
