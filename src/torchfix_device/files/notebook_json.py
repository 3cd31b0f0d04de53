"""A notebook whose file is not strict JSON: where each cell's source lies in its text.

Some notebooks in the wild hold a raw control character (a newline pasted into a string) that
strict JSON forbids; Python's ``json`` reads them with ``strict=False``, nbformat does not. Such
a file is migrated all the same, but re-serialising it would silently change the cells that hold
the character (and any other byte a different writer laid out differently). So each changed
cell's ``source`` value is replaced in the file's text where it stands, in the layout the file
uses there, and every other byte stays as it was: the cells holding the character are left
alone and named (:func:`cells_with_raw_control_characters`).
"""

from __future__ import annotations

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
    replaced where it stands, laid out as the old value was (a list of lines, one per line of
    the file, at its indentation; or one string)."""
    spans = _source_spans(text)
    out, last = [], 0
    for index in sorted(sources):
        span = spans[index - 1]
        assert span is not None
        out.append(text[last:span.start])
        out.append(_layout(text[span.start:span.end], sources[index]))
        last = span.end
    out.append(text[last:])
    return "".join(out)


def _layout(old: str, source: str) -> str:
    ascii_only = "\\u" in old and old.isascii()
    lines = source.splitlines(keepends=True)
    if not old.startswith("["):
        return json.dumps(source, ensure_ascii=ascii_only)
    items = [json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    if "\n" not in old or not items:
        return "[" + ", ".join(items) + "]"
    first_item = old[1:].lstrip(_WHITESPACE)
    indent = old[1: len(old) - len(first_item)].rsplit("\n", 1)[-1]
    closing = old[:-1].rsplit("\n", 1)[-1]
    return "[\n" + ",\n".join(indent + item for item in items) + "\n" + closing + "]"
