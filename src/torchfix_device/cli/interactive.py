"""``apply --interactive``: review rewrite by rewrite, not hunk by hunk.

A rewrite is one fixed finding together with what it needs (the inserted ``device = ...``
binding, an added import): it is shown as the diff the file gets with only that fix enabled.
The fixes the user accepts are then applied together in one transform — so accepting a fix never
leaves a neighbour half-applied — and the result is compiled and written at once, atomically.

Fixes are picked through :data:`torchfix_device.codemods.base.FIX_FILTER`, which codemods consult in
``report``. A codemod running after another one sees a tree whose lines have moved, so its
positions are mapped back to the original file through a line diff (:class:`_Chosen`).
"""

from __future__ import annotations

import difflib
import os
import select
import signal
import sys
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence, TextIO

import libcst as cst
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from torchfix_device.report.patch import unified_diff
from torchfix_device.codemods.catalog import CodemodRef
from torchfix_device.codemods.base import FIX_FILTER, Codemod, Finding
from torchfix_device.options import RunOptions
from torchfix_device.engine import transform_source
from torchfix_device.run.job import write_result
from torchfix_device.results import FileResult, InternalError, TransformOutput

if TYPE_CHECKING:
    from torchfix_device.run.git_safety import GitState
    from torchfix_device.cli.settings import Settings
    from torchfix_device.report.termout import Printer

KEYS_HELP = """\
y - apply this rewrite
n - skip this rewrite
a - apply this rewrite and all remaining ones in this file
d - skip this rewrite and all remaining ones in this file
q - quit: write what was accepted so far, leave the remaining files unchanged
? - show this help"""
PROMPT = "Apply this rewrite [y,n,a,d,q,?]? "

Key = tuple[str, int, int]


def _key(finding: Finding) -> Key:
    return (finding.code, finding.line, finding.column)


def _lines(text: str) -> list[str]:
    return text.split("\n")


class _Chosen:
    """The fix filter: is the fix a codemod is about to make one of the accepted ones?

    Positions in a tree other than the original are mapped back to the original file's lines
    through a line diff. A changed line is matched to the findings of the same codemod in the
    original lines it replaced; a site no original finding accounts for (a follow-on of another
    fix) is allowed when an accepted fix lies in those lines. A fix made on tokens before
    parsing (``.cuda(async=True)``) is made whenever any fix of the file is accepted: no other
    fix can be made in a file that does not parse.
    """

    def __init__(self, original: str, fixes: Sequence[Finding], accepted: set[Key]) -> None:
        self.original_lines = _lines(original)
        self.fixes = [_key(f) for f in fixes]
        self.accepted = accepted
        self._maps: dict[int, tuple[cst.Module, list[tuple[int, int, int | None]]]] = {}

    def __call__(self, code: str, line: int, column: int, module: cst.Module | None) -> bool:
        if module is None:  # a fix on tokens before parsing: every other fix needs the file parsed
            return bool(self.accepted)
        low, high, exact = self._original_lines(line, module)
        if exact is not None and (code, exact, column) in self.fixes:
            return (code, exact, column) in self.accepted
        same = [k for k in self.fixes if k[0] == code and low <= k[1] <= high]
        if same:
            verdicts = {k in self.accepted for k in same}
            if len(verdicts) == 1:
                return verdicts.pop()
            nearest = min(same, key=lambda k: (abs(k[1] - (exact or k[1])), abs(k[2] - column)))
            return nearest in self.accepted
        return any(low <= k[1] <= high for k in self.accepted)

    def _original_lines(self, line: int, module: cst.Module) -> tuple[int, int, int | None]:
        """Original lines (first, last, and the exact one where known) that ``line`` of
        ``module`` stands for."""
        cached = self._maps.get(id(module))
        if cached is None or cached[0] is not module:
            cached = (module, self._line_map(module.code))
            self._maps[id(module)] = cached
        return cached[1][line - 1] if 0 < line <= len(cached[1]) else (1, len(self.original_lines), None)

    def _line_map(self, code: str) -> list[tuple[int, int, int | None]]:
        current = _lines(code)
        out: list[tuple[int, int, int | None]] = [(1, 1, None)] * len(current)
        matcher = difflib.SequenceMatcher(None, self.original_lines, current, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for j in range(j1, j2):
                if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                    exact = i1 + (j - j1) + 1
                    out[j] = (exact, exact, exact)
                else:
                    out[j] = (i1 + 1, max(i1 + 1, i2), None)
        return out


def rewrite_with(text: str, codemods: Sequence["CodemodRef | type[Codemod]"], fixes: Sequence[Finding], accepted: set[Key],
                 *, filename: str, options: RunOptions | None = None) -> str:
    """``text`` with only the ``accepted`` fixes applied (compiled by the runner)."""
    return transform_with(text, codemods, fixes, accepted, filename=filename, options=options).text


def transform_with(text: str, codemods: Sequence["CodemodRef | type[Codemod]"], fixes: Sequence[Finding], accepted: set[Key],
                   *, filename: str, options: RunOptions | None = None) -> TransformOutput:
    """The transform of ``text`` with only the ``accepted`` fixes applied: its text, and the
    checkpoint notes of those fixes alone."""
    token = FIX_FILTER.set(_Chosen(text, fixes, accepted))
    try:
        return transform_source(text, codemods, filename=filename, options=options)
    finally:
        FIX_FILTER.reset(token)


@dataclass
class Review:
    """What :func:`review_file` decided."""

    accepted: set[Key]
    quit: bool = False
    interrupted: bool = False
    """Ctrl-C at the prompt: quit, and the run exits 130 once the accepted rewrites are written."""


def _show(result: FileResult, finding: Finding, number: int, total: int, new_text: str, console: Console) -> None:
    assert result.source is not None
    console.rule(f"[bold]{escape(result.display)}[/] rewrite {number} of {total}")
    console.print(f"[bold]{finding.code}[/] {escape(result.display)}:{finding.where}: {escape(finding.message)}", soft_wrap=True)
    if new_text == result.source.text:
        console.print("[yellow](no change on its own: it takes effect together with another rewrite)[/]")
        return
    diff = unified_diff(replace(result, new_text=new_text))
    text = diff.decode(result.source.encoding, "replace")
    if console.is_terminal:
        console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
    else:
        console.print(text, markup=False, highlight=False, end="")


def review_file(result: FileResult, codemods: Sequence["CodemodRef | type[Codemod]"], *, console: Console,
                ask: Callable[[str], str], options: RunOptions | None = None) -> Review:
    """Ask about each fixed finding of one changed file."""
    assert result.source is not None
    fixes = [f for f in result.findings if f.fixed]
    decision = Review(set())
    for number, finding in enumerate(fixes, start=1):
        alone = rewrite_with(result.source.text, codemods, fixes, {_key(finding)},
                             filename=str(result.path), options=options)
        _show(result, finding, number, len(fixes), alone, console)
        while True:
            try:
                answer = ask(PROMPT).strip().lower()[:1]
            except EOFError:  # end of input: quit, keeping what was accepted
                console.print()
                answer = "q"
            except KeyboardInterrupt:  # Ctrl-C: the same, then exit 130
                console.print()
                answer, decision.interrupted = "q", True
            if answer in ("y", "n", "a", "d", "q"):
                break
            console.print(KEYS_HELP)
        if answer == "y":
            decision.accepted.add(_key(finding))
        elif answer == "a":
            decision.accepted.update(_key(f) for f in fixes[number - 1:])
            break
        elif answer == "d":
            break
        elif answer == "q":
            decision.quit = True
            break
    return decision


def apply_decision(result: FileResult, codemods: Sequence["CodemodRef | type[Codemod]"], decision: Review, *,
                   options: RunOptions | None = None) -> None:
    """Rewrite the file with the accepted fixes (or leave it), and update ``result`` to match."""
    assert result.source is not None and result.new_text is not None
    fixes = [f for f in result.findings if f.fixed]
    result.findings = [f if not f.fixed or _key(f) in decision.accepted else _declined(f) for f in result.findings]
    if not decision.accepted:
        result.status, result.new_text, result.notes = "unchanged", None, []
        return
    if len(decision.accepted) < len(fixes):
        try:
            output = transform_with(result.source.text, codemods, fixes, decision.accepted,
                                    filename=str(result.path), options=options)
        except InternalError as exc:
            result.status, result.error = "failed", f"internal error: {exc}"
            return
        result.new_text, result.notes = output.text, list(output.notes)  # a declined rewrite has no consequences
    if result.new_text == result.source.text:
        result.status, result.new_text = "unchanged", None
        return
    write_result(result)


def _declined(finding: Finding) -> Finding:
    return replace(finding, fixed=False, declined=True)


def review(results: list[FileResult], codemods: Sequence["CodemodRef | type[Codemod]"], *, console: Console,
           ask: Callable[[str], str], refuse: Callable[[FileResult], bool], options: RunOptions | None = None) -> bool:
    """Review every changed file of a dry run in turn; write the accepted rewrites. True when
    the review was interrupted (Ctrl-C at a prompt)."""
    quitting = interrupted = False
    for result in results:
        if result.status != "changed":
            continue
        if quitting:
            result.status, result.new_text, result.notes = "unchanged", None, []
            result.findings = [_declined(f) if f.fixed else f for f in result.findings]
            continue
        if refuse(result):
            continue
        if result.path.suffix == ".ipynb":
            result.status, result.new_text = "skipped", None
            result.error = "notebooks are not reviewed interactively; use --diff, then apply"
            continue
        decision = review_file(result, codemods, console=console, ask=ask, options=options)
        apply_decision(result, codemods, decision, options=options)
        quitting, interrupted = decision.quit, decision.interrupted
    return interrupted


def review_run(results: list[FileResult], settings: "Settings", guard: "GitState | None", out: "Printer") -> bool:
    """``apply --interactive``: review the dry run's results on the terminal, then write. True
    when Ctrl-C ended the review."""
    from torchfix_device.run import git_safety as gitsafety

    asker = Console()
    return review(
        results, settings.codemods, console=asker, ask=lambda text: ask_line(asker, text),
        refuse=lambda result: gitsafety.refuse_if_dirty(result, guard), options=settings.options,
    )


def ask_line(console: Console, prompt: str, stdin: TextIO | None = None) -> str:
    """Show ``prompt`` and read one line of the terminal (without its newline); ``EOFError`` at
    the end of input, ``KeyboardInterrupt`` on Ctrl-C.

    ``input()`` loses a Ctrl-C that arrives after it has released the interpreter and before its
    read has started (the signal's handler runs only once the read returns): the run then waits
    for Enter after the user pressed Ctrl-C at the prompt. Here the signal also writes a byte to a
    pipe (``signal.set_wakeup_fd``) that is watched together with the terminal, so it ends the
    wait whenever it comes. Where that cannot be done (not the main thread, no ``select`` on the
    terminal, as on Windows), ``Console.input``."""
    stream = stdin if stdin is not None else sys.stdin
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None or os.name == "nt" or threading.current_thread() is not threading.main_thread():
        return console.input(prompt, markup=False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    try:
        console.print(prompt, markup=False, highlight=False, end="")
        while True:
            ready = select.select([fd, wake_r], [], [])[0]
            if wake_r in ready:  # a signal came: its handler runs now (Ctrl-C raises here)
                os.read(wake_r, 512)
            if fd in ready:
                line = stream.readline()
                if not line:
                    raise EOFError
                return line.rstrip("\r\n")
    finally:
        signal.set_wakeup_fd(previous)
        os.close(wake_r)
        os.close(wake_w)
