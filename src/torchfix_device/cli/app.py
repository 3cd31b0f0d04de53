"""The typer app: every command and option, with its help. ``check`` and ``apply`` only gather
their options into :class:`~torchfix_device.cli.arguments.Arguments` for
:mod:`torchfix_device.cli.commands`; the common ``check`` and ``apply`` command lines skip this module
altogether (:mod:`torchfix_device.cli.fast_parser`), with the same result.

Help is plain text (click's formatter): it wraps at the terminal's width and never cuts an
option's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from torchfix_device import __version__

from torchfix_device.cli import commands
from torchfix_device.cli.arguments import Arguments
from torchfix_device.report.formats import OutputFormat

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Make legacy PyTorch code device-correct and device-agnostic.",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)

EXIT_OK, EXIT_USAGE = commands.EXIT_OK, commands.EXIT_USAGE
PATHS_HELP = "Files or folders (folders are searched for *.py and *.ipynb); - reads stdin."

SelectOpt = typer.Option(None, "--select", help="Only these codemods: codes, names, code prefixes (TFD00) or ALL; comma-separated or repeated.")
ExtendSelectOpt = typer.Option(None, "--extend-select", help="Add these codemods to the selection (as --select).")
IgnoreOpt = typer.Option(None, "--ignore", help="Skip these codemods (as --select).")
UnsafeOpt = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes", help="Also apply fixes marked unsafe.")
DeviceExpressionOpt = typer.Option(None, "--device-expression", metavar="EXPR", help="Value of an inserted device binding (default: torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")).")
ExcludeOpt = typer.Option(None, "--exclude", metavar="PATTERN", help="Leave out these files and folders (replaces `exclude` of the configuration).")
ExtendExcludeOpt = typer.Option(None, "--extend-exclude", metavar="PATTERN", help="Leave out these too (added to `exclude`).")
ForceExcludeOpt = typer.Option(None, "--force-exclude/--no-force-exclude", help="Apply the exclusions to files named on the command line too (for pre-commit).")
IncludeGeneratedOpt = typer.Option(False, "--include-generated", help="Also process files marked @generated in a comment.")
GitignoreOpt = typer.Option(True, "--respect-gitignore/--no-respect-gitignore", help="Inside a git work tree, leave out files .gitignore ignores.")
StdinFilenameOpt = typer.Option(None, "--stdin-filename", metavar="NAME", help="With PATH -: the file's name for messages and configuration.")
MaxFileSizeOpt = typer.Option(None, "--max-file-size", metavar="SIZE", help="Skip files larger than this (default 1MB; e.g. 5MB, 2000000).")
ConfigOpt = typer.Option(None, "--config", metavar="FILE|KEY=VALUE", help="Read the settings from FILE instead of the nearest pyproject.toml, or override one setting (`unsafe-fixes = true`).")
IsolatedOpt = typer.Option(False, "--isolated", help="Read no configuration file.")
AllowDirtyOpt = typer.Option(False, "--allow-dirty", help="In a git work tree, also rewrite files with uncommitted changes.")
OutputFileOpt = typer.Option(None, "--output-file", "-o", metavar="FILE", help="Write what would go to stdout (findings, statistics, the patch) to FILE.")
ShowFixesOpt = typer.Option(False, "--show-fixes", help="List the fixes made (or, in a dry run, to be made) per file and code.")
ExitZeroOpt = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings or pending changes (errors still exit 2).")
ExitNonZeroOnFixOpt = typer.Option(False, "--exit-non-zero-on-fix", help="Exit 1 when files were fixed, even if nothing remains.")
QuietOpt = typer.Option(False, "--quiet", "-q", help="Print findings and errors only: no summary.")
VerboseOpt = typer.Option(False, "--verbose", "-v", help="Also print the configuration, cache and each file's status.")
JobsOpt = typer.Option(None, "--jobs", "-j", min=1, help="Processes to use (default: the number of cores).", show_default=False)
NoCacheOpt = typer.Option(False, "--no-cache", help="Neither read nor write the result cache.")
CacheDirOpt = typer.Option(None, "--cache-dir", metavar="DIR", help="Keep the result cache in DIR (default: next to the nearest pyproject.toml).")
ShardOpt = typer.Option(None, "--shard", metavar="I/N", help="Only this deterministic share of the files (1/4 ... 4/4), for CI matrices.")


@app.command()
def apply(
    paths: List[Path] = typer.Argument(..., help=PATHS_HELP, show_default=False),
    diff: bool = typer.Option(False, "--diff", help="Dry run: print a patch on stdout (git apply takes it), write nothing; exit 1 if it is not empty."),
    select: Optional[List[str]] = SelectOpt,
    extend_select: Optional[List[str]] = ExtendSelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    unsafe_fixes: Optional[bool] = UnsafeOpt,
    report_file: Optional[Path] = typer.Option(None, "--report", metavar="FILE", help="Write a migration report: Markdown, or JSON when FILE ends in .json."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", metavar="DIR", help="Write rewritten copies of the files under DIR; leave the input untouched."),
    device_expression: Optional[str] = DeviceExpressionOpt,
    exclude: Optional[List[str]] = ExcludeOpt,
    extend_exclude: Optional[List[str]] = ExtendExcludeOpt,
    force_exclude: Optional[bool] = ForceExcludeOpt,
    include_generated: bool = IncludeGeneratedOpt,
    respect_gitignore: bool = GitignoreOpt,
    stdin_filename: Optional[str] = StdinFilenameOpt,
    max_file_size: Optional[str] = MaxFileSizeOpt,
    config: Optional[List[str]] = ConfigOpt,
    isolated: bool = IsolatedOpt,
    allow_dirty: bool = AllowDirtyOpt,
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Review each rewrite (with what it needs) and choose which to apply."),
    output_file: Optional[Path] = OutputFileOpt,
    show_fixes: bool = ShowFixesOpt,
    exit_zero: bool = ExitZeroOpt,
    exit_non_zero_on_fix: bool = ExitNonZeroOnFixOpt,
    quiet: bool = QuietOpt,
    verbose: bool = VerboseOpt,
    jobs: Optional[int] = JobsOpt,
    no_cache: bool = NoCacheOpt,
    cache_dir: Optional[Path] = CacheDirOpt,
    shard: Optional[str] = ShardOpt,
) -> None:
    """Rewrite files in place (or show the patch with --diff). Summary on stderr."""
    values = dict(locals())
    raise typer.Exit(commands.main(_arguments("apply", values)))


@app.command()
def check(
    paths: Optional[List[Path]] = typer.Argument(None, help=PATHS_HELP + " Default: the current folder.", show_default=False),
    fix: bool = typer.Option(False, "--fix/--no-fix", help="Apply the fixes (as `apply`), then report what remains."),
    diff: bool = typer.Option(False, "--diff", help="Print the patch of the fixes instead of the findings (as `apply --diff`)."),
    select: Optional[List[str]] = SelectOpt,
    extend_select: Optional[List[str]] = ExtendSelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    unsafe_fixes: Optional[bool] = UnsafeOpt,
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--output-format", help="Findings as text, json, github (workflow annotations) or sarif (2.1.0).", case_sensitive=False),
    output_file: Optional[Path] = OutputFileOpt,
    show_unused: bool = typer.Option(False, "--show-unused-suppressions", help="Also list `# noqa: TFD...` and skip-file comments that suppress nothing (exit 1 if any)."),
    show_fixes: bool = ShowFixesOpt,
    statistics: bool = typer.Option(False, "--statistics", help="Count the findings per code instead of listing them."),
    add_noqa: bool = typer.Option(False, "--add-noqa", help="Add `# noqa: TFD...` comments that suppress every finding."),
    exit_zero: bool = ExitZeroOpt,
    exit_non_zero_on_fix: bool = ExitNonZeroOnFixOpt,
    quiet: bool = QuietOpt,
    verbose: bool = VerboseOpt,
    device_expression: Optional[str] = DeviceExpressionOpt,
    exclude: Optional[List[str]] = ExcludeOpt,
    extend_exclude: Optional[List[str]] = ExtendExcludeOpt,
    force_exclude: Optional[bool] = ForceExcludeOpt,
    include_generated: bool = IncludeGeneratedOpt,
    respect_gitignore: bool = GitignoreOpt,
    stdin_filename: Optional[str] = StdinFilenameOpt,
    max_file_size: Optional[str] = MaxFileSizeOpt,
    config: Optional[List[str]] = ConfigOpt,
    isolated: bool = IsolatedOpt,
    allow_dirty: bool = AllowDirtyOpt,
    jobs: Optional[int] = JobsOpt,
    no_cache: bool = NoCacheOpt,
    cache_dir: Optional[Path] = CacheDirOpt,
    shard: Optional[str] = ShardOpt,
) -> None:
    """Report findings as `path:line:col CODE message` without writing; exit 1 if any."""
    values = dict(locals())
    values["output_format"] = values["output_format"].value
    raise typer.Exit(commands.main(_arguments("check", values)))


def _arguments(command: str, values: dict) -> Arguments:
    """Typer's values (None for an absent list) as :class:`Arguments`."""
    for name in ("paths", "select", "extend_select", "ignore", "extend_exclude", "config"):
        values[name] = list(values.get(name) or [])
    if values.get("exclude") is not None:
        values["exclude"] = list(values["exclude"])
    return Arguments(command=command, **values)


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
    paths: Optional[List[Path]] = typer.Argument(None, help="Model files: fixture models, or files defining nn.Module classes (default: the bundled models)."),
    device: Optional[str] = typer.Option(None, "--device", help="Target device (default: cuda, mps or xpu if present, else meta)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
) -> None:
    """Run models before and after the rewrite on this hardware and on the CPU."""
    from torchfix_device.verify.cli import run_verify

    raise typer.Exit(run_verify(paths or [], device, as_json))


def _version_callback(value: bool) -> None:
    if value:
        print(f"torchfix-device {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Show the version."),
) -> None:
    """Make legacy PyTorch code device-correct and device-agnostic."""
