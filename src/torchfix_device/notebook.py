"""Jupyter notebooks (``.ipynb``), rewritten cell by cell with nbformat.

The code cells of a notebook share one namespace, so they are rewritten together as one
module: one ``device = ...`` binding for the whole notebook, where the imports are. Each cell is
joined to the next through a boundary line, and each IPython line the Python parser cannot
read — a ``%magic``, a ``!shell`` command, ``x = !cmd``, ``obj?`` — is swapped for a
placeholder line before parsing and swapped back afterwards, byte for byte. Placeholders are
``import`` statements so that a notebook opening with ``%matplotlib inline`` still has its
imports read as the leading import block. Cells under a cell magic whose body is not Python
(``%%bash``, ``%%writefile``, ...) are left alone. Outputs, metadata, markdown cells and every
cell without a fix keep their content.

This module is the notebook format and the cell mapping; reading a notebook from disk, the
result and the write are the per-file job's (:func:`torchfix_device.job.process_notebook`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import libcst as cst

from torchfix_device.engine import parse_error_message, transform_source
from torchfix_device.finding import Finding
from torchfix_device.results import InternalError, TransformOutput

if TYPE_CHECKING:
    from torchfix_device.catalog import CodemodRef
    from torchfix_device.codemod import Codemod
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
    magics: dict[str, str] = {}
    out: list[str] = []
    for line in lines:
        if _is_ipython_line(line) and not line.rstrip().endswith("\\"):
            name = MAGIC.format(counter[0])
            counter[0] += 1
            magics[name] = line
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}import {name}")
        else:
            out.append(line)
    python = "\n".join(out)
    trailing = python.endswith("\n")
    return _Cell(index, python if trailing else python + "\n", magics, trailing)


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


def is_python_notebook(nb) -> bool:
    metadata = nb.get("metadata", {})
    language = (metadata.get("kernelspec") or {}).get("language") or (metadata.get("language_info") or {}).get("name")
    return language in (None, "python", "python3")


def read_notebook(raw: bytes):
    import nbformat

    try:
        return nbformat.reads(raw.decode("utf-8"), as_version=nbformat.NO_CONVERT)
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not UTF-8 (byte 0x{raw[exc.start]:02x}): not a notebook") from None
    except Exception as exc:  # nbformat raises several kinds on bad JSON / unknown versions
        raise NotebookError(f"not a readable notebook: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


def write_notebook(nb, like: str) -> str:
    import nbformat

    text = nbformat.writes(nb, version=nbformat.NO_CONVERT)
    return text + "\n" if like.endswith("\n") and not text.endswith("\n") else text


def transform_notebook(
    nb, text: str, codemods: Sequence["CodemodRef | type[Codemod]"], *, unsafe_fixes: bool = False,
    filename: str | None = None, options: "RunOptions | None" = None,
) -> TransformOutput:
    """Rewrite the code cells of ``nb`` (read from ``text``, changed in place) together.

    The output's text is the notebook's new text, ``text`` itself when no cell changes; its
    findings name their cell (``Finding.cell``) and the line within it. Raises
    :class:`NotebookError` naming the cell and line of a syntax error, and what
    :func:`~torchfix_device.engine.transform_source` raises for a codemod bug.
    """
    counter = [0]
    cells = [
        cell
        for index, nb_cell in enumerate(nb.get("cells", []), start=1)
        if nb_cell.get("cell_type") == "code"
        for cell in [_protect(index, nb_cell.get("source", ""), counter)]
        if cell is not None
    ]
    if not cells:
        return TransformOutput(text, [], [])
    joined = _join(cells)
    try:
        output = transform_source(  # cells are not checked by CPython unless a codemod may act: IPython syntax
            joined, codemods, unsafe_fixes=unsafe_fixes, filename=filename, options=options, check_syntax=False
        )
        new_cells = _split(cells, output.text) if output.text != joined else {}
        rewritten = {index: _restore(cell, new_cells[cell.index]) for index, cell in ((c.index, c) for c in cells) if index in new_cells}
    except cst.ParserSyntaxError as exc:
        message = parse_error_message(exc, joined)
        line = int(message.split()[1].split(":")[0])
        cell, cell_line = _cell_at(cells, line)
        detail = message.split(": ", 1)[1]
        raise NotebookError(f"cell {cell.index}: line {cell_line}: {detail}") from None
    findings = sorted(_in_cells(cells, output.findings), key=lambda f: (f.cell or 0, f.line, f.column, f.code))
    changed = False
    for nb_cell_index, nb_cell in enumerate(nb.get("cells", []), start=1):
        new = rewritten.get(nb_cell_index)
        if new is not None and new != nb_cell.get("source", ""):
            nb_cell["source"] = new
            changed = True
    return TransformOutput(write_notebook(nb, text) if changed else text, findings, output.notes)


def _in_cells(cells: Sequence[_Cell], findings: Sequence[Finding]) -> list[Finding]:
    out = []
    for finding in findings:
        cell, line = _cell_at(cells, finding.line)
        out.append(dataclasses.replace(finding, line=line, cell=cell.index))
    return out
