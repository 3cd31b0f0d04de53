"""In-source suppressions: ``# noqa``, ``# noqa: TFD001`` and ``# torchfix-device: skip-file``.

Only comments count (found with :mod:`tokenize`), never text inside strings. A ``noqa`` comment
covers its own line and, when it ends a statement written over several lines, every line of
that statement. A suppressed finding is neither reported nor rewritten: the codemod's
``report()`` consults the suppressions of the tree it is rewriting and declines the fix.

Codes that are not ours (``# noqa: E501``) are left to the tools they belong to; a bare
``# noqa`` suppresses every torchfix-device finding on its line too (flake8's meaning).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterable, Sequence

NOQA_RE = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
SKIP_FILE_RE = re.compile(r"#\s*torchfix-device:\s*skip-file\b", re.IGNORECASE)
OUR_CODE_RE = re.compile(r"^TFD\d{3}$")


@dataclass(frozen=True)
class NoqaDirective:
    """One ``# noqa`` comment; ``codes`` is None for a bare ``# noqa`` (every code)."""

    line: int
    column: int
    codes: frozenset[str] | None
    covers: range

    def matches(self, code: str) -> bool:
        return self.codes is None or code in self.codes

    @property
    def our_codes(self) -> list[str]:
        return sorted(c for c in self.codes or () if OUR_CODE_RE.match(c))


@dataclass(frozen=True, order=True)
class UnusedSuppression:
    """A suppression that suppressed nothing in this run (for ``--show-unused-suppressions``)."""

    line: int
    column: int
    directive: str
    reason: str


@dataclass
class Suppressions:
    noqa: list[NoqaDirective] = field(default_factory=list)
    skip_file_line: int | None = None
    _by_line: dict[int, list[NoqaDirective]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for directive in self.noqa:
            for line in directive.covers:
                self._by_line.setdefault(line, []).append(directive)

    @property
    def skip_file(self) -> bool:
        return self.skip_file_line is not None

    def directive_for(self, line: int, code: str) -> NoqaDirective | None:
        """The ``noqa`` comment that suppresses ``code`` at ``line``, if any."""
        for directive in self._by_line.get(line, ()):
            if directive.matches(code):
                return directive
        return None

    def suppresses(self, line: int, code: str) -> bool:
        return self.directive_for(line, code) is not None

    def may_suppress(self, code: str) -> bool:
        """Some ``noqa`` comment suppresses ``code`` on its lines (a bare one, or one naming
        it): only then does a finding's line decide anything. ``# noqa: F401`` never does."""
        return any(directive.matches(code) for directive in self.noqa)


NO_SUPPRESSIONS = Suppressions()


def may_hold_directives(text: str) -> bool:
    """Cheap test before tokenizing: both directives contain one of these words."""
    lowered = text.lower()
    return "noqa" in lowered or "skip-file" in lowered


def may_hold_our_noqa(text: str) -> bool:
    """Cheap test before tokenizing, for a run that only needs the ``noqa`` comments that can
    suppress one of our findings: some line holds a bare ``# noqa`` or one naming a ``TFD``
    code. A necessary condition: a comment is the end of its line, so the pattern finds each
    ``noqa`` comment's directive on the line's text with the same codes (it never crosses a
    line), besides any that only look like one inside a string."""
    if "noqa" not in text.lower():
        return False
    for line in text.splitlines():
        if "noqa" in line.lower():
            for match in NOQA_RE.finditer(line):
                codes = match.group("codes")
                if codes is None or "TFD" in codes.upper():
                    return True
    return False


def parse_suppressions(text: str) -> Suppressions:
    """The directives in the comments of ``text``; none when it cannot be tokenized (the
    parser reports such a file with its own message)."""
    if not may_hold_directives(text):
        return NO_SUPPRESSIONS
    comments: list[tokenize.TokenInfo] = []
    statement_ends: dict[int, int] = {}  # last line of a statement -> its first line
    start: int | None = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                comments.append(token)
            elif token.type == tokenize.NEWLINE:
                if start is not None:
                    statement_ends[token.start[0]] = start
                start = None
            elif token.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER) and start is None:
                start = token.start[0]
    except (tokenize.TokenError, SyntaxError):
        return NO_SUPPRESSIONS
    noqa: list[NoqaDirective] = []
    skip_line: int | None = None
    for comment in comments:
        line, column = comment.start
        if skip_line is None and SKIP_FILE_RE.search(comment.string):
            skip_line = line
        match = NOQA_RE.search(comment.string)
        if match:
            codes = match.group("codes")
            parsed = frozenset(c.upper() for c in re.split(r"[\s,]+", codes) if c) if codes else None
            first = statement_ends.get(line, line)
            noqa.append(NoqaDirective(line, column + 1, parsed, range(first, line + 1)))
    return Suppressions(noqa, skip_line)


def unused_suppressions(
    suppressions: Suppressions,
    suppressed: Iterable[tuple[int, str]],
    selected_codes: Sequence[str],
    known_codes: Sequence[str],
) -> list[UnusedSuppression]:
    """The ``noqa: TFD...`` codes that suppressed no finding (``suppressed`` holds the
    (line, code) of every finding a directive suppressed). Codes of codemods that did not run
    (``--select``) cannot be judged and are left out; bare ``# noqa`` and other tools' codes are
    never listed, since other linters read them too."""
    used: set[tuple[int, str]] = set()
    for line, code in suppressed:
        directive = suppressions.directive_for(line, code)
        if directive is not None:
            used.add((directive.line, code if directive.codes is not None else "*"))
    unused = []
    for directive in suppressions.noqa:
        for code in directive.our_codes:
            if code not in known_codes:
                unused.append(UnusedSuppression(directive.line, directive.column, f"noqa: {code}", f"unknown code {code}"))
            elif code in selected_codes and (directive.line, code) not in used:
                unused.append(
                    UnusedSuppression(directive.line, directive.column, f"noqa: {code}", f"no {code} finding on this line")
                )
    return sorted(unused)
