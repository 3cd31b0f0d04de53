"""The engine: parse once, apply the selected codemods until the tree stops changing.

Stage 1 (:mod:`torchfix_device.prefilter.candidates`, the stdlib ``ast``) decides which codemods can match
a file at all; libcst parses only files where one can, and every later pass runs only the
codemods with a candidate in the tree they would get. This is the only part of a run that
imports libcst: the per-file job (:mod:`torchfix_device.run.job`) calls it for files without a
cached result.

The speed machinery lives in this package and nowhere else; a codemod never sees it:

- ``visiting.py``: the subclass of each codemod class the engine runs (``engine_class``), with
  hook dispatch, statement skipping and one ``configure`` call for the run's settings;
- ``statements.py``: which statements a codemod visits, positions one statement at a time;
- ``names.py``: name and scope questions answered without the whole file's scope analysis;
- ``shared.py``: the metadata wrapper and memos shared by the codemods run on one file.
"""

from __future__ import annotations

import ast
import dataclasses
import warnings
from typing import TYPE_CHECKING, NamedTuple, Sequence

import libcst as cst
from libcst.codemod import CodemodContext

from torchfix_device.syntax import traversal
from torchfix_device.syntax import legacy as legacy_syntax
from torchfix_device.prefilter.candidates import (
    ClassOutline,
    FileFacts,
    StatementSites,
    candidate_codemods,
    parse_facts,
    statements_with_sites,
)
from torchfix_device.codemods.catalog import CodemodRef, load_codemods
from torchfix_device.engine.shared import SharedWrapper
from torchfix_device.engine.token_pass import Repair, token_repair
from torchfix_device.engine.foreign import ForeignCallers, ForeignReturns
from torchfix_device.engine.lines import LateFixes, keep_untouched_lines
from torchfix_device.engine.visiting import engine_class
from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES
from torchfix_device.syntax.file_tail import split_tail
from torchfix_device.finding import Finding
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions
from torchfix_device.results import InternalError, TransformOutput
from torchfix_device.syntax.suppressions import NO_SUPPRESSIONS, Suppressions, may_hold_our_noqa, parse_suppressions

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod

MAX_PASSES = 6


def active_codemods(
    text: str, codemods: Sequence[type[Codemod]], options: RunOptions | None = None, filename: str | None = None
) -> list[type[Codemod]]:
    """The codemods whose trigger substrings occur in ``text`` (the cheap prefilter), or in the
    names of the torch objects the file's star imports bind (``nn`` for ``torch.nn``: the file
    need not spell what the triggers look for), or in the words the run's legacy autograd
    Functions lend a file that names one of them (TFD017's ``Function``)."""
    torch_names = _star_torch_names(options, filename)
    if torch_names:
        text = text + "\n" + "\n".join(sorted(torch_names))
    legacy = options.legacy_functions if options is not None else None
    if legacy:  # a legacy autograd Function of another file, named here, counts as `Function` spelt
        text = text + "\n" + "\n".join(legacy.trigger_words(text))
    return [c for c in codemods if any(t in text for t in c.triggers)]


def _star_torch_names(options: RunOptions | None, filename: str | None) -> frozenset[str]:
    """The qualified names of the torch objects the file's star imports bind
    (:attr:`~torchfix_device.facts.star_imports.FileStars.torch_names`)."""
    if options is None or not options.star_imports or filename is None:
        return frozenset()
    stars = options.star_imports.of(filename)
    return stars.torch_names if stars is not None else frozenset()


def transform_source(
    text: str,
    codemods: Sequence[CodemodRef | type[Codemod]],
    *,
    filename: str | None = None,
    options: RunOptions | None = None,
    check_syntax: bool = True,
) -> TransformOutput:
    """Apply ``codemods`` to ``text`` until the tree stops changing (see
    :func:`transform_unfiltered`), running only the codemods that stage 1 (``candidates``, the
    stdlib ``ast``) says may match; a file where none may is never parsed by libcst. A file that
    no codemod's trigger matches is still parsed by CPython (``check_syntax``), so that its
    syntax error is reported like any other file's.

    The result is the same as :func:`transform_unfiltered`'s: a codemod left out cannot report or
    change anything in the original file, nor in any intermediate rewrite that stage 1 also finds
    no candidate in (the runs see the same trees up to the first change by a left-out codemod, so
    there is none). When stage 1 does find one in a rewrite (an inserted
    ``torch.cuda.is_available()`` can wake TFD008), the file is transformed again with those
    codemods added, until no left-out codemod has a candidate in any rewrite. The names of the
    torch objects a file's star imports bind count as spelt in it (triggers and stage 1).
    """
    codemods = load_codemods(codemods)
    triggered = active_codemods(text, codemods, options, filename)
    if not triggered:
        if check_syntax:
            _check_cpython_parses(text, filename)
        return TransformOutput(text, [], [])
    stage1 = Stage1Memo(triggered, _star_torch_names(options, filename))
    if triggered and stage1.facts(text) is not None:
        running = stage1.candidates_in(text, triggered)
        if not running:
            return TransformOutput(text, [], [])
        while len(running) < len(triggered):
            rewrites: list[str] = []
            try:
                output = transform_unfiltered(
                    text, running, filename=filename, options=options, rewrites=rewrites,
                    stage1=stage1,
                )
            except Exception:
                break  # let the full run below report it, in its own words
            left_out = [c for c in triggered if c not in running]
            woken = {c for code in rewrites for c in stage1.candidates_in(code, left_out)}
            if not woken:
                return output
            running = [c for c in triggered if c in running or c in woken]
    return transform_unfiltered(text, codemods, filename=filename, options=options, stage1=stage1)


class Stage1Memo:
    """Stage 1's answers for each code version one file's transform meets (the original, its
    libcst rendering, every rewrite), so none is parsed by CPython twice.

    A version's ``ast`` is kept only until libcst is about to take over that version (its
    answers for the codemods that may run, ``codemods``, are then computed and the tree let
    go): the two trees of one file are never alive together longer than it takes to settle.
    """

    def __init__(self, codemods: Sequence[type[Codemod]] = (), star_torch_names: frozenset[str] = frozenset()) -> None:
        self._codemods = list(codemods)
        self._star_names = {part for name in star_torch_names for part in name.split(".")}
        """Every part of the torch names the file's star imports bind: possible last parts of a
        qualified name that the file need not spell (``Variable`` for ``V``)."""
        self._facts: dict[str, FileFacts | None] = {}
        self._answered: dict[str, dict[str, bool]] = {}
        """Code → codemod code → whether stage 1 found a candidate, as asked so far."""
        self._settled: dict[str, _Settled] = {}

    def facts(self, code: str) -> FileFacts | None:
        """Stage 1's facts of a version not settled yet (parsed on first use)."""
        if code not in self._facts:
            facts = self._facts[code] = parse_facts(code)
            if facts is not None:
                facts.names |= self._star_names
        return self._facts[code]

    def candidates_in(self, code: str, codemods: Sequence[type[Codemod]]) -> Sequence[type[Codemod]]:
        """The codemods of ``codemods`` stage 1 finds a candidate for in ``code`` (all of them
        when CPython cannot parse it)."""
        if code in self._settled:
            settled = self.settle(code, codemods)
            assert settled is not None
            return [c for c in codemods if c.code in settled.candidates]
        facts = self.facts(code)
        return codemods if facts is None else self._candidates(code, facts, codemods)

    def _candidates(self, code: str, facts: FileFacts, codemods: Sequence[type[Codemod]]) -> list[type[Codemod]]:
        """:func:`candidate_codemods` for ``code``, each codemod's condition evaluated once."""
        answered = self._answered.setdefault(code, {})
        for codemod in codemods:
            if codemod.code not in answered:
                answered[codemod.code] = bool(candidate_codemods(facts, [codemod]))
        return [c for c in codemods if answered[c.code]]

    def parsed(self, code: str) -> bool:
        """CPython has already parsed ``code`` without error."""
        return code in self._settled or self._facts.get(code) is not None

    def settle(self, code: str, codemods: Sequence[type[Codemod]] = ()) -> _Settled | None:
        """Compute what the memo's codemods and ``codemods`` will be asked about ``code`` and
        let its ``ast`` go; None when CPython cannot parse it."""
        wanted = {c.code: c for c in (*self._codemods, *codemods)}
        settled = self._settled.get(code)
        if settled is not None:
            if all(key in settled.sites for key in wanted):
                return settled
            wanted = {**{c.code: c for c in settled.codemods}, **wanted}  # asked about one more: parse again
        facts = self._facts.pop(code) if code in self._facts else parse_facts(code)
        if facts is None:
            self._facts[code] = None
            return None
        candidates = self._candidates(code, facts, list(wanted.values()))
        self._answered.pop(code, None)
        settled = _Settled(
            frozenset(c.code for c in candidates),
            # A codemod without a candidate runs only in the fallback run over every codemod:
            # it visits everything (and cannot report or change anything)
            {key: statements_with_sites(facts, c) if c in candidates else None for key, c in wanted.items()},
            facts.class_outlines,
            tuple(wanted.values()),
        )
        self._settled[code] = settled
        return settled


class _Settled(NamedTuple):
    """Stage 1's answers about one code version, kept after its ``ast`` is let go."""

    candidates: frozenset[str]
    """The codes of the codemods it was settled for that stage 1 finds a candidate for."""
    sites: dict[str, StatementSites | None]
    """Code → :func:`~torchfix_device.prefilter.candidates.statements_with_sites` of that codemod."""
    classes: dict[int, ClassOutline]
    """``FileFacts.class_outlines`` of it."""
    codemods: tuple[type[Codemod], ...]
    """The codemods it was settled for."""


def _token_pass(text: str, codemods: Sequence[type[Codemod]], *, options: RunOptions, filename: str | None) -> Repair | None:
    """None when CPython parses ``text``; else the token fixes of ``codemods``
    (:mod:`.token_pass`), after which it parses. Raises the syntax error left otherwise, at its
    place in ``text`` and saying why a token fix on its line was not made."""
    try:
        _check_cpython_parses(text, filename)
        return None
    except cst.ParserSyntaxError as exc:
        repair = token_repair(text, codemods, options)
        if repair is None or not repair.applied:
            if repair is not None:
                exc.hint = repair.hint(exc.raw_line)  # type: ignore[attr-defined]
            raise
    try:
        _check_cpython_parses(repair.text, filename)
    except cst.ParserSyntaxError as remaining:
        remaining.raw_column = repair.columns.original_column(remaining.raw_line, remaining.raw_column + 1) - 1
        remaining.hint = repair.hint(remaining.raw_line)  # type: ignore[attr-defined]
        raise
    return repair


def syntax_error(text: str, codemods: Sequence[CodemodRef | type[Codemod]], options: RunOptions | None = None) -> cst.ParserSyntaxError | None:
    """The syntax error a transform of ``text`` by ``codemods`` meets (after the token fixes
    they would make), or None when it parses."""
    codemods = load_codemods(codemods)
    try:
        _token_pass(text, active_codemods(text, codemods), options=options or DEFAULT_OPTIONS, filename=None)
    except cst.ParserSyntaxError as exc:
        return exc
    return None


@traversal.forgetting_children
def transform_unfiltered(
    text: str,
    codemods: Sequence[CodemodRef | type[Codemod]],
    *,
    filename: str | None = None,
    options: RunOptions | None = None,
    rewrites: list[str] | None = None,
    stage1: "Stage1Memo | None" = None,
) -> TransformOutput:
    """Apply ``codemods`` to ``text`` until the tree stops changing.

    Findings carry positions in ``text``. Raises ``libcst.ParserSyntaxError`` for code that does
    not parse and :class:`InternalError` when the result does not compile.

    With ``stage1`` (the memo :func:`transform_source` keeps), a codemod in a pass after the
    first runs only when stage 1 finds a candidate for it in the tree it would be given
    (otherwise it cannot change that tree: the same argument as for the first pass), and a
    codemod with a site function skips the top-level statements without a site.
    """
    codemods = load_codemods(codemods)
    options = options or DEFAULT_OPTIONS
    active = active_codemods(text, codemods, options, filename)
    if not active:
        return TransformOutput(text, [], [])
    body, tail = split_tail(text)
    if tail:  # a final bare \r, trailing form-feed lines: libcst cannot render them back
        inner = transform_unfiltered(
            body, codemods, filename=filename, options=options, rewrites=rewrites, stage1=stage1
        )
        return dataclasses.replace(inner, text=text if inner.text == body else inner.text + tail)
    if stage1 is None or not stage1.parsed(text):
        repair = _token_pass(text, active, options=options, filename=filename)
        if repair is not None:  # ``text`` did not parse; ``repair.text`` does
            again = transform_source if stage1 is not None else transform_unfiltered
            output = again(repair.text, codemods, filename=filename, options=options)
            return repair.merge(output)
    if stage1 is not None:
        stage1.settle(text, active)  # its ast goes before libcst's tree comes
    original = cst.parse_module(text)
    findings: set[Finding] = set()
    suppressed: set[Finding] = set()
    resolved: set[tuple[str, int, int]] = set()
    notes: list[str] = []
    shared = SharedWrapper(original)  # one wrapper per module version, the original's included
    # The code of the tree being transformed. For the original that is ``text``, which libcst
    # renders back byte for byte except in rare cases (a form feed starting a line): its own
    # rendering, needed to tell whether a rewrite changed anything, is made only once some
    # codemod did replace a node.
    current, current_code = original, text
    rendering: list[str] = []
    statement_codes: dict[int, tuple[cst.CSTNode, str]] = {}

    def code_of(module: cst.Module) -> str:
        code = traversal.module_code(module, statement_codes)
        if CHECK_FAST_NAMES:
            assert code == module.code, "a module rendered from its statements differs from libcst's rendering"
        return code

    def rendered() -> str:
        if not rendering:
            rendering.append(code_of(original))
        return rendering[0]

    configure = _codemod_configurer(text, options, stage1=stage1, filename=filename)

    def keep(codemod: Codemod) -> None:
        findings.update(codemod.findings)
        suppressed.update(codemod.suppressed_findings)
        notes.extend(codemod.checkpoint_notes)
        resolved.update(codemod.resolved)

    late = LateFixes(text, findings, resolved)  # fixes made on a rewritten tree

    for pass_number in range(MAX_PASSES):
        changed_in_pass = False
        for codemod_class in active:
            if pass_number and stage1 is not None and codemod_class not in stage1.candidates_in(current_code, active):
                continue  # no candidate in the tree it would get: it would change nothing
            reports_only = not codemod_class.may_change(options)
            try:
                if reports_only and current is not original and not CHECK_FAST_NAMES:
                    if pass_number == 0:  # it could not change the rewrite: only its findings
                        keep(_run_on_original(codemod_class, original, text, filename, options, shared, configure))
                    continue
                if pass_number == 0 and current is not original:
                    # findings from the file as it was; unchanged there, it runs on the rewrite next pass
                    on_original = _run_on_original(codemod_class, original, text, filename, options, shared, configure)
                    keep(on_original)
                    if not on_original.changed_tree:
                        continue
                codemod = engine_class(codemod_class)(CodemodContext(filename=filename), options, shared=shared)
                on_rewrite = current is not original
                configure(codemod, current_code, keeps_findings=pass_number == 0 and not on_rewrite, keeps_fixes=on_rewrite)
                result = codemod.transform_module(current)
                if pass_number == 0 and current is original:
                    keep(codemod)
            except RecursionError:
                raise  # a tree too deep for Python's recursion limit: the input's problem
            except Exception as exc:  # name the codemod in the bug report
                raise InternalError(
                    f"{codemod_class.code} ({codemod_class.name}) raised {type(exc).__name__}: {exc}; "
                    "file left unchanged — please report this bug"
                ) from exc
            before = rendered() if current is original and (codemod.changed_tree or CHECK_FAST_NAMES) else current_code
            result_code = code_of(result) if codemod.changed_tree or CHECK_FAST_NAMES else before
            if CHECK_FAST_NAMES and (reports_only or not codemod.changed_tree):
                assert result_code == before, f"{codemod_class.code} changed the code without a fix it may apply"
            if result_code != before:
                if on_rewrite:
                    late.keep(codemod.findings, codemod.resolved, before)
                current, current_code = result, result_code
                changed_in_pass = True
                if rewrites is not None:  # every tree a later codemod sees (for stage 1's check)
                    rewrites.append(result_code)
        if not changed_in_pass:
            break
    else:
        raise InternalError(f"codemods {', '.join(c.code for c in active)} did not reach a fixed point")
    if current is original or current_code == rendered():
        current_code = text
    elif rendered() != text:
        current_code = keep_untouched_lines(text, rendered(), current_code)
    if current_code != text:
        try:
            compile(current_code, filename or "<rewrite>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            if not _fails_as_well(text, exc):  # else the input's own error (a cell's late `from __future__`)
                raise InternalError(
                    f"rewrite by {', '.join(c.code for c in active)} does not compile "
                    f"(line {exc.lineno}: {exc.msg}); file left unchanged — please report this bug"
                ) from None
    findings = late.merged(findings)
    resolved.update(late.resolved)
    if resolved:  # review items whose code a fix of another codemod removed
        findings = {f for f in findings if f.fixed or (f.code, f.line, f.column) not in resolved}
    return TransformOutput(current_code, sorted(findings), notes, tuple(sorted(suppressed)))


def _fails_as_well(text: str, error: SyntaxError) -> bool:
    """The input itself fails to compile with the rewrite's error (a late ``from __future__``)."""
    try:
        compile(text, "<input>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc.msg == error.msg
    return False


def _run_on_original(
    codemod_class: type[Codemod],
    original: cst.Module,
    text: str,
    filename: str | None,
    options: RunOptions,
    shared: SharedWrapper,
    configure,
) -> Codemod:
    """``codemod_class`` run on the file's own tree, for findings with positions in the file as
    it was (when earlier codemods have already rewritten the tree it transforms)."""
    codemod = engine_class(codemod_class)(CodemodContext(filename=filename), options, shared=shared)
    configure(codemod, text)
    codemod.transform_module(original)
    return codemod


def _codemod_configurer(text: str, options: RunOptions, *, stage1: Stage1Memo | None = None, filename: str | None = None):
    """A function giving a codemod the run's settings, the code it is about to transform and
    that code's ``noqa`` comments. The comments are read from that code itself, since rewrites
    before it may have moved lines (an inserted ``device = ...``); comments move with their lines.

    With ``stage1``, a codemod also learns where each top-level statement of that code starts
    (for positions computed one statement at a time) and, when it has a stage-1 site function,
    which of them hold a site (it skips the others)."""
    cache: dict[str, Suppressions] = {}
    has_directives = may_hold_our_noqa(text)  # rewrites add no comments: the original's tell
    stars = options.star_imports.of(filename) if options.star_imports and filename is not None else None
    attributes = options.project_attributes.of(filename) if options.project_attributes else None
    foreign = ForeignReturns(attributes.functions) if attributes is not None and attributes.functions else None
    callers = ForeignCallers(attributes.callers, options.project_attributes) if attributes is not None and attributes.callers is not None else None

    def configure(codemod: Codemod, code: str, *, keeps_findings: bool = True, keeps_fixes: bool = False) -> None:
        if has_directives:
            if code not in cache:
                cache[code] = parse_suppressions(code)
            suppressions = cache[code]
        else:
            suppressions = NO_SUPPRESSIONS
        settled = stage1.settle(code, [type(codemod)]) if stage1 is not None else None
        codemod.configure(  # type: ignore[attr-defined]
            code,
            suppressions=suppressions,
            device_expression=options.device_expression,
            own_move_classes=options.own_move_classes_of(filename), cuda_taking_nothing=options.cuda_taking_nothing,
            known_classes=options.known_classes_of(filename),
            star_imports=stars,
            project_attributes=attributes,
            imported_by_none=filename is not None and filename in options.unimported,
            foreign_returns=foreign,
            foreign_callers=callers,
            keeps_findings=keeps_findings,
            keeps_fixes=keeps_fixes,
            sites=settled.sites[codemod.code] if settled is not None else None,
            classes=settled.classes if settled is not None else None,
        )

    return configure


def _check_cpython_parses(text: str, filename: str | None) -> None:
    """Parse with CPython's parser before libcst's: CPython refuses nesting deeper than it
    supports (200 brackets, its parser stack), while libcst's native parser overflows the C stack
    on such input and kills the whole process (a segfault on ``x = ((((...1))))`` 2000 deep).
    Code CPython cannot read (a ``TabError``, ``f() = 1``) is reported as the syntax error it is.

    Raises ``libcst.ParserSyntaxError`` or ``RecursionError``.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not our business
            compile(text, filename or "<source>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        error = cst.ParserSyntaxError(
            exc.msg, lines=text.splitlines(keepends=True) or [""], raw_line=exc.lineno or 1, raw_column=max((exc.offset or 1) - 1, 0)
        )
        error.from_cpython = True  # type: ignore[attr-defined]  # its place is CPython's already
        raise error from None
    except (RecursionError, MemoryError):  # "too complex", "parser stack overflowed"
        raise RecursionError("nested too deeply for CPython's parser") from None
    except ValueError as exc:  # e.g. NUL bytes (already refused when reading)
        raise cst.ParserSyntaxError(str(exc), lines=[""], raw_line=1, raw_column=0) from None


def parse_error_message(exc: cst.ParserSyntaxError, text: str) -> str:
    """``line N:C: syntax error: ...`` at the place CPython names (libcst's native parser can
    point a line late), saying what the line shows when it looks like Python 2 or uses
    ``async`` as a name (:mod:`torchfix_device.syntax.legacy`), and why a token fix on it was
    not made."""
    line, column, message = exc.raw_line, exc.raw_column + 1, exc.message
    if not getattr(exc, "from_cpython", False):
        try:
            ast.parse(text)
        except SyntaxError as py_exc:
            if py_exc.lineno:
                line, column, message = py_exc.lineno, py_exc.offset or 1, py_exc.msg
        except (ValueError, RecursionError, MemoryError):
            pass
    return legacy_syntax.describe(text, line, column, message, getattr(exc, "hint", ""))
