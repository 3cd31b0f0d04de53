"""Lines for people on stderr: plain text in a pipe, a coloured label on a terminal.

A run answered from the cache must not pay for importing rich (tens of milliseconds), so the
messages of ``check`` and ``apply`` are written here: whole lines, never wrapped or cut, user
text printed verbatim (no markup language to escape). Colour follows the conventions rich
follows: ``NO_COLOR`` turns it off, ``FORCE_COLOR`` on, ``TERM=dumb`` off, else only when the
stream is a terminal. The diff, the rules table and interactive review still use rich, imported
when they are shown.
"""

from __future__ import annotations

import os
import sys
from typing import IO

STYLES = {"red": "31", "yellow": "33", "green": "32", "bold": "1", "cyan": "36", "bold red": "1;31"}


def wants_colour(stream: IO[str]) -> bool:
    env = os.environ
    if env.get("NO_COLOR") or env.get("TERM") in ("dumb", "unknown"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Printer:
    """Writes lines to one stream (stderr unless given)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.colour = wants_colour(self.stream)

    def styled(self, text: str, style: str) -> str:
        return f"\x1b[{STYLES[style]}m{text}\x1b[0m" if self.colour and style in STYLES else text

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def labelled(self, label: str, style: str, text: str) -> None:
        """``label: text`` with the label coloured (``error``, ``warning``, ``failed``, ...)."""
        self.line(f"{self.styled(label, style)}: {text}")

    def error(self, text: str) -> None:
        self.labelled("error", "red", text)

    def warning(self, text: str) -> None:
        self.labelled("warning", "yellow", text)
