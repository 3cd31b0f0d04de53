"""Jupyter notebooks (``.ipynb``), rewritten cell by cell.

The code cells of a notebook share one namespace, so they are rewritten together as one
module: one ``device = ...`` binding for the whole notebook, where the imports are. Each cell is
joined to the next through a boundary line, and each IPython line the Python parser cannot
read — a ``%magic``, a ``!shell`` command, ``x = !cmd``, ``obj?`` — is swapped for a
placeholder line before parsing and swapped back afterwards, byte for byte. Placeholders are
``import`` statements so that a notebook opening with ``%matplotlib inline`` still has its
imports read as the leading import block. Cells under a cell magic whose body is not Python
(``%%bash``, ``%%writefile``, ...) are left alone. Outputs, metadata, markdown cells and every
cell without a fix keep their content.

Cells are read as IPython reads them: a line starting with ``%`` or ``!`` is a magic only where
a statement starts (not inside brackets, after a backslash, in a string), and a cell whose first
line is indented loses that indentation (``leading_indent``), put back after the rewrite. A cell
that still does not parse on its own (after the token fixes), or whose JSON holds a raw control
character, is left as it is and named in the result's ``problems``; the other cells are read
and migrated as one program. The notebook is written back by replacing only the changed lines
of the changed cells' sources in its text, in its own layout and escapes, never re-serialised
(:mod:`torchfix_device.files.notebook_json`), so every other byte survives.

This module is the notebook format and the cell mapping; reading a notebook from disk, the
result and the write are the per-file job's (:func:`torchfix_device.run.job.process_notebook`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import libcst as cst

from torchfix_device.files import notebook_json
from torchfix_device.engine import parse_error_message, syntax_error, transform_source
from torchfix_device.finding import Finding
from torchfix_device.results import InternalError, TransformOutput
from torchfix_device.syntax.token_fixes import tokens

if TYPE_CHECKING:
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.options import RunOptions

MAGIC = "__torchfix_device_magic_{}__"
BOUNDARY = "__torchfix_device_cell_{}__"
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
_ASSIGNED_FROM_MAGIC = re.compile(r"^\s*[\w.\[\], ]+=\s*[%!]")
_HELP = re.compile(r"^\s*(\?{1,2}[\w.]+|[\w.]+\?{1,2})\s*$")


class NotebookError(Exception):
    """Not a readable notebook, or a syntax error in a code cell (the message names the cell)."""


@dataclass
class _Cell:
    index: int
    """Position among all cells, counted from 1 (``cell 3``)."""
    python: str
    """The cell's source with IPython lines replaced by placeholders, ending with a newline."""
    magics: dict[str, str]
    """Placeholder name → the original line it stands for (without its newline)."""
    trailing_newline: bool
    first_line: int = 0
    """Line of the joined module on which this cell starts (1-based)."""
    indent: str = ""
    """IPython's leading indentation: a cell whose first line is indented runs as if the lines
    starting with that indentation did not have it (``leading_indent``); removed from them in
    ``python``, put back after the rewrite."""
    indented: tuple[bool, ...] = ()
    """Per line of ``python``: the line had ``indent`` removed."""


def _is_ipython_line(line: str) -> bool:
    stripped = line.lstrip()
    return (
        stripped.startswith(("%", "!"))
        or bool(_ASSIGNED_FROM_MAGIC.match(line))
        or bool(_HELP.match(line))
    )


def _protect(index: int, source: str, counter: list[int]) -> _Cell | None:
    """The cell as parseable Python, or None when it is not Python (a ``%%bash`` cell)."""
    if not source.strip():
        return None
    lines = source.split("\n")
    first = lines[0].lstrip()
    if first.startswith("%%"):
        magic_name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
        if magic_name not in PYTHON_CELL_MAGICS:
            return None
    indent, indented = _leading_indent(lines)
    if indent:
        lines = [line[len(indent):] if cut else line for line, cut in zip(lines, indented)]
    magics: dict[str, str] = {}
    out: list[str] = []
    continued = _continued_lines("\n".join(lines)) if any(map(_is_ipython_line, lines[1:])) else set()
    for number, line in enumerate(lines, start=1):
        if _is_ipython_line(line) and number not in continued and not line.rstrip().endswith("\\"):
            name = MAGIC.format(counter[0])
            counter[0] += 1
            magics[name] = line
            own_indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{own_indent}import {name}")
        else:
            out.append(line)
    python = "\n".join(out)
    trailing = python.endswith("\n")
    if not trailing:
        indented = (*indented, False)
    return _Cell(index, python if trailing else python + "\n", magics, trailing, indent=indent, indented=tuple(indented))


def _continued_lines(source: str) -> set[int]:
    """Lines that go on with a statement begun above them (inside brackets, after a backslash,
    inside a triple-quoted string): IPython reads no magic there, so a line such as
    ``% (epoch, loss))`` is Python. From the tokens :mod:`tokenize` reads (up to where it
    cannot go on: lines after that count as starting a statement)."""
    continued: set[int] = set()
    previous = None
    for token in tokens(source):
        if token.type == tokenize.STRING and token.end[0] > token.start[0]:
            continued.update(range(token.start[0] + 1, token.end[0] + 1))
        if token.type in (tokenize.NL, tokenize.COMMENT):
            continue
        if previous is not None and previous.type not in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) \
                and token.start[0] > previous.end[0]:
            continued.update(range(previous.end[0] + 1, token.start[0] + 1))
        previous = token
    return continued


def _leading_indent(lines: list[str]) -> tuple[str, list[bool]]:
    """IPython's ``leading_indent``: the whitespace the first non-blank line starts with, and
    which lines start with it."""
    first = next((line for line in lines if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    return indent, [bool(indent) and line.startswith(indent) for line in lines]


def _reindent(cell: _Cell, lines: list[str]) -> list[str]:
    """The rewritten ``lines`` of ``cell`` with its leading indentation put back on every line
    that stands for one that had it (a new line takes that of the line before it)."""
    original = [cell.magics.get(line.strip()[len("import "):], line) for line in cell.python.split("\n")]
    flags = [False] * len(lines)
    matcher = difflib.SequenceMatcher(None, original, lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for j in range(j1, j2):
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                flags[j] = cell.indented[i1 + j - j1]
            else:
                flags[j] = cell.indented[max(i1 - 1, 0)] if original else False
    return [cell.indent + line if flag and line else line for line, flag in zip(lines, flags)]


def _restore(cell: _Cell, text: str) -> str:
    lines = text.split("\n")
    seen: set[str] = set()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("import __torchfix_device_magic_"):
            name = stripped[len("import "):]
            if name not in cell.magics or name in seen:
                raise InternalError(f"cell {cell.index}: an IPython line was moved by the rewrite; notebook left unchanged")
            seen.add(name)
            lines[i] = cell.magics[name]
    if seen != set(cell.magics):
        raise InternalError(f"cell {cell.index}: an IPython line was lost by the rewrite; notebook left unchanged")
    if cell.indent:
        lines = _reindent(cell, lines)
    restored = "\n".join(lines)
    return restored if cell.trailing_newline else restored[:-1] if restored.endswith("\n") else restored


def _join(cells: Sequence[_Cell]) -> str:
    parts: list[str] = []
    line = 1
    for cell in cells:
        cell.first_line = line
        parts.append(cell.python)
        parts.append(f"import {BOUNDARY.format(cell.index)}\n")
        line += cell.python.count("\n") + 1
    return "".join(parts)


def _split(cells: Sequence[_Cell], text: str) -> dict[int, str]:
    """The rewritten Python of each cell, by cell index."""
    out: dict[int, str] = {}
    rest = text
    for cell in cells:
        marker = f"import {BOUNDARY.format(cell.index)}\n"
        if rest.count(marker) != 1:
            raise InternalError(f"cell {cell.index}: the rewrite moved a cell boundary; notebook left unchanged")
        body, _, rest = rest.partition(marker)
        out[cell.index] = body
    if rest.strip():
        raise InternalError("the rewrite added code after the last cell; notebook left unchanged")
    return out


def _cell_at(cells: Sequence[_Cell], line: int) -> tuple[_Cell, int]:
    """The cell holding line ``line`` of the joined module, and the line within the cell."""
    current = cells[0]
    for cell in cells:
        if cell.first_line <= line:
            current = cell
    return current, line - current.first_line + 1


def program_of(raw: bytes) -> str | None:
    """The Python that the code cells of a notebook make together, as :func:`transform_notebook`
    reads them when every cell can be read; None for a notebook that is not one, not Python, or
    has a cell it cannot read (what the run's star-import pass reads of a notebook)."""
    try:
        nb = read_notebook(raw)
    except NotebookError:
        return None
    text = raw.decode("utf-8")
    if not is_python_notebook(nb) or (not notebook_json.strict(text) and notebook_json.cells_with_raw_control_characters(text)):
        return None
    cells = _code_cells(nb, {})
    return _join(cells) if cells else None


def _code_cells(nb, unreadable) -> list[_Cell]:  # noqa: ANN001
    """The code cells of ``nb`` as :func:`_protect` makes them, less those in ``unreadable``."""
    counter = [0]
    return [
        cell
        for index, nb_cell in enumerate(nb.get("cells", []), start=1)
        if nb_cell.get("cell_type") == "code" and index not in unreadable
        for cell in [_protect(index, nb_cell.get("source", ""), counter)]
        if cell is not None
    ]


def is_python_notebook(nb) -> bool:
    metadata = nb.get("metadata", {})
    language = (metadata.get("kernelspec") or {}).get("language") or (metadata.get("language_info") or {}).get("name")
    return language in (None, "python", "python3")


def read_notebook(raw: bytes):
    """The notebook of ``raw`` (its JSON, each cell's ``source`` joined into one text as
    nbformat reads it), checked for what a rewrite relies on; :class:`NotebookError` names the
    problem (and the cell) otherwise. Read with :mod:`json` alone: nbformat turned every output
    (images included) into its own node type (reading was 3.7% of a profiled run over the dev
    corpus, nearly all of it nbformat's) and one output without ``output_type`` stopped the
    1d58ef4 build; the rewrite reads nothing but the cells' sources (the file is never
    re-serialised: :mod:`.notebook_json` replaces the sources in the text)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not UTF-8 (byte 0x{raw[exc.start]:02x}): not a notebook") from None
    try:
        nb = json.loads(text, strict=False)  # a raw newline pasted into a string is read, as before
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
        raise NotebookError(f"not a readable notebook: not JSON{where}") from None
    if isinstance(nb, dict):
        version = nb.get("nbformat", 1)
        if version not in (1, 2, 3, 4):
            raise NotebookError(f"not a readable notebook: unsupported nbformat version {version}")
        if version == 4 and isinstance(nb.get("cells"), list):
            for index, cell in enumerate(nb["cells"], start=1):
                source = cell.get("source") if isinstance(cell, dict) else None
                if isinstance(source, list):
                    if not all(isinstance(line, str) for line in source):
                        raise NotebookError(f"cell {index}: not a valid cell: its `source` holds something other than text")
                    cell["source"] = "".join(source)
    _check_layout(nb)
    return nb


def _check_layout(nb) -> None:  # noqa: ANN001
    """What the rewrite reads of a notebook: nbformat 4, a list of cells, each a table whose
    ``source`` is text (nbformat itself lets ``"source": 5`` through)."""
    if not isinstance(nb, dict):
        raise NotebookError("not a notebook: its JSON is not an object")
    version = nb.get("nbformat")
    if version != 4:
        how = "; convert it with `jupyter nbconvert --to notebook --nbformat 4 FILE` and run again" if version in (1, 2, 3) else ""
        raise NotebookError(f"nbformat {version} notebook: only nbformat 4 is read{how}")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"not a valid notebook: `cells` is {_kind(cells)}, not a list")
    for index, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {index}: not a valid cell: {_kind(cell)}, not an object")
        source = cell.get("source", "")
        if not isinstance(source, str):
            raise NotebookError(f"cell {index}: not a valid cell: its `source` is {_kind(source)}, not text")


def _kind(value: object) -> str:
    return "missing" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}" if isinstance(value, (int, float, bool)) \
        else f"a {type(value).__name__}"


def transform_notebook(
    nb, text: str, codemods: Sequence["CodemodRef | type[Codemod]"], *,
    filename: str | None = None, options: "RunOptions | None" = None,
) -> TransformOutput:
    """Rewrite the code cells of ``nb`` (read from ``text``, changed in place) together.

    The output's text is the notebook's new text, ``text`` itself when no cell changes; its
    findings name their cell (``Finding.cell``) and the line within it. A cell that cannot be
    read (a syntax error of its own, after the token fixes; a raw control character in its
    JSON) is left as it is and named in the output's ``problems``; the other cells are still
    read as one program. Raises :class:`NotebookError` naming the cell and line of a syntax
    error that no single cell accounts for, or when no code cell can be read, and what
    :func:`~torchfix_device.engine.transform_source` raises for a codemod bug.
    """
    unreadable = {} if notebook_json.strict(text) else notebook_json.cells_with_raw_control_characters(text)
    problems = [
        f"cell {index}: line {line}: the notebook's JSON holds a raw control character ({name}) in this cell, "
        "which JSON does not allow; cell left as it is"
        for index, (line, name) in sorted(unreadable.items())
    ]
    cells = _code_cells(nb, unreadable)
    if not cells:
        return TransformOutput(text, [], [], problems=tuple(problems))
    output, cells = _transform_cells(cells, codemods, problems, filename=filename, options=options)
    joined = _join(cells)
    new_cells = _split(cells, output.text) if output.text != joined else {}
    rewritten = {cell.index: _restore(cell, new_cells[cell.index]) for cell in cells if cell.index in new_cells}
    findings = sorted(_in_cells(cells, output.findings), key=lambda f: (f.cell or 0, f.line, f.column, f.code))
    changed: dict[int, str] = {}
    for nb_cell_index, nb_cell in enumerate(nb.get("cells", []), start=1):
        new = rewritten.get(nb_cell_index)
        if new is not None and new != nb_cell.get("source", ""):
            nb_cell["source"] = changed[nb_cell_index] = new
    if not changed:
        return TransformOutput(text, findings, output.notes, problems=tuple(problems))
    return TransformOutput(_replaced(text, changed), findings, output.notes, problems=tuple(problems))


def _replaced(text: str, changed: dict[int, str]) -> str:
    """``text`` with the changed cells' sources replaced where they stand (every other byte
    kept: :func:`~torchfix_device.files.notebook_json.replace_sources`), checked: read back, it
    is the old notebook with exactly those sources changed."""
    new_text = notebook_json.replace_sources(text, changed)
    before, after = json.loads(text, strict=False), json.loads(new_text, strict=False)
    for index, source in changed.items():
        value = after["cells"][index - 1].get("source")
        if ("".join(value) if isinstance(value, list) else value) != source:
            raise InternalError(f"cell {index}: its new source did not read back as written; notebook left unchanged")
        before["cells"][index - 1]["source"] = value
    if before != after:
        raise InternalError("replacing the changed cells' sources changed the notebook elsewhere; notebook left unchanged")
    return new_text


def _transform_cells(
    cells: list[_Cell], codemods: Sequence["CodemodRef | type[Codemod]"], problems: list[str], *,
    filename: str | None, options: "RunOptions | None",
) -> tuple[TransformOutput, list[_Cell]]:
    """The transform of ``cells`` read as one program, and the cells it read. When they do not
    parse together, each cell that does not parse on its own (as IPython compiles it) is left
    out and named in ``problems``, and the others are transformed."""
    try:
        return transform_source(  # cells are not checked by CPython unless a codemod may act: IPython syntax
            _join(cells), codemods, filename=filename, options=options, check_syntax=False
        ), cells
    except cst.ParserSyntaxError as exc:
        together = _cell_error(cells, exc, _join(cells))
    broken = [(cell, error) for cell in cells for error in [syntax_error(cell.python, codemods, options)] if error]
    readable = [cell for cell in cells if all(cell is not b for b, _ in broken)]
    if not broken or not readable:
        raise NotebookError(together)
    for cell, error in broken:
        problems.append(f"cell {cell.index}: {parse_error_message(error, cell.python)}; cell left as it is")
    try:
        joined = _join(readable)
        return transform_source(
            joined, codemods, filename=filename, options=options, check_syntax=False
        ), readable
    except cst.ParserSyntaxError as exc:
        raise NotebookError(_cell_error(readable, exc, joined)) from None


def _cell_error(cells: Sequence[_Cell], exc: cst.ParserSyntaxError, joined: str) -> str:
    """``cell N: line L: ...`` for a syntax error of the joined module."""
    message = parse_error_message(exc, joined)
    line = int(message.split()[1].split(":")[0])
    cell, cell_line = _cell_at(cells, line)
    detail = message.split(": ", 1)[1]
    return f"cell {cell.index}: line {cell_line}: {detail}"


def _in_cells(cells: Sequence[_Cell], findings: Sequence[Finding]) -> list[Finding]:
    out = []
    for finding in findings:
        cell, line = _cell_at(cells, finding.line)
        out.append(dataclasses.replace(finding, line=line, cell=cell.index))
    return out
