"""Everything the user reads: diffs, findings, summaries, the rules table and rule docs."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

from torchfix_device.results import FileResult
from torchfix_device.report.termout import Printer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from torchfix_device.codemods.base import Codemod


def _printer(console: Any) -> Printer:
    """``console`` itself, or a printer onto a rich console's stream."""
    return console if isinstance(console, Printer) else Printer(console.file)


def print_problems(results: Sequence[FileResult], console: Printer | Console) -> None:
    """One line per file that failed or was skipped, naming it (and the line, where known)."""
    console = _printer(console)
    for result in results:
        if result.status in ("failed", "skipped", "refused") and result.error and result.skip_kind not in QUIET_SKIP_KINDS:
            style = "red" if result.status == "failed" else "yellow"
            where = result.display
            message = result.error
            if message.startswith("line "):
                location, _, message = message[5:].partition(": ")
                where = f"{where}:{location}"
            console.labelled(result.status, style, f"{where}: {message}")
        for problem in result.problems:  # ``cell 3: line 2:5: ...``: the rest of the file was processed
            cell, _, rest = problem.partition(": ")
            location, _, message = rest[5:].partition(": ") if rest.startswith("line ") else ("", "", rest)
            where = f"{result.display}:{cell}" + (f":{location}" if location else "")
            console.labelled("not read", "red", f"{where}: {message}")


QUIET_SKIP_KINDS = frozenset({".gitignore", "@generated", "skip-file", "excluded", "interrupted"})
"""Skips the user asked for (or that are routine): counted in the summary, not listed one by one."""


def _skip_reasons(results: Sequence[FileResult]) -> str:
    """`` (2 @generated, 1 skip-file)``: why files were skipped, where a kind is known."""
    kinds = Counter(r.skip_kind or "other" for r in results if r.status == "skipped")
    if set(kinds) <= {"other"}:
        return ""
    return " (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")"


def print_manual_review(results: Sequence[FileResult], console: Printer | Console) -> None:
    """For ``apply``: the places left for a person, and the checkpoint notes."""
    console = _printer(console)
    for result in results:
        for f in result.findings:
            if not f.fixed and not f.declined:  # a rewrite declined in review is the user's choice, not a task
                tag = "unsafe fix held back" if f.held_back else "manual review"
                console.line(f"{tag}: {result.display}:{f.where} {f.code} {f.message}")
        for note in result.notes:
            console.labelled("checkpoint", "yellow", f"{result.display}: {note}")


def _python_file(result: FileResult) -> bool:
    return result.path.suffix in (".py", ".pyi", ".ipynb") and result.path.is_file()


def summary_line(results: Sequence[FileResult], *, wrote: bool, checking: bool = False) -> str:
    # every Python file read or tried (one that cannot be decoded counts too), not skipped ones
    scanned = sum(
        1 for r in results
        if (r.status != "skipped" or r.skip_kind == "interrupted") and (r.source is not None or _python_file(r))
    )
    changed = sum(1 for r in results if r.status == "changed")
    failed = sum(1 for r in results if r.status == "failed")
    skipped = sum(1 for r in results if r.status == "skipped")
    fixes = Counter(f.code for r in results if r.status == "changed" for f in r.findings if f.fixed)  # not a failed write
    manual = Counter(f.code for r in results for f in r.findings if not f.fixed and not f.declined)
    declined = sum(1 for r in results for f in r.findings if f.declined)
    verb = "would change" if checking or not wrote else "changed"
    parts = [f"{scanned} file{'s' if scanned != 1 else ''} scanned", f"{changed} {verb}", f"{failed} failed"]
    refused = Counter(r.skip_kind or "other" for r in results if r.status == "refused")
    if refused:
        parts.append(f"{sum(refused.values())} refused (" + ", ".join(sorted(refused)) + ")")
    unread = sum(len(r.problems) for r in results)
    if unread:
        parts.append(f"{unread} notebook cell{'s' if unread != 1 else ''} not read")
    if skipped:
        parts.append(f"{skipped} skipped{_skip_reasons(results)}")
    line = ", ".join(parts)
    if fixes:
        line += "; fixes: " + ", ".join(f"{c} ×{n}" for c, n in sorted(fixes.items()))
    if manual:
        line += "; left for review: " + ", ".join(f"{c} ×{n}" for c, n in sorted(manual.items()))
    if declined:
        line += f"; declined in review: {declined}"
    suppressed = sum(len(r.suppressed) for r in results)
    if suppressed:
        line += f"; suppressed by noqa: {suppressed}"
    return line


def fix_hint(results: Sequence[FileResult], *, unsafe_flag: bool | None, fixed: bool = False) -> str | None:
    """How to apply what ``check`` found: ``20 fixable with `torchfix-device apply`; 1 more with
    `--unsafe-fixes``` (None when nothing is fixable). ``unsafe_flag``: ``--unsafe-fixes`` as
    given on the command line (None: not given; the configuration's choice applies to ``apply``
    too). ``fixed`` (``check --fix``): the fixes are made, only the held-back ones are left."""
    usable = [r for r in results if r.status not in ("failed", "skipped")]
    fixable = 0 if fixed else sum(1 for r in usable for f in r.findings if f.fixed)
    held = sum(1 for r in usable for f in r.findings if f.held_back)
    if fixed:
        return f"{held} more fixable with `--unsafe-fixes`" if held else None
    apply = "torchfix-device apply" + (" --unsafe-fixes" if unsafe_flag else "")
    if fixable and held:
        return f"{fixable} fixable with `{apply}`; {held} more with `--unsafe-fixes`"
    if fixable:
        return f"{fixable} fixable with `{apply}`"
    if held:
        return f"{held} fixable with `{apply} --unsafe-fixes`"
    return None


def refusal_hint(results: Sequence[FileResult]) -> str | None:
    """What to do about refused files, in one line (None when none was refused)."""
    if not any(r.status == "refused" for r in results):
        return None
    return REFUSAL_HINT


REFUSAL_HINT = (
    "commit (or stash) the refused files and run again, so that git can give them back; "
    "or pass --allow-dirty to rewrite them anyway"
)


def usage_error(message: str) -> None:
    Printer().error(message)


def rules_table(codemods: Sequence[type[Codemod]], *, one_line: bool = False) -> "Table":
    """The rules as a rich table. Codes and names (what ``--select`` takes) are never wrapped or
    cut; summaries wrap (``one_line``: never, for a pipe: one row a line)."""
    from rich.table import Table

    table = Table(title="torchfix-device codemods")
    table.add_column("code", style="bold", no_wrap=True, min_width=6)
    table.add_column("name", no_wrap=True, min_width=max((len(c.name) for c in codemods), default=4))
    table.add_column("fix", no_wrap=True)
    table.add_column("summary", overflow="fold", no_wrap=one_line)
    for c in codemods:
        table.add_row(c.code, c.name, c.fix_tier(), c.summary)
    return table


def rules_records(codemods: Sequence[type[Codemod]]) -> list[dict]:
    """``rules --output-format json``: code, name, fix tier, summary and documentation."""
    return [
        {"code": c.code, "name": c.name, "fix": c.fix_tier(), "summary": c.summary, "explanation": explain_markdown(c)}
        for c in codemods
    ]


def print_rules(*, json_output: bool) -> None:
    """``rules``: a table on a terminal (wrapped to its width), one row a line in a pipe."""
    import json
    import sys

    from torchfix_device.codemods.catalog import all_codemods

    codemods = all_codemods()
    if json_output:
        sys.stdout.write(json.dumps(rules_records(codemods), indent=2, ensure_ascii=False) + "\n")
        return
    from rich.console import Console

    console = Console()
    if console.is_terminal:
        console.print(rules_table(codemods))
        return
    table = rules_table(codemods, one_line=True)
    Console(width=10_000).print(table, crop=False, soft_wrap=True)


def explain_markdown(codemod: type[Codemod]) -> str:
    from torchfix_device.codemods.base import DOC_SECTIONS

    sections = codemod.documentation()
    parts = [f"# {codemod.code} {codemod.name}", "", codemod.summary, "", f"Fix: {codemod.fix_tier()}", ""]
    for heading in DOC_SECTIONS:
        parts += [f"## {heading}", "", sections.get(heading, "(missing)"), ""]
    return "\n".join(parts)


def print_explain(codemod: type[Codemod], console: Console) -> None:
    text = explain_markdown(codemod)
    if console.is_terminal:
        from rich.markdown import Markdown

        console.print(Markdown(text))
    else:
        console.file.write(text + "\n")


def print_explanations(codemods: Sequence[type[Codemod]]) -> None:
    """``explain CODE`` / ``explain --all``: Markdown, rendered on a terminal."""
    from rich.console import Console

    console = Console()
    for index, codemod in enumerate(codemods):
        if index:
            console.file.write("\n") if not console.is_terminal else console.rule()
        print_explain(codemod, console)


def fixes_lines(results: Sequence[FileResult], *, applied: bool) -> list[str]:
    """``--show-fixes``: the fixes made (or, in a dry run, to be made), per file and code."""
    from torchfix_device.codemods.catalog import refs

    names = {ref.code: ref.name for ref in refs()}
    per_file = [
        (r.display, Counter(f.code for f in r.findings if f.fixed)) for r in results if r.status == "changed"
    ]
    total = sum(sum(counts.values()) for _, counts in per_file)
    if not total:
        return ["No fixes made." if applied else "No fixes to make."]
    lines = [f"{'Fixed' if applied else 'Would fix'} {total} finding{'s' if total != 1 else ''}:"]
    for display, counts in per_file:
        lines.append(f"- {display}:")
        lines += [f"    {n} × {code} ({names.get(code, '?')})" for code, n in sorted(counts.items())]
    return lines
