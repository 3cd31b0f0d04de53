"""The token pass: the codemods' fixes for syntax Python 3 cannot parse, made before parsing.

For a file CPython cannot parse, each selected codemod is asked for its
:class:`~torchfix_device.syntax.token_fixes.TokenFix` edits (:meth:`Codemod.token_fixes`; most have
none). Each is a finding of its codemod, applied unless it is suppressed by ``# noqa``, unsafe
without ``--unsafe-fixes``, or declined in interactive review. If the fixed text parses, the
engine migrates it as it would any file, and the findings of that run are moved back to the
columns of the file as it was (:class:`Repair`); if it still does not parse, the syntax error
that remains is raised, with a word on each fix that was declined on its line.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Sequence

from torchfix_device.options import RunOptions
from torchfix_device.codemods.base import FIX_FILTER
from torchfix_device.finding import Finding
from torchfix_device.results import TransformOutput
from torchfix_device.syntax.suppressions import NO_SUPPRESSIONS, may_hold_our_noqa, parse_suppressions
from torchfix_device.syntax.token_fixes import ColumnMap, TokenFix, apply_fixes

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod


@dataclasses.dataclass
class Repair:
    """The token fixes of one file: the text they give, their findings, and the fixes declined."""

    text: str
    applied: list[TokenFix]
    findings: list[Finding]
    suppressed: list[Finding]
    declined: dict[int, list[str]]
    """Line → why a fix on it was not made (``TFD016: suppressed by # noqa``)."""

    @property
    def columns(self) -> ColumnMap:
        return ColumnMap(self.applied)

    def hint(self, line: int) -> str:
        """What the user should know about a syntax error left on ``line``."""
        reasons = self.declined.get(line)
        return "; ".join(reasons) if reasons else ""

    def merge(self, output: TransformOutput) -> TransformOutput:
        """``output`` (of the fixed text) with positions in the original text, plus the token
        fixes' own findings."""
        columns = self.columns

        def back(found: Sequence[Finding]) -> list[Finding]:
            return [dataclasses.replace(f, column=columns.original_column(f.line, f.column)) for f in found]

        return TransformOutput(
            output.text,
            sorted([*back(output.findings), *self.findings]),
            output.notes,
            tuple(sorted([*back(output.suppressed), *self.suppressed])),
        )


def token_repair(text: str, codemods: Sequence[type["Codemod"]], options: RunOptions) -> Repair | None:
    """The token fixes ``codemods`` offer for ``text`` (a file CPython cannot parse), or None
    when none offers one."""
    offered = [(codemod, fix) for codemod in codemods for fix in codemod.token_fixes(text)]
    if not offered:
        return None
    suppressions = parse_suppressions(text) if may_hold_our_noqa(text) else NO_SUPPRESSIONS
    chosen = FIX_FILTER.get()
    repair = Repair(text, [], [], [], {})
    made: dict[str, bool] = {}
    """Codemod code → whether its last fix that is not a second half was made."""
    for codemod, fix in offered:
        if fix.follows:
            if made.get(codemod.code):
                repair.applied.append(fix)
            continue
        made[codemod.code] = False
        apply = options.applies(fix.safe and codemod.safe)
        suppressed = suppressions.suppresses(fix.line, codemod.code)
        if apply and not suppressed and chosen is not None and not chosen(codemod.code, fix.line, fix.column, None):
            repair.declined.setdefault(fix.line, []).append(f"{codemod.code} would fix it, declined in review")
            continue
        finding = Finding(fix.line, fix.column, codemod.code, fix.message, fixed=apply, held_back=not apply,
                          unsafe=not (fix.safe and codemod.safe))
        if suppressed:
            repair.suppressed.append(finding)
            repair.declined.setdefault(fix.line, []).append(f"{codemod.code} would fix it, suppressed by `# noqa` here")
        elif not apply:
            repair.findings.append(finding)
            repair.declined.setdefault(fix.line, []).append(f"{codemod.code} would fix it with --unsafe-fixes")
        else:
            repair.findings.append(finding)
            repair.applied.append(fix)
            made[codemod.code] = True
    repair.text = apply_fixes(text, repair.applied)
    return repair
