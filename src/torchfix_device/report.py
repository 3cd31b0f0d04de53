"""Everything the user reads: diffs, findings, summaries, the rules table and rule docs."""

from __future__ import annotations

import difflib
import sys
from collections import Counter
from typing import IO, TYPE_CHECKING, Sequence

from rich.console import Console
from rich.markup import escape

from torchfix_device.results import FileResult

if TYPE_CHECKING:
    from rich.table import Table

    from torchfix_device.codemod import Codemod

NO_NEWLINE = "\\ No newline at end of file\n"
_GIT_ESCAPES = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", '"': '"', "\\": "\\"}


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def _diff_lines(text: str) -> list[str]:
    """Lines as ``git`` and ``patch`` see them: ended by ``\\n`` only (``str.splitlines`` also
    breaks at form feeds, ``\\x85`` and ``\\u2028``, which would corrupt the patch)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    return out + [lines[-1]] if lines[-1] else out


def _git_path(name: str) -> str:
    """``name`` as git writes it in a patch header: C-quoted when it holds a tab, newline,
    quote, backslash or other control character (``git apply`` stops an unquoted name at a tab);
    followed by a tab when it holds a space (GNU ``patch`` stops an unquoted name at a space)."""
    if not any(ch in _GIT_ESCAPES or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return name + "\t" if " " in name else name
    quoted = "".join(
        "\\" + _GIT_ESCAPES[ch] if ch in _GIT_ESCAPES else f"\\{ord(ch):03o}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch
        for ch in name
    )
    return f'"{quoted}"'


def unified_diff(result: FileResult) -> bytes:
    """A ``git apply``-able unified diff of one changed file, in the file's own encoding."""
    assert result.source is not None and result.new_text is not None
    if result.path.suffix == ".ipynb":
        from torchfix_device.notebook import cell_diffs

        return cell_diffs(result)
    prefix = "\ufeff" if result.source.bom else ""
    old = _diff_lines(prefix + result.source.text)
    new = _diff_lines(prefix + result.new_text)
    out: list[str] = []
    names = _git_path(f"a/{result.display}"), _git_path(f"b/{result.display}")
    for index, line in enumerate(difflib.unified_diff(old, new, *names)):
        if index >= 2 and not line.startswith("@@") and not line.endswith("\n"):
            line += "\n" + NO_NEWLINE
        out.append(line)
    headers = "".join(out[:2]).encode("utf-8", "surrogateescape")
    body = "".join(out[2:]).encode(result.source.encoding, "replace")
    return headers + body


def write_diffs(results: Sequence[FileResult], stream: IO[str] | None = None) -> None:
    """Diffs of the changed files on stdout: plain bytes to a pipe, coloured on a terminal."""
    stream = stream or sys.stdout
    changed = [r for r in results if r.status == "changed"]
    if stream.isatty():
        from rich.syntax import Syntax  # pygments: only for a terminal

        console = Console(file=stream)
        for result in changed:
            text = unified_diff(result).decode(result.source.encoding if result.source else "utf-8", "replace")
            console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
        return
    stream.flush()
    buffer = getattr(stream, "buffer", None)
    for result in changed:
        data = unified_diff(result)
        if buffer is not None:
            buffer.write(data)
        else:
            stream.write(data.decode("utf-8", "replace"))
    if buffer is not None:
        buffer.flush()


def finding_lines(results: Sequence[FileResult]) -> list[str]:
    """``path:line:col CODE message`` per finding, ordered by file and position."""
    lines = []
    for result in results:
        for f in result.findings:
            suffix = ""
            if f.held_back:
                suffix = " [unsafe fix: rerun with --unsafe-fixes]"
            elif not f.fixed:
                suffix = " [manual review]"
            lines.append(f"{result.display}:{f.where} {f.code} {f.message}{suffix}")
    return lines


def print_problems(results: Sequence[FileResult], console: Console) -> None:
    """One line per file that failed or was skipped, naming it (and the line, where known)."""
    for result in results:
        if result.status in ("failed", "skipped") and result.error and result.skip_kind not in QUIET_SKIP_KINDS:
            style = "red" if result.status == "failed" else "yellow"
            where = result.display
            message = result.error
            if message.startswith("line "):
                location, _, message = message[5:].partition(": ")
                where = f"{where}:{location}"
            console.print(f"[{style}]{result.status}[/]: {escape(where)}: {escape(message)}", soft_wrap=True)


QUIET_SKIP_KINDS = frozenset({".gitignore", "@generated", "skip-file", "interrupted"})
"""Skips the user asked for (or that are routine): counted in the summary, not listed one by one."""


def _skip_reasons(results: Sequence[FileResult]) -> str:
    """`` (2 @generated, 1 skip-file)``: why files were skipped, where a kind is known."""
    kinds = Counter(r.skip_kind or "other" for r in results if r.status == "skipped")
    if set(kinds) <= {"other"}:
        return ""
    return " (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")"


def print_manual_review(results: Sequence[FileResult], console: Console) -> None:
    """For ``apply``: the places left for a person, and the checkpoint notes."""
    for result in results:
        for f in result.findings:
            if not f.fixed:
                tag = "unsafe fix held back" if f.held_back else "manual review"
                console.print(escape(f"{tag}: {result.display}:{f.where} {f.code} {f.message}"), soft_wrap=True)
        for note in result.notes:
            console.print(f"[yellow]checkpoint[/]: {escape(result.display)}: {escape(note)}", soft_wrap=True)


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
    manual = Counter(f.code for r in results for f in r.findings if not f.fixed)
    verb = "would change" if checking or not wrote else "changed"
    parts = [f"{scanned} file{'s' if scanned != 1 else ''} scanned", f"{changed} {verb}", f"{failed} failed"]
    if skipped:
        parts.append(f"{skipped} skipped{_skip_reasons(results)}")
    line = ", ".join(parts)
    if fixes:
        line += "; fixes: " + ", ".join(f"{c} ×{n}" for c, n in sorted(fixes.items()))
    if manual:
        line += "; left for review: " + ", ".join(f"{c} ×{n}" for c, n in sorted(manual.items()))
    suppressed = sum(len(r.suppressed) for r in results)
    if suppressed:
        line += f"; suppressed by noqa: {suppressed}"
    return line


def rules_table(codemods: Sequence[type[Codemod]]) -> "Table":
    from rich.table import Table

    table = Table(title="torchfix-device codemods")
    # codes and names are what --select takes: never wrapped or cut, however narrow the output
    table.add_column("code", style="bold", no_wrap=True, min_width=6)
    table.add_column("name", no_wrap=True, min_width=max((len(c.name) for c in codemods), default=4))
    table.add_column("safe?", no_wrap=True)
    table.add_column("summary")
    for c in codemods:
        table.add_row(c.code, c.name, "safe" if c.safe else "unsafe", c.summary)
    return table


def explain_markdown(codemod: type[Codemod]) -> str:
    from torchfix_device.codemod import DOC_SECTIONS

    sections = codemod.documentation()
    parts = [f"# {codemod.code} {codemod.name}", "", codemod.summary, "", f"Fix: {'safe' if codemod.safe else 'unsafe'}", ""]
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
