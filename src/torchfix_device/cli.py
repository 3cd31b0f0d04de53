"""The command line: thin — parse options, call the runner, print through ``report``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from torchfix_device import __version__, report
from torchfix_device.codemod import Codemod, UnknownRuleError, all_codemods, lookup, select_codemods
from torchfix_device.config import ConfigError, load_config
from torchfix_device.cache import ResultCache, default_cache_folder
from torchfix_device.parallel import default_jobs
from torchfix_device.runner import Interrupted, run
from torchfix_device.shard import Shard, ShardError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Make legacy PyTorch code device-correct and device-agnostic.",
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C

PathsArg = typer.Argument(..., help="Files or folders (folders are searched for *.py).", show_default=False)
SelectOpt = typer.Option(None, "--select", help="Only these codemods (codes or names, comma-separated or repeated).")
IgnoreOpt = typer.Option(None, "--ignore", help="Skip these codemods (codes or names).")
UnsafeOpt = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes", help="Also apply fixes marked unsafe.")
JobsOpt = typer.Option(None, "--jobs", "-j", min=1, help="Processes to use (default: the number of cores).", show_default=False)
NoCacheOpt = typer.Option(False, "--no-cache", help="Neither read nor write the result cache.")
ShardOpt = typer.Option(None, "--shard", metavar="I/N", help="Only this deterministic share of the files (1/4 ... 4/4), for CI matrices.")


def _split(values: Optional[List[str]]) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def _usage_error(message: str) -> "typer.Exit":
    report.stderr_console().print(f"[red]error[/]: {escape(message)}", soft_wrap=True)
    return typer.Exit(EXIT_USAGE)


def _resolve(paths: list[Path], select: Optional[List[str]], ignore: Optional[List[str]], unsafe: Optional[bool]):
    try:
        config = load_config(paths[0] if paths else Path.cwd())
        select_codemods(config.select, config.ignore)  # the file's codes are checked on their own
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    except UnknownRuleError as exc:
        raise _usage_error(f"{config.source}: [tool.torchfix-device]: {exc}") from None
    try:
        chosen = select_codemods(_split(select) or config.select, _split(ignore) or config.ignore)
    except UnknownRuleError as exc:
        raise _usage_error(str(exc)) from None
    missing = [p for p in paths if not p.exists() and not p.is_symlink()]
    if missing:
        raise _usage_error("no such file or folder: " + ", ".join(str(p) for p in missing))
    return chosen, config.unsafe_fixes if unsafe is None else unsafe, config.exclude


def _performance_options(
    paths: list[Path], codemods: list, unsafe: bool, jobs: Optional[int], no_cache: bool, shard: Optional[str]
) -> dict:
    """``run``'s keyword arguments for --jobs, --no-cache and --shard."""
    try:
        chosen_shard = Shard.parse(shard) if shard is not None else None
    except ShardError as exc:
        raise _usage_error(str(exc)) from None
    cache = None if no_cache else ResultCache(default_cache_folder(paths), codemods, unsafe_fixes=unsafe)
    return {"jobs": jobs or default_jobs(), "cache": cache, "shard": chosen_shard}


def _interrupted(stop: Interrupted, *, wrote: bool) -> "typer.Exit":
    """Ctrl-C: what was done, how far it got, no traceback."""
    console = report.stderr_console()
    report.print_problems(stop.results, console)
    console.print(report.summary_line(stop.results, wrote=wrote, checking=not wrote), soft_wrap=True)
    state = "every file is either unchanged or fully rewritten" if wrote else "nothing was written"
    console.print(f"[yellow]interrupted[/] after {stop.done} of {stop.total} files; {state}", soft_wrap=True)
    return typer.Exit(EXIT_INTERRUPTED)


@app.command()
def apply(
    paths: List[Path] = PathsArg,
    diff: bool = typer.Option(False, "--diff", help="Dry run: print a unified diff on stdout, write nothing."),
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    unsafe_fixes: Optional[bool] = UnsafeOpt,
    jobs: Optional[int] = JobsOpt,
    no_cache: bool = NoCacheOpt,
    shard: Optional[str] = ShardOpt,
) -> None:
    """Rewrite files in place (or show the rewrite with --diff). Summary on stderr."""
    codemods, unsafe, exclude = _resolve(paths, select, ignore, unsafe_fixes)
    speed = _performance_options(paths, codemods, unsafe, jobs, no_cache, shard)
    try:
        results = run(paths, codemods, write=not diff, unsafe_fixes=unsafe, exclude=exclude, **speed)
    except Interrupted as stop:
        raise _interrupted(stop, wrote=not diff) from None
    console = report.stderr_console()
    if diff:
        report.write_diffs(results)
    report.print_problems(results, console)
    report.print_manual_review(results, console)
    console.print(report.summary_line(results, wrote=not diff), soft_wrap=True)
    failed = any(r.status == "failed" for r in results)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


@app.command()
def check(
    paths: List[Path] = PathsArg,
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    unsafe_fixes: Optional[bool] = UnsafeOpt,
    jobs: Optional[int] = JobsOpt,
    no_cache: bool = NoCacheOpt,
    shard: Optional[str] = ShardOpt,
) -> None:
    """Report findings as `path:line:col CODE message` without writing; exit 1 if any."""
    codemods, unsafe, exclude = _resolve(paths, select, ignore, unsafe_fixes)
    speed = _performance_options(paths, codemods, unsafe, jobs, no_cache, shard)
    try:
        results = run(paths, codemods, write=False, unsafe_fixes=unsafe, exclude=exclude, **speed)
    except Interrupted as stop:
        raise _interrupted(stop, wrote=False) from None
    lines = report.finding_lines(results)
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    console = report.stderr_console()
    report.print_problems(results, console)
    console.print(report.summary_line(results, wrote=False, checking=True), soft_wrap=True)
    bad = lines or any(r.status == "failed" for r in results)
    raise typer.Exit(EXIT_FINDINGS if bad else EXIT_OK)


@app.command()
def rules() -> None:
    """List the codemods: code, name, safety and summary."""
    Console().print(report.rules_table(all_codemods()))


@app.command()
def explain(code: str = typer.Argument(..., help="A codemod code (TFD005) or name.")) -> None:
    """Show one codemod's documentation."""
    try:
        codemod: type[Codemod] = lookup(code)
    except UnknownRuleError as exc:
        raise _usage_error(str(exc)) from None
    report.print_explain(codemod, Console())


@app.command()
def verify(
    paths: Optional[List[Path]] = typer.Argument(None, help="Model files following the fixture contract (default: the bundled models)."),
    device: Optional[str] = typer.Option(None, "--device", help="Target device (default: cuda, mps or xpu if present, else meta)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
) -> None:
    """Run the fixture models before and after the rewrite on this hardware."""
    try:
        from torchfix_device.verify.cli import run_verify
    except ImportError as exc:  # pragma: no cover - the verifier itself imports no torch at module level
        raise _usage_error(f"the verifier could not be loaded: {exc}") from None
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


def main() -> None:
    app(prog_name="torchfix-device")
