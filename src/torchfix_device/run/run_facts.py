"""The facts a run learns over all its files before it looks at any (:func:`project_facts`): the
runner (:mod:`torchfix_device.run.runner`) imports this module only for a run the cache does not
answer whole (:mod:`torchfix_device.run.run_memo`)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Mapping, Sequence

from torchfix_device.facts.import_graph import ImportGraph
from torchfix_device.facts.legacy_function_run import RunLegacyFunctions, scan_run
from torchfix_device.facts.legacy_functions import CODE as LEGACY_CODE, may_define
from torchfix_device.facts.project_attributes import (
    Imports, RunAttributes, class_attributes, resolved_imports, run_attributes, stored_from_outside,
)
from torchfix_device.facts.project_classes import (
    class_bases, class_names, classes_of_data, cuda_taking_nothing, imported_modules, subclassed_classes, subclasses_of,
    trees_kept,
)
from torchfix_device.facts.project_functions import module_functions
from torchfix_device.facts.project_placements import groups_on_cpu, places
from torchfix_device.facts.star_imports import MAX_MODULE_BYTES, Resolver, RunStars, may_hold_star_import, resolve_star_imports
from torchfix_device.files.safe_paths import read_regular
from torchfix_device.files.selection import MAX_FILE_BYTES, display_path, skip_reason
from torchfix_device.options import DEFAULT_OPTIONS, RunOptions

__all__ = ["LEGACY_CODE", "MAX_MODULE_BYTES", "project_facts", "unimported_files"]


def project_facts(
    files: Sequence[Path], roots: Sequence[Path], options: RunOptions = DEFAULT_OPTIONS, *, legacy: bool = False,
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]], frozenset[str], RunStars, RunLegacyFunctions, RunAttributes, frozenset[str]]:
    """What the codemods learn from every file of the run, each file read once: for each file,
    the classes that move themselves that it can reach by import and, where there are such
    classes, the other classes of the run it reaches (an instance of one does not move itself),
    and those of them whose every ``cuda()`` in the run takes no argument
    (:mod:`torchfix_device.facts.project_classes`); what the star imports bind
    (:mod:`torchfix_device.facts.star_imports`); and, with ``legacy`` (TFD017 is selected), the
    legacy autograd Functions and their uses (:mod:`torchfix_device.facts.legacy_function_run`;
    the files are read again only when there is one); what the attributes of the classes each
    file imports from the run hold (:mod:`torchfix_device.facts.project_attributes`), and whether its
    import group keeps its values on the CPU (:mod:`torchfix_device.facts.project_placements`); and the files
    that no file of the run imports (:func:`unimported_files`). Unreadable files are left out (the run
    reports them).

    Python's cyclic garbage collector is paused meanwhile: the passes build and drop a parse tree
    per file (millions of acyclic objects), and the collector went over everything alive again
    and again while they were built: about half of the time on the torch tree."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with trees_kept():  # the passes below over every file parse each once
            return _gathered(files, roots, options, legacy=legacy)
    finally:
        if collecting:
            gc.enable()


def _gathered(
    files: Sequence[Path], roots: Sequence[Path], options: RunOptions, *, legacy: bool,
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]], frozenset[str], RunStars, RunLegacyFunctions, RunAttributes, frozenset[str]]:
    resolver = Resolver(roots)
    defined: dict[Path, frozenset[str]] = {}
    programs: dict[Path, bytes] = {}
    starred: dict[Path, bytes] = {}
    defining: dict[Path, bytes] = {}
    for path in files:
        if path.suffix not in (".py", ".ipynb"):
            continue
        try:
            data = read_regular(path).data  # never a FIFO or a device: a read that never ends
        except OSError:
            continue
        if path.suffix == ".ipynb":  # its cells as one program (``from main import *`` in a cell)
            program = _notebook_program(data) if may_hold_star_import(data) or b"import" in data else None
            if program is not None:
                programs[path] = program.encode("utf-8")
                if may_hold_star_import(data):
                    starred[path] = programs[path]
            continue
        programs[path] = data
        classes = classes_of_data(data)
        if classes:
            defined[resolver.absolute(path)] = classes
        if may_hold_star_import(data):
            starred[path] = data
        if legacy and may_define(data):
            defining[path] = data
    stars = resolve_star_imports(files, starred, roots) if starred else RunStars({})
    absolute = {resolver.absolute(path): data for path, data in programs.items()}
    imports: dict[Path, "list[tuple[str, int]] | None"] = {}
    placing: set[Path] = set()
    bases: dict[Path, dict[str, frozenset[str]]] = {}
    taking: dict[Path, frozenset[str]] = {}
    for path, data in absolute.items():  # one parse of each file serves them all (``parsed`` keeps the last 64)
        imports[path] = imported_modules(data)
        if places(data):
            placing.add(path)
        if b"class " in data:
            bases[path] = class_bases(data)
        if path in defined:
            taking[path] = cuda_taking_nothing(data) & defined[path]
        if b"class " in data and b"self." in data:  # asked again by the later passes: the tree is at hand now
            class_attributes(data)
            stored_from_outside(data)
        if b"def " in data or b"class " in data or b"import" in data:
            module_functions(data)
    built: list[ImportGraph] = []

    def graph() -> ImportGraph:  # built once, when a question needs it
        if not built:
            built.append(ImportGraph(imports, resolver.module_files, resolver.importable))
        return built[0]

    functions = RunLegacyFunctions()
    if defining:
        limit = options.max_file_bytes or MAX_FILE_BYTES

        def will_skip(path: Path, text: str) -> bool:
            return skip_reason(text, options) is not None or len(text.encode("utf-8", "replace")) > limit

        functions = scan_run(files, defining, _read_or_none, will_skip=will_skip, shown=display_path, reach=graph().reach, notebook_code=_notebook_program)
    shown = {resolver.absolute(path): str(path) for path in programs}
    resolved = resolved_imports(imports, resolver.module_files)
    attributes = run_attributes(
        absolute, shown, resolved, resolver.importable, groups_on_cpu(absolute, resolved, resolver.importable, placing),
        subclassed_classes(bases, resolved),
    )
    unimported = unimported_files(absolute, shown, resolved, resolver)
    if not defined:
        return {}, {}, frozenset(), stars, functions, attributes, unimported

    grown, reached = subclasses_of(defined, absolute, graph().reach)
    everything = graph().reach({path: class_names(data) for path, data in absolute.items()})
    own = {str(path): reached[resolver.absolute(path)] for path in programs}
    known = {str(path): everything[resolver.absolute(path)] - reached[resolver.absolute(path)] for path in programs}
    own = {name: classes for name, classes in own.items() if classes}
    bare = _taking_nothing(grown, taking)
    return own, {name: c for name, c in known.items() if c}, bare, stars, functions, attributes, unimported


def _taking_nothing(grown: Mapping[Path, frozenset[str]], taking: Mapping[Path, frozenset[str]]) -> frozenset[str]:
    """The names of the run's classes that move themselves (``grown``, subclasses included) every
    class of which has a ``cuda(self)`` of its own taking nothing (``taking``, by file:
    :func:`~torchfix_device.facts.project_classes.cuda_taking_nothing`); a subclass that inherits
    its move, or a class of the same name elsewhere that takes more, keeps the name out."""
    other = {name for path, classes in grown.items() for name in classes - taking.get(path, frozenset())}
    return frozenset().union(*taking.values()) - other


def unimported_files(absolute: dict[Path, bytes], shown: dict[Path, str], resolved: Imports, resolver: Resolver) -> frozenset[str]:
    """The files of ``absolute`` (the run's programs, notebooks' included) that no other file of the
    run imports (``resolved``: each file's imports), nor may import (a file importing dynamically
    may import any file it can reach). The run is taken as the project, as for the classes that
    move themselves: a file left out of it is not seen. (Whether a file was named or found in a
    folder named changes nothing: a warm run finds its cached results whichever way the files are
    named.)"""
    imported: set[Path] = set()
    for path, found in resolved.items():
        if found is None:
            can = resolver.importable(path)
            imported.update(other for other in absolute if other != path and can(other))
        else:
            imported.update(target for _, _, target in found)
    return frozenset(shown[path] for path in absolute if path not in imported)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return read_regular(path).data
    except OSError:
        return None


def _notebook_program(data: bytes) -> str | None:
    from torchfix_device.run import notebook  # libcst: only for a notebook that may spell a name asked about

    return notebook.program_of(data)
