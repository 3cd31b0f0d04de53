"""Legacy autograd Functions over the files of a run (:func:`scan_run`), and what TFD017
decides in one file (:func:`decide`): a class is migrated, and every ``F()(...)`` call of it
rewritten, only when no use of its name anywhere in the run stands in the way (see
:mod:`torchfix_device.facts.legacy_functions`). A file calling a class of another file asks
:meth:`RunLegacyFunctions.decision`, which answers as the class's own file decides.
"""

from __future__ import annotations

import ast
import re
import hashlib
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from torchfix_device.facts.legacy_function_uses import Use, uses
from torchfix_device.facts.legacy_functions import CODE, SUPPRESSED_CLASS, LegacyClass, legacy_classes, may_define
from torchfix_device.facts.project_classes import parsed


@dataclass(frozen=True)
class RunClass:
    name: str
    path: str
    """The file defining it (absolute, normalised)."""
    shown: str
    line: int
    problem: str | None
    state: tuple[tuple[str, str | None], ...] = ()
    """:attr:`~torchfix_device.facts.legacy_functions.LegacyClass.state`."""


@dataclass(frozen=True)
class RunUse:
    name: str
    path: str
    shown: str
    line: int
    why: str
    reaches: frozenset[str] | None = None
    """The classes of that name its file can reach by import (:func:`key`); None: any."""


def key(cls: RunClass) -> str:
    return f"{cls.name}@{cls.path}"


@dataclass(frozen=True)
class RunLegacyFunctions:
    """Over every file of a run: the legacy Function classes and the uses of their names that
    cannot be rewritten (:func:`scan_run`)."""

    classes: tuple[RunClass, ...] = ()
    blocked: tuple[RunUse, ...] = ()
    digest: str = ""
    reach: Mapping[str, frozenset[str]] | None = field(default=None, hash=False, compare=False)
    """Each file (absolute, normalised) → the classes it can reach by import (:func:`key`): a
    class concerns only the files that can reach it, so that one run over several projects
    decides as one run per project does; None: every file reaches every class."""
    conflicting: frozenset[str] = frozenset()
    """Classes some file can reach beside another of the same name (its calls are ambiguous)."""

    def __bool__(self) -> bool:
        return bool(self.classes)

    def trigger_words(self, text: str) -> list[str]:
        """``Function`` when ``text`` spells the name of one of the run's legacy classes: a file
        calling one (``Square()(x)``) need not spell TFD017's trigger itself."""
        return ["Function"] if any(c.name in text for c in self.classes) else []

    def named(self, name: str) -> list[RunClass]:
        return [c for c in self.classes if c.name == name]

    def _concerns(self, use: RunUse, cls_key: str) -> bool:
        return use.reaches is None or cls_key in use.reaches

    def blocked_elsewhere(self, name: str, here: str | None) -> list[RunUse]:
        """The uses of ``name`` outside the file ``here`` that cannot be rewritten, in files that
        can reach ``here``'s class."""
        mine = _normal(here) if here else None
        return [u for u in self.blocked if u.name == name and u.path != mine and self._concerns(u, f"{name}@{mine}")]

    def elsewhere(self, name: str, here: str | None) -> list[RunClass]:
        """Other files' legacy classes of that name that some file can reach beside ``here``'s
        (two make its calls ambiguous)."""
        mine = _normal(here) if here else None
        if self.reach is not None and f"{name}@{mine}" not in self.conflicting:
            return []
        return [c for c in self.named(name) if c.path != mine]

    def decision(self, name: str, module: str, here: str | None = None) -> tuple[RunClass | None, str | None]:
        """For a call ``<module>.<name>()(...)`` in another file (``here``) than the class's: the
        class it calls (None when it is none of the run's it can reach) and why it cannot be
        rewritten (None: rewrite it; :data:`SUPPRESSED_CLASS`: leave it alone, quietly)."""
        reached = self.reach.get(_normal(here)) if self.reach is not None and here else None
        candidates = [c for c in self.named(name) if module_matches(module, c.path) and (reached is None or key(c) in reached)]
        if not candidates:
            return None, None
        if len(candidates) > 1 or any(key(c) in self.conflicting for c in candidates) or (self.reach is None and len(self.named(name)) > 1):
            return candidates[0], f"several files of the run define a legacy `{name}`"
        found = candidates[0]
        if found.problem is not None:
            return found, f"the class ({found.shown}:{found.line}) is left for review: {found.problem}"
        blocked = [u for u in self.blocked if u.name == name and self._concerns(u, key(found))]
        if any(u.why == SUPPRESSED_CLASS for u in blocked):
            return found, SUPPRESSED_CLASS
        if blocked:
            return found, blocked_reason(name, blocked)
        return found, None


def blocked_reason(name: str, blocked: Sequence[RunUse]) -> str:
    first = blocked[0]
    more = f" (and {len(blocked) - 1} more)" if len(blocked) > 1 else ""
    return f"`{name}` is used at {first.shown}:{first.line}, where {first.why}{more}, which `apply` cannot replace"


def module_matches(module: str, path: str) -> bool:
    """Whether the module spelt in an import (``models.functions``, ``.functions``) may be the
    file ``path`` (its trailing folders and name)."""
    parts = [p for p in module.split(".") if p]
    if not parts:
        return True  # `from . import F`: the package's own __init__ or a sibling
    file = Path(path)
    names = list(file.with_suffix("").parts)
    if file.name == "__init__.py":
        names = names[:-1]
    return names[-len(parts):] == parts


def _normal(path: str | os.PathLike) -> str:
    return os.path.normpath(os.path.abspath(path))


def scan_run(
    files: Sequence[Path], first: dict[Path, bytes], read: Callable[[Path], bytes | None], *,
    will_skip: Callable[[Path, str], bool] = lambda path, text: False, shown: Callable[[Path], str] = str,
    reach: "Callable[[Mapping[Path, frozenset[str]]], Mapping[Path, frozenset[str]]] | None" = None,
    notebook_code: "Callable[[bytes], str | None] | None" = None,
) -> RunLegacyFunctions:
    """:class:`RunLegacyFunctions` of the run's ``files``. ``first``: the bytes of the files that
    may define a legacy class (:func:`may_define`, tested by the caller as it reads every file
    once); only when one does are the others read again (``read``: None for a file that cannot
    be). ``will_skip(path, text)``: the run will not rewrite the file (``skip-file``,
    ``@generated``, over the size limit): a use there blocks, and a class there is left alone.
    ``reach(defined)``: for each file, which of ``defined``'s names (file → class keys) it can
    reach by import (:func:`~torchfix_device.facts.project_classes.reachable_classes`); None:
    every file reaches every class. ``notebook_code(data)``: the code of a notebook's cells (None
    where they cannot be read): a notebook whose code spells no class blocks none (its outputs,
    a base64 image, may spell anything)."""
    from torchfix_device.syntax.suppressions import may_hold_directives, parse_suppressions

    classes: list[RunClass] = []
    skipped: set[str] = set()
    for path, data in first.items():
        text = data.decode("utf-8", "replace")
        if path.suffix != ".py" or not may_define(text):
            continue
        tree = parsed(data)  # the run-level facts' tree of the file (kept while they are gathered)
        if tree is None:
            continue
        if will_skip(path, text):
            skipped.add(_normal(path))
        for found in legacy_classes(tree):
            problem = "its file is not rewritten in this run" if _normal(path) in skipped else found.problem
            classes.append(RunClass(found.name, _normal(path), shown(path), found.line, problem, found.state))
    if not classes:
        return RunLegacyFunctions()
    names = {c.name for c in classes}
    reached: dict[str, frozenset[str]] | None = None
    conflicting: set[str] = set()
    if reach is not None:
        defined: dict[Path, set[str]] = defaultdict(set)
        for c in classes:
            defined[Path(c.path)].add(key(c))
        reached = {str(path): keys for path, keys in reach({p: frozenset(k) for p, k in defined.items()}).items()}
        for keys in reached.values():
            for name in names:
                same = [k for k in keys if k.partition("@")[0] == name]
                if len(same) > 1:
                    conflicting.update(same)
    blocked: list[RunUse] = []
    for path in files:
        data = first.get(path)
        data = read(path) if data is None else data
        text = data.decode("utf-8", "replace") if data is not None else None
        spelt = sorted(n for n in names if text is not None and n in text)
        if spelt and path.suffix == ".ipynb" and notebook_code is not None and data is not None:
            code = notebook_code(data)
            words = None if code is None else set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
            spelt = spelt if words is None else [n for n in spelt if n in words]
        if text is None or not spelt:
            continue
        where = _normal(path)
        mine = reached.get(where, frozenset()) if reached is not None else None

        def block(name: str, line: int, why: str) -> None:
            concerned = None if mine is None else frozenset(k for k in mine if k.partition("@")[0] == name)
            blocked.append(RunUse(name, where, shown(path), line, why, concerned))

        if where in skipped or path.suffix != ".py" or will_skip(path, text):
            for name in spelt:
                block(name, 1, "the file is not rewritten in this run" if path.suffix == ".py" else "a notebook spells it")
            continue
        tree = parsed(data)
        if tree is None:
            for name in spelt:
                block(name, 1, "the file cannot be parsed")
            continue
        own = legacy_classes(tree) if may_define(text) else []
        suppressions = parse_suppressions(text) if may_hold_directives(text) else None
        states = {
            n: next(iter(same)).state if len(same) == 1 else None for n in spelt
            for same in [{c for c in classes if c.name == n and (mine is None or key(c) in mine)}]
        }
        for use in uses(tree, states, own):
            if not use.call:
                block(use.name, use.line, use.why)
            elif suppressions is not None and suppressions.suppresses(use.line, CODE):
                block(use.name, use.line, f"`# noqa` suppresses {CODE}")
        if suppressions is not None:
            for cls in own:
                if suppressions.suppresses(cls.line, CODE):
                    block(cls.name, cls.line, SUPPRESSED_CLASS)
    frozen = None if reached is None else {k: v for k, v in reached.items() if v}
    digest = hashlib.sha256(repr((
        sorted(classes, key=repr), sorted(blocked, key=repr), sorted((k, sorted(v)) for k, v in (frozen or {}).items()), sorted(conflicting),
    )).encode("utf-8")).hexdigest()
    return RunLegacyFunctions(tuple(classes), tuple(blocked), digest, frozen, frozenset(conflicting))


@dataclass
class FileDecisions:
    """What TFD017 does in one file (:func:`decide`)."""

    classes: dict[str, LegacyClass] = field(default_factory=dict)
    """The file's own top-level legacy classes by name."""
    reasons: dict[str, str | None] = field(default_factory=dict)
    """Class name → why it is not migrated (None: migrate it; :data:`SUPPRESSED_CLASS`: its
    finding is suppressed, and its calls are left alone quietly)."""
    nested: list[LegacyClass] = field(default_factory=list)


def decide(tree: ast.Module, run: RunLegacyFunctions | None, here: str | None, suppressed) -> FileDecisions:  # noqa: ANN001
    """The file's decisions: ``suppressed(line)`` tells a ``# noqa`` for TFD017 on a line."""
    found = legacy_classes(tree)
    decisions = FileDecisions()
    decisions.nested = [c for c in found if not c.top_level]
    top = [c for c in found if c.top_level]
    decisions.classes = {c.name: c for c in top}
    by_name: dict[str, list[Use]] = defaultdict(list)
    for use in uses(tree, {n: c.state for n, c in decisions.classes.items()}, top):
        by_name[use.name].append(use)
    for name, cls in decisions.classes.items():
        reason = SUPPRESSED_CLASS if suppressed(cls.line) else cls.problem
        if reason is None and sum(1 for c in top if c.name == name) > 1:
            reason = f"the file defines `{name}` twice"
        if reason is None and run is not None and run.elsewhere(name, here):
            other = run.elsewhere(name, here)[0]
            reason = f"{other.shown} defines a legacy `{name}` too: calls cannot be told apart"
        blocked_here = [u for u in by_name[name] if not u.call]
        if reason is None and blocked_here:
            first = blocked_here[0]
            more = f" (and {len(blocked_here) - 1} more)" if len(blocked_here) > 1 else ""
            reason = f"`{name}` is used at line {first.line}, where {first.why}{more}, which `apply` cannot replace"
        suppressed_calls = [u for u in by_name[name] if u.call and suppressed(u.line)]
        if reason is None and suppressed_calls:
            reason = f"`# noqa` keeps the call at line {suppressed_calls[0].line} as it is"
        if reason is None and run is not None:
            elsewhere = run.blocked_elsewhere(name, here)
            if elsewhere:
                reason = blocked_reason(name, elsewhere)
        decisions.reasons[name] = reason
    return decisions
