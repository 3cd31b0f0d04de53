"""A finding: one place a codemod matched. Free of libcst, so that code that only reports
(cached results, output formats) does not pay for importing it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    """One place a codemod matched: fixed (or fixable) or left for manual review."""

    line: int
    column: int
    code: str
    message: str
    fixed: bool
    """True when the codemod rewrote this place (or, in ``check``, would rewrite it)."""
    held_back: bool = False
    """True when a fix exists but is unsafe and ``--unsafe-fixes`` was not given."""
    cell: int | None = None
    """In a notebook: the cell (counted from 1) that ``line`` is relative to."""
    declined: bool = False
    """A fix the user declined in ``apply --interactive``: not applied, and not left for review."""
    unsafe: bool = False
    """The fix is in the unsafe tier (applied only with ``--unsafe-fixes``): held back, or fixed
    because the flag was given."""

    def __post_init__(self) -> None:
        # One finding, one line of output: code quoted from a call that spans lines (a message
        # quoting ``.cuda(\n    0)``) is shown on one line, each line break with its
        # indentation read as one space.
        if "\n" in self.message or "\r" in self.message:
            lines = self.message.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            one = lines[0].rstrip()
            for part in (p.strip() for p in lines[1:]):
                if part:
                    tight = one.endswith(("(", "[", "{")) or part.startswith((")", "]", "}"))
                    one += part if tight else " " + part
            object.__setattr__(self, "message", one)

    @property
    def where(self) -> str:
        """``line:col``, or ``cell N:line:col`` in a notebook."""
        return f"{self.line}:{self.column}" if self.cell is None else f"cell {self.cell}:{self.line}:{self.column}"

    @property
    def kind(self) -> str:
        if self.fixed:
            return "fix"
        if self.held_back:
            return "unsafe-fix"
        if self.declined:
            return "declined"
        return "manual"
