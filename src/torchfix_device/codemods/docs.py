"""A codemod's documentation: the sections of its docstring and its fix tier, as ``rules``,
``explain``, the rule pages and the README table show them."""

from __future__ import annotations

import inspect

SAFE_FIX, UNSAFE_FIX, REPORT_ONLY = "safe fix", "unsafe fix", "report only"
"""A codemod's fix tier, as ``rules``, ``explain`` and the docs show it."""
DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Not rewritten", "Fix safety")
"""The ``## heading`` sections every codemod docstring holds, in this order."""


def fix_tier(codemod: type, base: type) -> str:
    """``report only`` for a codemod that can change nothing (its class, below ``base``, defines
    no ``leave_*`` hook, a libcst transformer changing the tree only by what those return, and
    no ``token_fixes``, the fixes made before parsing), else ``safe fix`` or ``unsafe fix`` from
    its ``safe`` attribute."""
    own = [k for k in codemod.__mro__ if k not in base.__mro__]
    if not any(name.startswith("leave_") or name == "token_fixes" for k in own for name in vars(k)):
        return REPORT_ONLY
    return SAFE_FIX if codemod.safe else UNSAFE_FIX


def parse_doc_sections(doc: str) -> dict[str, str]:
    """Split a rule docstring into ``{heading: body}`` on ``## heading`` lines."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}
