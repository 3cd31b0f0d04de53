"""Every option of ``check`` and ``apply``, declared once.

The typer app (:mod:`torchfix_device.cli.app`) builds both commands from this table, and the fast
parser (:mod:`torchfix_device.cli.fast_parser`) reads the same table, so an option has one name,
one meaning and one help text. Each :class:`Flag` fills the field of
:class:`~torchfix_device.cli.arguments.Arguments` named ``field``. Plain data: importing this module
imports neither typer nor click.
"""

from __future__ import annotations

from dataclasses import dataclass

SWITCH, VALUE, LIST, PATH, INT, CHOICE = "switch", "value", "list", "path", "int", "choice"
"""Kinds of option: a switch (``--quiet``, or ``--unsafe-fixes/--no-unsafe-fixes`` with a
``negative``), one string, a repeatable string, a path, a positive int, one of ``choices``."""

CHECK, APPLY = "check", "apply"
BOTH = (CHECK, APPLY)


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    """The option's spellings, long first (``("--output-file", "-o")``)."""
    field: str
    kind: str
    help: str
    commands: tuple[str, ...] = BOTH
    negative: str | None = None
    """A switch's ``--no-...`` spelling: then its value is None unless one of the two is given."""
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    fast: bool = True
    """Whether the fast parser reads it (an interactive run is left to the typer app)."""

    @property
    def default(self) -> object:
        if self.kind == SWITCH:
            return None if self.negative else False
        if self.kind == LIST:
            return None
        if self.kind == CHOICE:
            return self.choices[0]
        return None


OUTPUT_FORMATS = ("text", "concise", "full", "grouped", "json", "json-lines", "github", "sarif")
"""``check --output-format``, ruff's names (``text``, the default, is ``concise``)."""

FLAGS: tuple[Flag, ...] = (
    Flag(("--fix",), "fix", SWITCH, "Apply the fixes (as `apply`), then report what remains.", (CHECK,), negative="--no-fix"),
    Flag(("--diff",), "diff", SWITCH, "Dry run: print a patch on stdout (git apply takes it), write nothing; exit 1 if it is not empty."),
    Flag(("--select",), "select", LIST, "Only these codemods: codes, names, code prefixes (TFD00) or ALL; comma-separated or repeated.", metavar="CODES"),
    Flag(("--extend-select",), "extend_select", LIST, "Add these codemods to the selection (as --select).", metavar="CODES"),
    Flag(("--ignore",), "ignore", LIST, "Skip these codemods (as --select).", metavar="CODES"),
    Flag(("--unsafe-fixes",), "unsafe_fixes", SWITCH, "Also apply fixes marked unsafe.", negative="--no-unsafe-fixes"),
    Flag(("--output-format",), "output_format", CHOICE, "Findings as ruff writes them: concise (the default, also text), full (with the source), grouped (by file), json or json-lines (ruff's JSON), github (workflow annotations) or sarif (2.1.0).", (CHECK,), metavar="FORMAT", choices=OUTPUT_FORMATS),
    Flag(("--report",), "report_file", PATH, "Write a migration report: Markdown, or JSON when FILE ends in .json.", (APPLY,), metavar="FILE"),
    Flag(("--output-dir",), "output_dir", PATH, "Write rewritten copies of the files under DIR; leave the input untouched.", (APPLY,), metavar="DIR"),
    Flag(("--output-file", "-o"), "output_file", PATH, "Write what would go to stdout (findings, statistics, the patch) to FILE.", metavar="FILE"),
    Flag(("--show-unused-suppressions",), "show_unused", SWITCH, "Also list `# noqa: TFD...` and skip-file comments that suppress nothing (exit 1 if any).", (CHECK,)),
    Flag(("--show-fixes",), "show_fixes", SWITCH, "List the fixes made (or, in a dry run, to be made) per file and code."),
    Flag(("--statistics",), "statistics", SWITCH, "Count the findings per code instead of listing them.", (CHECK,)),
    Flag(("--add-noqa",), "add_noqa", SWITCH, "Add `# noqa: TFD...` comments that suppress every finding.", (CHECK,)),
    Flag(("--exit-zero",), "exit_zero", SWITCH, "Exit 0 even when there are findings or pending changes (errors still exit 2)."),
    Flag(("--exit-non-zero-on-fix",), "exit_non_zero_on_fix", SWITCH, "Exit 1 when files were fixed, even if nothing remains."),
    Flag(("--quiet", "-q"), "quiet", SWITCH, "Print findings and errors only: no summary."),
    Flag(("--verbose", "-v"), "verbose", SWITCH, "Also print the configuration, cache and each file's status."),
    Flag(("--device-expression",), "device_expression", VALUE, 'Value of an inserted device binding (default: torch.device("cuda" if torch.cuda.is_available() else "cpu")).', metavar="EXPR"),
    Flag(("--exclude",), "exclude", LIST, "Leave out these files and folders (replaces `exclude` of the configuration).", metavar="PATTERN"),
    Flag(("--extend-exclude",), "extend_exclude", LIST, "Leave out these too (added to `exclude`).", metavar="PATTERN"),
    Flag(("--force-exclude",), "force_exclude", SWITCH, "Apply the exclusions to files named on the command line too (for pre-commit).", negative="--no-force-exclude"),
    Flag(("--include-generated",), "include_generated", SWITCH, "Also process files marked @generated in a comment."),
    Flag(("--respect-gitignore",), "respect_gitignore", SWITCH, "Inside a git work tree, leave out files .gitignore ignores (default).", negative="--no-respect-gitignore"),
    Flag(("--stdin-filename",), "stdin_filename", VALUE, "Read the file from stdin (as PATH -) and name it NAME in messages and for the configuration.", metavar="NAME"),
    Flag(("--max-file-size",), "max_file_size", VALUE, "Skip files larger than this (default 1MB; e.g. 5MB, 2000000).", metavar="SIZE"),
    Flag(("--config",), "config", LIST, "Read the settings from FILE instead of the nearest pyproject.toml, or override one setting (`unsafe-fixes = true`).", metavar="FILE|KEY=VALUE"),
    Flag(("--isolated",), "isolated", SWITCH, "Read no configuration file."),
    Flag(("--allow-dirty",), "allow_dirty", SWITCH, "In a git work tree, also rewrite files with uncommitted changes."),
    Flag(("--interactive", "-i"), "interactive", SWITCH, "Review each rewrite (with what it needs) and choose which to apply.", (APPLY,), fast=False),
    Flag(("--jobs", "-j"), "jobs", INT, "Processes to use (default: the number of cores).", metavar="N"),
    Flag(("--no-cache",), "no_cache", SWITCH, "Neither read nor write the result cache."),
    Flag(("--cache-dir",), "cache_dir", PATH, "Keep the result cache in DIR (default: next to the nearest pyproject.toml).", metavar="DIR"),
    Flag(("--shard",), "shard", VALUE, "Only this deterministic share of the files (1/4 ... 4/4), for CI matrices.", metavar="I/N"),
)

PATHS_HELP = "Files or folders (folders are searched for *.py and *.ipynb); - reads stdin."

COMMAND_HELP = {
    CHECK: "Report findings as `path:line:col: CODE [*] message` without writing; exit 1 if any.",
    APPLY: "Rewrite files in place (or show the patch with --diff). Summary on stderr.",
}


def flags_of(command: str) -> tuple[Flag, ...]:
    return tuple(flag for flag in FLAGS if command in flag.commands)
