"""Issue 33 item 7: what a review or held-back finding says is one sentence a reader can follow.

Every finding the fixtures give that is not fixed (manual review, held back for
``--unsafe-fixes``) is read as prose, with code in backticks and calls like ``x.item()`` counted
as words: no parenthesis inside a parenthesis (an unsafe reason follows ``; unsafe:`` instead),
and no second sentence.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import FIXTURES


NOT_RULE_FIXTURES = {"run_scripts", "models"}


def prose(message: str) -> str:
    """``message`` with code spans and calls (``f()``) as single words."""
    return re.sub(r"\w+\(\)", "C", re.sub(r"`[^`]*`", "C", message))


def nesting(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


def sentences(text: str) -> int:
    return 1 + len(re.findall(r"[.!?] [A-Z]", text))


@pytest.mark.parametrize("text, deepest, count", [
    ("`x.cuda()` stays (unsafe: `f(g(x))` is not shown)", 1, 1),
    ("a (b (c)) d", 2, 1),
    ("Move it. Then run again", 0, 2),
    ("call `x.item()` first; unsafe: a 1-element tensor", 0, 1),
])
def test_the_measures(text: str, deepest: int, count: int) -> None:
    assert (nesting(prose(text)), sentences(prose(text))) == (deepest, count)


