"""The end of a file that libcst cannot render back and a rewrite never needs.

libcst counts only ``\\n`` as a file's final line break, so a final bare ``\\r`` (classic Mac
line endings) would be lost with the last line's rewrite; and trailing lines that hold only
whitespace with a form feed among them (``\\x0c\\n\\x0c  \\n``, page breaks left at the end of a
file) come out of its round trip as a different number of lines, so a file ending so could not
be rewritten at all. The engine transforms the file without that tail and puts it back.
"""

from __future__ import annotations

BLANK = " \t\x0c\r\n"


def split_tail(text: str) -> tuple[str, str]:
    """``(body, tail)`` with ``body + tail == text``: ``tail`` is a final run of bare ``\\r``, or
    the trailing whitespace-only lines when a form feed is among them (``body`` then ends with
    the line break of its last line that holds anything else); else ``tail`` is empty."""
    body = text.rstrip("\r")
    if body != text:
        return body, text[len(body):]
    content = text.rstrip(BLANK)
    start = text.find("\n", len(content)) + 1 if content else 0
    if content and start == 0:  # the whitespace is on the last line of code itself
        return text, ""
    tail = text[start:]
    return (text[:start], tail) if "\x0c" in tail else (text, "")
