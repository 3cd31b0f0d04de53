"""The command line: thin — parse options, call the runner, print through ``report``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from torchfix_device import __version__, catalog, formats, gitsafety, interrupts, report, run_lock
from torchfix_device.catalog import UnknownRuleError, select_refs
from torchfix_device.config import ConfigError, load_config
from torchfix_device.device_expression import DeviceExpressionError, validate_device_expression
from torchfix_device.formats import OutputFormat
from torchfix_device.migration_report import ReportError, report_path_problem, write_report
from torchfix_device.options import RunOptions
from torchfix_device.output_tree import output_dir_problem, write_output_tree
from torchfix_device.progress import file_progress
from torchfix_device.results import Interrupted, WritesInterrupted
from torchfix_device.runner import run
from torchfix_device.stdin_mode import STDIN, is_stdin, output_bytes, process_stdin
from torchfix_device.cache import ResultCache, default_cache_folder
from torchfix_device.parallel import default_jobs
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
ReportOpt = typer.Option(None, "--report", metavar="FILE", help="Write a migration report: Markdown, or JSON when FILE ends in .json.")
OutputDirOpt = typer.Option(None, "--output-dir", metavar="DIR", help="Write rewritten copies of the files under DIR; leave the input untouched.")
DeviceExpressionOpt = typer.Option(None, "--device-expression", metavar="EXPR", help="Value of an inserted device binding (default: torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")).")
IncludeGeneratedOpt = typer.Option(False, "--include-generated", help="Also process files marked @generated in a comment.")
GitignoreOpt = typer.Option(True, "--respect-gitignore/--no-respect-gitignore", help="Inside a git work tree, leave out files .gitignore ignores.")
StdinFilenameOpt = typer.Option(None, "--stdin-filename", metavar="NAME", help="With PATH -: the file's name for messages and configuration.")
OutputFormatOpt = typer.Option(OutputFormat.text, "--output-format", help="Findings as text, json, github (workflow annotations) or sarif (2.1.0).", case_sensitive=False)
ShowUnusedOpt = typer.Option(False, "--show-unused-suppressions", help="Also list `# noqa: TFD...` and skip-file comments that suppress nothing (exit 1 if any).")
JobsOpt = typer.Option(None, "--jobs", "-j", min=1, help="Processes to use (default: the number of cores).", show_default=False)
NoCacheOpt = typer.Option(False, "--no-cache", help="Neither read nor write the result cache.")
ShardOpt = typer.Option(None, "--shard", metavar="I/N", help="Only this deterministic share of the files (1/4 ... 4/4), for CI matrices.")


def _split(values: Optional[List[str]]) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def _usage_error(message: str) -> "typer.Exit":
    report.stderr_console().print(f"[red]error[/]: {escape(message)}", soft_wrap=True)
    return typer.Exit(EXIT_USAGE)


def _resolve(
    paths: list[Path], select: Optional[List[str]], ignore: Optional[List[str]], unsafe: Optional[bool],
    config_start: Optional[Path] = None,
):
    try:
        config = load_config(config_start or (paths[0] if paths else Path.cwd()))
        select_refs(config.select, config.ignore)  # the file's codes are checked on their own
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    except UnknownRuleError as exc:
        raise _usage_error(f"{config.source}: [tool.torchfix-device]: {exc}") from None
    try:
        chosen = select_refs(_split(select) or config.select, _split(ignore) or config.ignore)
    except UnknownRuleError as exc:
        raise _usage_error(str(exc)) from None
    missing = [p for p in paths if not p.exists() and not p.is_symlink() and str(p) != STDIN]
    if missing:
        raise _usage_error("no such file or folder: " + ", ".join(str(p) for p in missing))
    return chosen, config.unsafe_fixes if unsafe is None else unsafe, config.exclude


def _run_options(
    config_start: Path, device_expression: Optional[str], include_generated: bool, respect_gitignore: bool,
    report_unused_suppressions: bool = False,
) -> RunOptions:
    """The settings beyond the codemod selection; the command line wins over the configuration."""
    try:
        config = load_config(config_start)
        chosen = validate_device_expression(device_expression) if device_expression is not None else config.device_expression
    except (ConfigError, DeviceExpressionError) as exc:
        raise _usage_error(str(exc)) from None
    return RunOptions(
        device_expression=chosen,
        include_generated=include_generated,
        respect_gitignore=respect_gitignore,
        report_unused_suppressions=report_unused_suppressions,
        file_time_limit=config.file_time_limit,
        file_memory_limit=config.file_memory_limit,
    )


def _config_start(paths: list[Path], stdin_filename: Optional[str]) -> Path:
    if is_stdin(paths):
        if len(paths) > 1:
            raise _usage_error("`-` (stdin) cannot be combined with other paths")
        return Path(stdin_filename) if stdin_filename else Path.cwd()
    if stdin_filename is not None:
        raise _usage_error("--stdin-filename needs `-` as the path")
    return paths[0] if paths else Path.cwd()


def _performance_options(
    paths: list[Path], codemods: list, unsafe: bool, options: RunOptions, jobs: Optional[int], no_cache: bool, shard: Optional[str]
) -> dict:
    """``run``'s keyword arguments for --jobs, --no-cache and --shard."""
    try:
        chosen_shard = Shard.parse(shard) if shard is not None else None
    except ShardError as exc:
        raise _usage_error(str(exc)) from None
    cache = None if no_cache else ResultCache(
        default_cache_folder(paths), codemods, unsafe_fixes=unsafe, device_expression=options.device_expression
    )
    return {"jobs": jobs or default_jobs(), "cache": cache, "shard": chosen_shard}


def _run_files(
    paths: list[Path], codemods: list, *, write: bool, unsafe: bool, exclude: list[str], options: RunOptions, speed: dict,
    tidy: bool = False,
) -> list:
    """The runner over ``paths`` with a progress bar; Ctrl-C becomes the interrupted exit."""
    try:
        with file_progress() as bar:
            return run(
                paths, codemods, write=write, unsafe_fixes=unsafe, exclude=exclude, options=options, progress=bar, tidy=tidy, **speed
            )
    except Interrupted as stop:
        raise _interrupted(stop, wrote=write) from None


def _interrupted(stop: Interrupted, *, wrote: bool) -> "typer.Exit":
    """Ctrl-C (SIGTERM, SIGHUP): what was done, how far it got, no traceback; exit 128 + signal."""
    with interrupts.ignoring():
        console = report.stderr_console()
        report.print_problems(stop.results, console)
        console.print(report.summary_line(stop.results, wrote=wrote, checking=not wrote), soft_wrap=True)
        state = "every file is either unchanged or fully rewritten" if wrote else "nothing was written"
        console.print(f"[yellow]{interrupts.word(stop.signum)}[/] after {stop.done} of {stop.total} files; {state}", soft_wrap=True)
    return typer.Exit(interrupts.exit_code(stop.signum))


def _writes_interrupted(stop: WritesInterrupted, results: list) -> "typer.Exit":
    """Interrupted while writing the rewrites held for the git check: how many were written."""
    with interrupts.ignoring():
        console = report.stderr_console()
        report.print_problems(results, console)
        console.print(report.summary_line(results, wrote=True), soft_wrap=True)
        console.print(
            f"[yellow]{interrupts.word(stop.signum)}[/] after writing {stop.written} of {stop.total} files to rewrite; "
            f"the other {stop.total - stop.written} are unchanged; every file is either unchanged or fully rewritten",
            soft_wrap=True,
        )
    return typer.Exit(interrupts.exit_code(stop.signum))


@app.command()
def apply(
    paths: List[Path] = PathsArg,
    diff: bool = typer.Option(False, "--diff", help="Dry run: print a unified diff on stdout, write nothing."),
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    unsafe_fixes: Optional[bool] = UnsafeOpt,
    report_file: Optional[Path] = ReportOpt,
    output_dir: Optional[Path] = OutputDirOpt,
    device_expression: Optional[str] = DeviceExpressionOpt,
    include_generated: bool = IncludeGeneratedOpt,
    respect_gitignore: bool = GitignoreOpt,
    stdin_filename: Optional[str] = StdinFilenameOpt,
    allow_dirty: bool = typer.Option(
        False, "--allow-dirty", help="In a git work tree, also rewrite files with uncommitted changes."
    ),
    interactive: bool = typer.Option(
        False, "--interactive", "-i", help="Review each rewrite (with what it needs) and choose which to apply."
    ),
    jobs: Optional[int] = JobsOpt,
    no_cache: bool = NoCacheOpt,
    shard: Optional[str] = ShardOpt,
) -> None:
    """Rewrite files in place (or show the rewrite with --diff). Summary on stderr."""
    start = _config_start(paths, stdin_filename)
    codemods, unsafe, exclude = _resolve(paths, select, ignore, unsafe_fixes, config_start=start)
    options = _run_options(start, device_expression, include_generated, respect_gitignore)
    stdin = is_stdin(paths)
    speed = _performance_options(paths, codemods, unsafe, options, jobs, no_cache, shard) if not stdin else {}
    _check_apply_destinations(paths, diff=diff, output_dir=output_dir, stdin=stdin)
    _check_report_path(report_file)
    if interactive and (diff or stdin or output_dir is not None or not sys.stdin.isatty()):
        raise _usage_error(
            "--interactive needs a terminal to ask on, and cannot be combined with --diff, --output-dir or `-` (stdin)"
        )
    console = report.stderr_console()
    if stdin:
        result, raw = process_stdin(codemods, unsafe_fixes=unsafe, options=options, stdin_filename=stdin_filename)
        results = [result]
        if not diff:
            sys.stdout.buffer.write(output_bytes(result, raw))
            sys.stdout.buffer.flush()
    else:
        in_place = not diff and output_dir is None
        if in_place:
            _hold_trees(paths)
        guard = gitsafety.inspect(paths, check_dirty=not allow_dirty) if in_place else None
        if guard is not None and guard.outside:
            console.print(f"[yellow]warning[/]: {escape(gitsafety.not_protected_message(guard.outside))}", soft_wrap=True)
        write_now = in_place and not interactive and not (guard is not None and guard.dirty)
        results = _run_files(
            paths, codemods, write=write_now, unsafe=unsafe, exclude=exclude, options=options, speed=speed, tidy=in_place
        )
        if interactive:
            from torchfix_device.interactive import review

            asker = Console()
            review(results, codemods, unsafe_fixes=unsafe, console=asker, ask=lambda text: asker.input(text, markup=False),
                   refuse=lambda result: gitsafety.refuse_if_dirty(result, guard), options=options)
        elif guard is not None and guard.dirty:
            try:
                gitsafety.write_unless_dirty(results, guard)
            except WritesInterrupted as stop:
                raise _writes_interrupted(stop, results) from None
    if diff:
        report.write_diffs(results)
    written = write_output_tree(results, output_dir) if output_dir is not None else 0
    interrupts.finishing()  # every file is written: the summary and the exit status stay true
    report.print_problems(results, console)
    report.print_manual_review(results, console)
    console.print(report.summary_line(results, wrote=not diff), soft_wrap=True)
    if output_dir is not None:
        console.print(f"wrote {written} file{'s' if written != 1 else ''} under {escape(str(output_dir))}; the input is untouched", soft_wrap=True)
    if report_file is not None:
        mode = _report_mode(diff=diff, output_dir=output_dir, stdin=stdin)
        try:
            write_report(report_file, results, codemods, mode=mode)
        except ReportError as exc:
            console.print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(EXIT_FINDINGS) from None
        console.print(f"report written to {escape(str(report_file))}", soft_wrap=True)
    failed = any(r.status == "failed" for r in results)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def _hold_trees(paths: list[Path]) -> None:
    """One in-place run at a time per tree (:mod:`torchfix_device.run_lock`)."""
    try:
        run_lock.hold(paths)
    except run_lock.TreeBusy as exc:
        raise _usage_error(str(exc)) from None


def _check_apply_destinations(paths: list[Path], *, diff: bool, output_dir: Optional[Path], stdin: bool) -> None:
    if output_dir is None:
        return
    if diff:
        raise _usage_error("--output-dir and --diff cannot be combined")
    if stdin:
        raise _usage_error("--output-dir cannot be used with `-` (stdin): the result goes to stdout")
    problem = output_dir_problem(output_dir, paths)
    if problem:
        raise _usage_error(problem)


def _check_report_path(report_file: Optional[Path]) -> None:
    """Refuse a report path that cannot be written before any file is rewritten."""
    if report_file is None:
        return
    if report_file.is_dir():
        raise _usage_error(f"--report {report_file}: is a folder")
    if not report_file.parent.is_dir():
        raise _usage_error(f"--report {report_file}: no such folder {report_file.parent}")
    problem = report_path_problem(report_file)
    if problem:
        raise _usage_error(f"--report {report_file}: {problem}")


def _report_mode(*, diff: bool, output_dir: Optional[Path], stdin: bool) -> str:
    if diff:
        return "dry run (--diff): nothing written"
    if output_dir is not None:
        return f"rewritten copies written under {output_dir}; input untouched"
    if stdin:
        return "stdin to stdout"
    return "files rewritten in place"


@app.command()
def check(
    paths: List[Path] = PathsArg,
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    unsafe_fixes: Optional[bool] = UnsafeOpt,
    output_format: OutputFormat = OutputFormatOpt,
    show_unused: bool = ShowUnusedOpt,
    include_generated: bool = IncludeGeneratedOpt,
    respect_gitignore: bool = GitignoreOpt,
    stdin_filename: Optional[str] = StdinFilenameOpt,
    jobs: Optional[int] = JobsOpt,
    no_cache: bool = NoCacheOpt,
    shard: Optional[str] = ShardOpt,
) -> None:
    """Report findings as `path:line:col CODE message` without writing; exit 1 if any."""
    start = _config_start(paths, stdin_filename)
    codemods, unsafe, exclude = _resolve(paths, select, ignore, unsafe_fixes, config_start=start)
    options = _run_options(start, None, include_generated, respect_gitignore, report_unused_suppressions=show_unused)
    if is_stdin(paths):
        results = [process_stdin(codemods, unsafe_fixes=unsafe, options=options, stdin_filename=stdin_filename)[0]]
    else:
        speed = _performance_options(paths, codemods, unsafe, options, jobs, no_cache, shard)
        results = _run_files(paths, codemods, write=False, unsafe=unsafe, exclude=exclude, options=options, speed=speed)
    interrupts.finishing()
    lines = report.finding_lines(results)
    output = formats.render(output_format, results, catalog.refs(), unused=show_unused)
    if output:
        sys.stdout.write(output)
        sys.stdout.flush()
    console = report.stderr_console()
    report.print_problems(results, console)
    console.print(report.summary_line(results, wrote=False, checking=True), soft_wrap=True)
    unused = show_unused and any(r.unused_suppressions for r in results)
    bad = lines or unused or any(r.status == "failed" for r in results)
    raise typer.Exit(EXIT_FINDINGS if bad else EXIT_OK)


@app.command()
def rules() -> None:
    """List the codemods: code, name, safety and summary."""
    from torchfix_device.catalog import all_codemods

    Console().print(report.rules_table(all_codemods()))


@app.command()
def explain(code: str = typer.Argument(..., help="A codemod code (TFD005) or name.")) -> None:
    """Show one codemod's documentation."""
    from torchfix_device.catalog import lookup

    try:
        codemod = lookup(code)
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
    interrupts.install()  # Ctrl-C, SIGTERM and SIGHUP: see torchfix_device.interrupts
    app(prog_name="torchfix-device")
