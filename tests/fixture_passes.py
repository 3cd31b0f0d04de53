"""One transform of a fixture by every codemod, per tier, shared by the tests that read every
fixture's findings (both in ``test_findings_stable``, so that ``--dist loadfile`` runs them on one
worker): computed once per process."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.options import RunOptions
from torchfix_device.results import TransformOutput


@lru_cache(maxsize=None)
def first_pass(path: Path, unsafe: bool) -> TransformOutput | None:
    """``path``'s transform (None where it is not Python 3 on purpose: a token-pass trap)."""
    text = path.read_text(encoding="utf-8")
    try:
        return transform_source(text, all_codemods(), filename=str(path), options=RunOptions(unsafe_fixes=unsafe))
    except Exception:  # noqa: BLE001 - a fixture that is not Python 3 on purpose (TFD016/TFD020 traps)
        return None
