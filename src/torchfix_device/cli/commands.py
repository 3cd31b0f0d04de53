"""``check`` and ``apply``, from parsed :class:`~torchfix_device.cli.arguments.Arguments` to an exit
code: resolve the settings, run the files, print, decide the exit code (ruff's, see
docs/cli.md). Neither typer nor rich nor libcst is imported here: a run answered from the cache
loads none of them (the typer app and the fast path both land here).

Exit codes: 0 ok; 1 findings (``check``), pending changes (``--diff``, or rewrites git safety
refused: files with uncommitted changes; ``--exit-zero`` makes both 0), a file that could not be
processed, or fixes made with ``--exit-non-zero-on-fix``; 2 bad usage, a bad configuration or a
missing path; 130 interrupted (128 + the signal: 143 for SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Sequence

from torchfix_device.run import interrupts

from torchfix_device.report import console as report
from torchfix_device.cli.arguments import Arguments, UsageError
from torchfix_device.results import FileResult, Interrupted, WritesInterrupted
from torchfix_device.cli.settings import Settings, resolve
from torchfix_device.report.termout import Printer, wants_colour

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C


def main(args: Arguments) -> int:
    """Run ``check`` or ``apply``; the exit code. Usage errors are printed, never raised."""
    out = Printer()
    try:
        return _main(args, out, time.perf_counter())
    except UsageError as exc:
        out.error(str(exc))
        return EXIT_USAGE
    except Interrupted as stop:  # Ctrl-C, SIGTERM or SIGHUP: what was done, no traceback
        interrupts.finishing()  # a further Ctrl-C, until the exit, changes nothing (no -SIGINT death)
        with interrupts.ignoring():
            report.print_problems(stop.results, out)
            fixing = args.writes
            out.line(report.summary_line(stop.results, wrote=fixing, checking=not fixing))
            state = "every file is either unchanged or fully rewritten" if fixing else "nothing was written"
            out.line(f"{out.styled(interrupts.word(stop.signum), 'yellow')} after {stop.done} of {stop.total} files; {state}")
        return interrupts.exit_code(stop.signum)
    except WritesInterrupted as stop:  # while writing the rewrites held for the git check
        interrupts.finishing()
        with interrupts.ignoring():
            report.print_problems(stop.results, out)
            out.line(report.summary_line(stop.results, wrote=True))
            hint = report.refusal_hint(stop.results)
            if hint is not None:
                out.labelled("hint", "yellow", hint)
            out.line(
                f"{out.styled(interrupts.word(stop.signum), 'yellow')} after writing {stop.written} of {stop.total} files "
                f"to rewrite; the other {stop.total - stop.written} are unchanged; every file is either unchanged or fully rewritten"
            )
        return interrupts.exit_code(stop.signum)


def _check_combinations(args: Arguments) -> None:
    if args.add_noqa and (args.fix or args.diff):
        raise UsageError("--add-noqa cannot be combined with --fix or --diff")
    if args.output_dir is not None and args.diff:
        raise UsageError("--output-dir and --diff cannot be combined")
    if args.output_file is not None:
        if args.output_file.is_dir():
            raise UsageError(f"--output-file {args.output_file}: is a folder")
        if not args.output_file.absolute().parent.is_dir():
            raise UsageError(f"--output-file {args.output_file}: no such folder {args.output_file.parent}")
    if args.report_file is not None:
        if args.report_file.is_dir():
            raise UsageError(f"--report {args.report_file}: is a folder")
        if not args.report_file.parent.is_dir():
            raise UsageError(f"--report {args.report_file}: no such folder {args.report_file.parent}")
        from torchfix_device.report.migration import report_path_problem

        problem = report_path_problem(args.report_file)  # before any rewrite starts
        if problem:
            raise UsageError(f"--report {args.report_file}: {problem}")


def _check_destinations(args: Arguments, settings: Settings) -> None:
    if args.output_dir is not None:
        if settings.stdin:
            raise UsageError("--output-dir cannot be used with `-` (stdin): the result goes to stdout")
        from torchfix_device.files.output_tree import output_dir_problem

        problem = output_dir_problem(args.output_dir, settings.paths)
        if problem:
            raise UsageError(problem)
    if args.interactive and (args.diff or settings.stdin or args.output_dir is not None or not sys.stdin.isatty()):
        raise UsageError(
            "--interactive needs a terminal to ask on, and cannot be combined with --diff, --output-dir or `-` (stdin)"
        )


def _main(args: Arguments, out: Printer, started: float) -> int:
    if args.stdin_filename is not None:  # as ruff: --stdin-filename reads stdin, `-` or not
        others = [p for p in args.paths if str(p) != "-"]
        if others:
            out.warning(f"ignoring {', '.join(map(str, others))} in favour of standard input (--stdin-filename)")
        args.paths = [Path("-")]
    if not args.paths:
        args.paths = [Path(".")]  # ruff's default, for check and apply alike
    _check_combinations(args)
    settings = resolve(args)
    _check_destinations(args, settings)
    if settings.missing:
        out.error("no such file or folder: " + ", ".join(str(p) for p in settings.missing))
        if not settings.paths:
            return EXIT_USAGE
    if args.verbose:
        _print_settings(settings, out)
    results, interrupted = _results(args, settings, out)
    interrupts.finishing()  # every file is written: the summary and the exit status stay true
    if args.verbose:
        for result in results:
            out.line(f"{result.display}: {result.status}{' (cached result)' if result.cached else ''}")
    if args.add_noqa:
        code = _add_noqa(results, args, out)
    elif args.diff:
        code = _finish_diff(results, args, settings, out)
    elif args.command == "apply":
        code = _finish_apply(results, args, settings, out)
    else:
        code = _finish_check(results, args, settings, out)
    if args.verbose:
        out.line(f"done in {time.perf_counter() - started:.2f} s")
    if interrupted:
        written = sum(1 for r in results if r.status == "changed")
        out.line(
            f"{out.styled('interrupted', 'yellow')} at the prompt: the rewrites accepted so far are written "
            f"({written} file{'s' if written != 1 else ''}); the rest is unchanged"
        )
        return EXIT_INTERRUPTED
    return EXIT_USAGE if settings.missing else code


def _print_settings(settings: Settings, out: Printer) -> None:
    out.line(f"configuration: {settings.config.source or 'none (defaults)'}")
    out.line("codemods: " + (" ".join(c.code for c in settings.codemods) or "none"))
    out.line(f"cache: {settings.cache.folder if settings.cache is not None else 'off'}")


# -- running ------------------------------------------------------------------------------------
def _results(args: Arguments, settings: Settings, out: Printer) -> tuple[list[FileResult], bool]:
    """The files' results, rewrites written where the command writes (git safety, review), and
    whether Ctrl-C ended an interactive review."""
    if settings.stdin:
        from torchfix_device.run.stdin import process_stdin, write_output

        result, raw = process_stdin(
            settings.codemods, options=settings.options, stdin_filename=args.stdin_filename
        )
        if args.writes:
            write_output(result, raw, sys.stdout.buffer, sys.stdin.buffer)
        return [result], False
    in_place = args.writes
    guard = None
    if in_place:
        from torchfix_device.run import git_safety as gitsafety
        from torchfix_device.files import run_lock

        try:
            run_lock.hold(settings.paths)  # one in-place run at a time per tree
        except run_lock.TreeBusy as exc:
            raise UsageError(str(exc)) from None
        guard = gitsafety.inspect(settings.paths, check_dirty=not args.allow_dirty)
        if guard.outside and not args.quiet:
            out.warning(gitsafety.not_protected_message(guard.outside))
    write_now = in_place and not args.interactive and not (guard is not None and guard.dirty)
    results = _run_files(settings, write=write_now, tidy=in_place)
    if args.interactive:
        from torchfix_device.cli.interactive import review_run

        return results, review_run(results, settings, guard, out)
    if guard is not None and guard.dirty:
        from torchfix_device.run import git_safety as gitsafety

        try:
            gitsafety.write_unless_dirty(results, guard)
        except WritesInterrupted as stop:
            stop.results = results
            raise
    return results, False


def _run_files(settings: Settings, *, write: bool, tidy: bool = False) -> list[FileResult]:
    """``write``: now (not later, after git safety or review); ``tidy`` (in place): first remove
    temp files that killed runs left next to the files."""
    from torchfix_device.report.progress import file_progress
    from torchfix_device.run.runner import run

    with file_progress(roots=settings.paths) as bar:
        return run(
            settings.paths, settings.codemods, exclude=settings.exclude,
            options=dataclasses.replace(settings.options, write=write), progress=bar, jobs=settings.jobs, cache=settings.cache, shard=settings.shard,
            tidy=tidy,
        )


# -- output -------------------------------------------------------------------------------------
def _emit(text: str | bytes, args: Arguments) -> None:
    """What goes to stdout, or to ``--output-file``."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if args.output_file is not None:
        from torchfix_device.files.sources import atomic_write

        try:
            atomic_write(args.output_file, data)
        except OSError as exc:
            raise UsageError(f"--output-file {args.output_file}: cannot write: {exc.strerror or exc}") from None
        return
    if data:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _summary(results: Sequence[FileResult], args: Arguments, out: Printer, *, wrote: bool, checking: bool = False) -> None:
    if args.show_fixes:
        for line in report.fixes_lines(results, applied=wrote):
            out.line(line)
    if not args.quiet:
        out.line(report.summary_line(results, wrote=wrote, checking=checking))
    hint = report.refusal_hint(results)
    if hint is not None:  # even with --quiet: the run did not do all it was asked
        out.labelled("hint", "yellow", hint)


def _finish_diff(results: list[FileResult], args: Arguments, settings: Settings, out: Printer) -> int:
    from torchfix_device.report import patch

    if args.output_file is not None or not wants_colour(sys.stdout):  # the patch as bytes
        diffs, root = patch.file_diffs(results)
        _emit(b"".join(data for _, data in diffs), args)
    else:
        root = patch.write_diffs(results)
    note = patch.root_note(root)
    if note and not args.quiet:
        out.labelled("note", "yellow", note)
    report.print_problems(results, out)
    if args.command == "apply":
        report.print_manual_review(results, out)
    _summary(results, args, out, wrote=False)
    _write_report(results, args, settings, out, "dry run (--diff): nothing written")
    pending = any(r.status in ("changed", "failed") for r in results)  # a file left out of the patch too
    return EXIT_FINDINGS if pending and not args.exit_zero else EXIT_OK


def _finish_apply(results: list[FileResult], args: Arguments, settings: Settings, out: Printer) -> int:
    written = 0
    if args.output_dir is not None:
        from torchfix_device.files.output_tree import write_output_tree

        written = write_output_tree(results, args.output_dir)
    report.print_problems(results, out)
    report.print_manual_review(results, out)
    _summary(results, args, out, wrote=True)
    if args.output_dir is not None and not args.quiet:
        out.line(f"wrote {written} file{'s' if written != 1 else ''} under {args.output_dir}; the input is untouched")
    mode = "stdin to stdout" if settings.stdin else (
        f"rewritten copies written under {args.output_dir}; input untouched" if args.output_dir is not None else "files rewritten in place"
    )
    if not _write_report(results, args, settings, out, mode):
        return EXIT_FINDINGS
    if _failed(results):
        return EXIT_FINDINGS
    if _refused(results) and not args.exit_zero:  # pending changes, as with --diff
        return EXIT_FINDINGS
    fixed = any(r.status == "changed" for r in results)
    return EXIT_FINDINGS if fixed and args.exit_non_zero_on_fix else EXIT_OK


def _failed(results: list[FileResult]) -> bool:
    """A file that could not be processed, or a part of one left unread (a notebook cell that
    does not parse): the run exits 1."""
    return any(r.status == "failed" or r.problems for r in results)


def _refused(results: list[FileResult]) -> bool:
    """A rewrite git safety held back (uncommitted changes): not a failure, but pending changes
    (exit 1 unless --exit-zero, as a dry run with changes to make)."""
    return any(r.status == "refused" for r in results)


def _write_report(results: list[FileResult], args: Arguments, settings: Settings, out: Printer, mode: str) -> bool:
    if args.report_file is None:
        return True
    from torchfix_device.report.migration import ReportError, write_report

    try:
        write_report(args.report_file, results, settings.codemods, mode=mode)
    except ReportError as exc:
        out.error(str(exc))
        return False
    if not args.quiet:
        out.line(f"report written to {args.report_file}")
    return True


def _remaining(result: FileResult) -> FileResult:
    """After ``check --fix``: the findings still there (every one of a file not written)."""
    if result.status in ("failed", "refused"):
        return dataclasses.replace(result, findings=[dataclasses.replace(f, fixed=False) for f in result.findings])
    return dataclasses.replace(result, findings=[f for f in result.findings if not f.fixed])


def _finish_check(results: list[FileResult], args: Arguments, settings: Settings, out: Printer) -> int:
    from torchfix_device.codemods import catalog
    from torchfix_device.report import formats

    fixing = args.fix
    shown = [_remaining(r) for r in results] if fixing else results
    if args.statistics:
        text = formats.statistics(shown, args.output_format)
    else:
        stream = sys.stderr if settings.stdin and fixing else sys.stdout
        colour = args.output_file is None and wants_colour(stream)
        text = formats.render(formats.OutputFormat(args.output_format), shown, catalog.refs(), unused=args.show_unused, colour=colour)
    if settings.stdin and fixing:  # stdout holds the fixed source: the findings go to stderr
        sys.stderr.write(text)
    else:
        _emit(text, args)
    report.print_problems(results, out)
    _summary(results, args, out, wrote=fixing, checking=not fixing)
    hint = report.fix_hint(results, unsafe_flag=args.unsafe_fixes, fixed=fixing)
    if hint is not None and not args.quiet and not args.add_noqa:
        out.line(hint)
    remaining = any(r.findings for r in shown)
    unused = args.show_unused and any(r.unused_suppressions for r in results)
    failed = _failed(results)
    code = EXIT_FINDINGS if (remaining or unused or failed) and not args.exit_zero else EXIT_OK
    if fixing and args.exit_non_zero_on_fix and any(r.status == "changed" for r in results):
        code = EXIT_FINDINGS
    return code


def _add_noqa(results: list[FileResult], args: Arguments, out: Printer) -> int:
    from torchfix_device.run.add_noqa import add_noqa

    added, problems = add_noqa(results)
    report.print_problems(results, out)
    for problem in problems:
        out.labelled("failed", "red", problem)
    if not args.quiet:
        out.line(f"Added {added} noqa directive{'s' if added != 1 else ''}.")
    return EXIT_FINDINGS if problems or any(r.status == "failed" for r in results) else EXIT_OK

