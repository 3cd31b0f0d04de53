"""Issue 33 item 5: findings are stable. After ``apply`` (safe, and with ``--unsafe-fixes``),
``check`` lists nothing that ``check`` did not list before the rewrite: every finding on the
rewritten file is one the original got, with the same code and message, left unfixed there (a
review item or a held-back fix); none is fixable in the tier just applied (the rewrite is a fixed
point). Over every ``.in.py`` fixture of every codemod, in process (the CLI's engine). And every
review and held-back message of every fixture is one sentence without nested parentheses (issue
33 item 7; the measures are tested in ``test_message_style``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import re

import pytest

from conftest import FIXTURES
from fixture_passes import first_pass
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.options import DEFAULT_OPTIONS

from test_message_style import NOT_RULE_FIXTURES, nesting, prose, sentences

# The fixture-wide message test lives here, next to the other reader of every fixture's first pass
# (fixture_passes.first_pass, cached per process): with `--dist loadfile` a module runs on one
# worker, so the passes are computed once instead of once per worker.
PATHS = sorted(FIXTURES.glob("*/*.in.py"))
CODEMODS = all_codemods()


def _python3(text: str) -> bool:
    try:
        compile(text, "<fixture>", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_nothing_appears_after_apply_that_check_did_not_list(unsafe: bool) -> None:
    options = replace(DEFAULT_OPTIONS, unsafe_fixes=unsafe)
    compared = 0
    for path in PATHS:
        text = path.read_text(encoding="utf-8")
        if not _python3(text):
            continue  # a token-pass input (`async=`, print statements): the CLI fixes it first
        first = first_pass(path, unsafe)
        if first is None or first.text == text:
            continue
        second = transform_source(first.text, CODEMODS, filename=str(path), options=options)
        before = {(f.code, f.message) for f in first.findings if not f.fixed}
        new = [f for f in second.findings if (f.code, f.message) not in before]
        assert new == [], f"{path.relative_to(FIXTURES)}: after apply, check lists what it did not before: {new}"
        assert second.text == first.text and not any(f.fixed for f in second.findings), path.relative_to(FIXTURES)
        compared += 1
    assert compared > 60


# -- the messages of every fixture's findings (the measures: test_message_style) -------------------
def _unfixed_messages() -> dict[tuple[str, str], str]:
    """(code, message with code spans blanked) → one place it was seen."""
    seen: dict[tuple[str, str], str] = {}
    cases = sorted(p for p in FIXTURES.rglob("*.py") if not NOT_RULE_FIXTURES & set(p.relative_to(FIXTURES).parts))
    for path in cases:
        for unsafe in (False, True):
            out = first_pass(path, unsafe)
            if out is None:
                continue
            for finding in out.findings:
                if not finding.fixed:
                    key = (finding.code, re.sub(r"`[^`]*`", "`…`", finding.message))
                    seen.setdefault(key, f"{path.relative_to(FIXTURES)}:{finding.line}: {finding.message}")
    return seen


def test_every_review_and_held_back_message_is_one_sentence_without_nested_parentheses() -> None:
    seen = _unfixed_messages()
    assert len(seen) > 40, "the fixtures should give many kinds of review and held-back messages"
    wrong = [where for (_, message), where in seen.items() if nesting(prose(message)) > 1 or sentences(prose(message)) > 1]
    assert wrong == [], "\n".join(wrong)
