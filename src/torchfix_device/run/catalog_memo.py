"""The catalog remembered in the result cache's folder, so that a warm run does not parse the
codemod files (about 30 ms, a quarter of a warm ``check`` of one file).

The memo is keyed by :func:`~torchfix_device.run.cache.tool_fingerprint` (a hash of every source
file of the package), so a new or edited codemod is read again; what it holds is checked
before use (codes, module and class names), and a memo that cannot be read or written is
ignored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from torchfix_device.codemods import catalog
from torchfix_device.run.cache import ENTRY_MODE, tool_fingerprint
from torchfix_device.files.sources import atomic_write

_CODE = re.compile(r"^TFD\d{3}$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def memo_path(folder: Path) -> Path:
    return folder / f"catalog-{tool_fingerprint()[:32]}.json"


def load_catalog(folder: Path) -> None:
    """Give :mod:`catalog` the codemods remembered in the cache folder ``folder``, or read them
    and remember them there (when the folder exists: the cache makes it, with its
    ``.gitignore``)."""
    if not folder.is_dir():
        return
    path = memo_path(folder)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
        known = [catalog.CodemodRef(*record) for record in records if _valid(record)]
        if known and len(known) == len(records):
            catalog.set_refs(known)
            return
    except (OSError, ValueError, TypeError):
        pass
    found = catalog.refs()
    try:
        data = json.dumps([[r.code, r.name, r.module, r.class_name] for r in found]).encode("utf-8")
        atomic_write(path, data, ENTRY_MODE, durable=False)
    except OSError:
        pass


def _valid(record: object) -> bool:
    if not (isinstance(record, list) and len(record) == 4 and all(isinstance(x, str) for x in record)):
        return False
    code, name, module, class_name = record
    inside = module.removeprefix(catalog.CODEMODS_PACKAGE + ".").split(".")
    return bool(
        _CODE.match(code) and name and module.startswith(catalog.CODEMODS_PACKAGE + ".") and _IDENTIFIER.match(inside[0])
        and (len(inside) == 1 or inside[1:] == [catalog.RULE_MODULE]) and _IDENTIFIER.match(class_name)
    )
