"""The lines of a rewrite that the codemods did not touch, taken from the file byte for byte."""

from __future__ import annotations

import difflib

from torchfix_device.results import InternalError


def _lines(text: str) -> list[str]:
    """Lines ended by ``\\n`` only (``\\r\\n`` stays inside a line)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def keep_untouched_lines(text: str, rendered: str, new: str) -> str:
    """``new`` with every line the codemods did not touch taken from ``text`` byte for byte.

    libcst does not render every file exactly as read: a form feed that starts a line of code
    (``\\x0cx = 1``, a page break) is dropped (cf. Instagram/LibCST#446). The rewrite must not
    carry such losses into lines it never meant to change, let alone change a file that has
    nothing to fix.
    """
    text_lines, rendered_lines, new_lines = _lines(text), _lines(rendered), _lines(new)
    if len(text_lines) != len(rendered_lines):
        raise InternalError(
            "libcst cannot reproduce this file byte for byte (its lines come out differently); "
            "file left unchanged — please report this bug"
        )
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, rendered_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out.extend(text_lines[i1:i2] if tag == "equal" else new_lines[j1:j2])
    return "".join(out)
