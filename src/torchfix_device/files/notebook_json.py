"""A notebook's JSON text: where each cell's source lies in it, and how to replace only those.

A rewritten notebook keeps every byte outside the changed lines of its changed cells: its
indentation, key order, escapes (``\\u00e9`` or a raw ``é``), line breaks and the lack of a
final one, whichever writer laid it out. So each changed cell's ``source`` value is replaced in
the file's text where it stands (:func:`replace_sources`): as a list of lines or one string, as
the old value was; a line that did not change keeps its JSON text byte for byte, a new line is
written the way the notebook writes strings (``\\u`` escapes where it escapes non-ASCII).

Some notebooks in the wild hold a raw control character (a newline pasted into a string) that
strict JSON forbids; Python's ``json`` reads them with ``strict=False``, nbformat does not. Such
a file is migrated all the same: the cells holding the character are left alone and named
(:func:`cells_with_raw_control_characters`).
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Mapping

_WHITESPACE = " \t\n\r"


class _Span:
    """A JSON value of the text: its start and end offsets, and its children (a dict for an
    object, a list for an array; None for anything else)."""

    __slots__ = ("start", "end", "children")

    def __init__(self, start: int, end: int, children: Any = None) -> None:
        self.start, self.end, self.children = start, end, children


def _scan(text: str, i: int) -> _Span:
    """The JSON value starting at ``text[i]`` (after whitespace)."""
    while text[i] in _WHITESPACE:
        i += 1
    start, first = i, text[i]
    if first == "{":
        children: dict[str, _Span] = {}
        i += 1
        while True:
            while text[i] in _WHITESPACE:
                i += 1
            if text[i] == "}":
                return _Span(start, i + 1, children)
            key = _scan(text, i)
            name = json.loads(text[key.start:key.end], strict=False)
            i = text.index(":", key.end) + 1
            value = _scan(text, i)
            children[name] = value
            i = value.end
            while text[i] in _WHITESPACE:
                i += 1
            if text[i] == ",":
                i += 1
    if first == "[":
        items: list[_Span] = []
        i += 1
        while True:
            while text[i] in _WHITESPACE:
                i += 1
            if text[i] == "]":
                return _Span(start, i + 1, items)
            item = _scan(text, i)
            items.append(item)
            i = item.end
            while text[i] in _WHITESPACE:
                i += 1
            if text[i] == ",":
                i += 1
    if first == '"':
        i += 1
        while text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        return _Span(start, i + 1)
    while i < len(text) and text[i] not in _WHITESPACE + ",]}":
        i += 1  # a number, true, false, null
    return _Span(start, i)


def strict(text: str) -> bool:
    """``text`` is strict JSON (what nbformat reads and writes)."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _source_spans(text: str) -> list[_Span | None]:
    """Per cell, in order, the span of its ``source`` value (None for a cell without one)."""
    cells = _scan(text, 0).children.get("cells")
    return [cell.children.get("source") if isinstance(cell.children, dict) else None for cell in cells.children or []]


def cells_with_raw_control_characters(text: str) -> dict[int, tuple[int, str]]:
    """Cell index (from 1) → (line in the cell, the character's name) for each cell whose
    source holds a raw control character inside a JSON string."""
    found: dict[int, tuple[int, str]] = {}
    for index, span in enumerate(_source_spans(text), start=1):
        if span is None:
            continue
        items = span.children if isinstance(span.children, list) else [span]
        line = 1
        for item in items:
            raw = text[item.start + 1:item.end - 1]
            bad = next((ch for ch in raw if ord(ch) < 0x20), None)
            if bad is not None:
                line += json.loads(text[item.start:item.end], strict=False)[: raw.index(bad)].count("\n")
                found[index] = (line, f"U+{ord(bad):04X}")
                break
            line += json.loads(text[item.start:item.end], strict=False).count("\n")
    return found


def replace_sources(text: str, sources: Mapping[int, str]) -> str:
    """``text`` with the source of each cell in ``sources`` (index from 1 → new source)
    replaced where it stands, laid out as the old value was (see the module docstring)."""
    spans = _source_spans(text)
    escaping = _escapes_non_ascii(text)
    out, last = [], 0
    for index in sorted(sources):
        span = spans[index - 1]
        if span is None:
            raise ValueError(f"cell {index} has no source")
        out.append(text[last:span.start])
        out.append(_layout(text, span, sources[index], escaping))
        last = span.end
    out.append(text[last:])
    return "".join(out)


def _escapes_non_ascii(text: str) -> bool:
    """Whether the notebook writes non-ASCII characters as ``\\u`` escapes (as Python's
    ``json`` does by default) rather than as they are (nbformat's way)."""
    if not text.isascii():
        return False
    return any(int(text[m + 2:m + 6], 16) >= 0x80 for m in _escape_positions(text, "u") if _is_hex(text[m + 2:m + 6]))


def _escape_positions(text: str, letter: str) -> list[int]:
    """Offsets of ``\\`` + ``letter`` escapes (not an escaped backslash followed by it)."""
    found, i = [], text.find("\\")
    while i != -1:
        if text[i + 1:i + 2] == letter:
            found.append(i)
        i = text.find("\\", i + 2)
    return found


def _is_hex(digits: str) -> bool:
    return len(digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in digits)


def _string_lines(token: str) -> list[tuple[str, str]]:
    """A JSON string token (quotes included) cut after each line break it encodes: per line, its
    JSON text (no quotes) and the text it decodes to."""
    body = token[1:-1]
    lines, start, i = [], 0, 0
    while i < len(body):
        if body[i] == "\\":
            size = 6 if body[i + 1] == "u" else 2
            unit, i = body[i:i + size], i + size
        else:
            unit, i = body[i], i + 1
        if unit in ("\\n", "\\u000a", "\\u000A", "\n"):
            lines.append(body[start:i])
            start = i
    if start < len(body) or not lines:
        lines.append(body[start:])
    return [(raw, json.loads('"' + raw + '"', strict=False)) for raw in lines]


def _encoded(line: str, escaping: bool) -> str:
    return json.dumps(line, ensure_ascii=escaping)[1:-1]


def _reuse(old: list[tuple[str, str]], new: list[str], escaping: bool) -> list[str]:
    """The JSON text of each new line: an old line's own where it is unchanged."""
    matcher = difflib.SequenceMatcher(None, [decoded for _, decoded in old], new, autojunk=False)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += [raw for raw, _ in old[i1:i2]]
        else:
            out += [_encoded(line, escaping) for line in new[j1:j2]]
    return out


def _layout(text: str, span: _Span, source: str, escaping: bool) -> str:
    old = text[span.start:span.end]
    new_lines = source.splitlines(keepends=True) if source else []
    if not old.startswith("["):  # one string: its unchanged lines keep their bytes
        return '"' + "".join(_reuse(_string_lines(old), new_lines, escaping)) + '"'
    items = span.children or []
    tokens = [text[item.start:item.end] for item in items]
    old_lines = [line for token in tokens for line in _string_lines(token)]
    if not tokens or len(old_lines) != len(tokens):  # not one line an item: each line written anew
        encoded = ['"' + _encoded(line, escaping) + '"' for line in new_lines]
        return "[" + ", ".join(encoded) + "]" if "\n" not in old else _list(old, encoded)
    encoded = ['"' + raw + '"' for raw in _reuse(old_lines, new_lines, escaping)]
    opening = text[span.start + 1:items[0].start]
    separator = text[items[0].end:items[1].start] if len(items) > 1 else "," + (opening or " ")
    closing = text[items[-1].end:span.end - 1]
    return "[" + opening + separator.join(encoded) + closing + "]" if encoded else "[" + closing.strip(",") + "]"


def _list(old: str, encoded: list[str]) -> str:
    """A list of lines, one item a line at the old value's indentation."""
    first_item = old[1:].lstrip(_WHITESPACE)
    indent = old[1: len(old) - len(first_item)].rsplit("\n", 1)[-1]
    closing = old[:-1].rsplit("\n", 1)[-1]
    return "[\n" + ",\n".join(indent + item for item in encoded) + "\n" + closing + "]"
