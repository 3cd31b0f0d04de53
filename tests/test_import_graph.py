"""The import graph answers what a walk from each file answers (``facts/import_graph.py``): for
random runs (cycles, files importing themselves, dynamic importers, modules outside the run,
classes defined outside the graph), the classes each file reaches are those the plain walk finds."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from hypothesis import given, settings, strategies as st

from torchfix_device.facts.import_graph import ImportGraph

CLASSES = ("A", "B", "C", "D", "E")


def _walk(
    defined: Mapping[Path, frozenset[str]], imports: Mapping[Path, "list[tuple[str, int]] | None"],
    resolve: Callable[[str, int, Path], list[Path]], importable: Callable[[Path], Callable[[Path], bool]],
) -> dict[Path, frozenset[str]]:
    """The plain rule, one walk per file (what the run did before the graph)."""
    edges = {
        path: {t for spelt, level in modules for t in resolve(spelt, level, path) if t != path}
        for path, modules in imports.items() if modules is not None
    }

    def anything(importer: Path) -> frozenset[str]:
        can = importable(importer)
        return frozenset(c for path, classes in defined.items() if path == importer or can(path) for c in classes)

    reached = {}
    for start, modules in imports.items():
        if modules is None:
            reached[start] = anything(start)
            continue
        seen, stack, found = {start}, [start], set(defined.get(start, ()))
        while stack:
            here = stack.pop()
            if here != start and imports.get(here, ()) is None:
                found |= anything(here)
                continue
            for target in edges.get(here, ()):
                if target not in seen:
                    seen.add(target)
                    found.update(defined.get(target, ()))
                    stack.append(target)
        reached[start] = frozenset(found)
    return reached


@st.composite
def runs(draw: st.DrawFn) -> tuple:
    count = draw(st.integers(1, 9))
    files = [Path(f"/p/m{i}.py") for i in range(count)]
    outside = [Path(f"/q/o{i}.py") for i in range(draw(st.integers(0, 2)))]
    every = files + outside
    imports = {}
    for path in files:
        if draw(st.integers(0, 5)) == 0:
            imports[path] = None
        else:
            imports[path] = [(f"x{j}", 0) for j in draw(st.lists(st.integers(0, len(every) - 1), max_size=4))]
    defined = {
        path: frozenset(draw(st.sets(st.sampled_from(CLASSES), min_size=1, max_size=3)))
        for path in every if draw(st.booleans())
    }
    can = {(a, b): draw(st.booleans()) for a in files for b in every}
    return files, every, imports, defined, can


@settings(max_examples=300, deadline=None)
@given(runs())
def test_the_graph_reaches_what_a_walk_from_each_file_reaches(run: tuple) -> None:
    files, every, imports, defined, can = run

    def resolve(spelt: str, level: int, importer: Path) -> list[Path]:
        return [every[int(spelt[1:])]]

    def importable(importer: Path) -> Callable[[Path], bool]:
        return lambda path: can[(importer, path)]

    graph = ImportGraph(imports, resolve, importable)
    assert graph.reach(defined) == _walk(defined, imports, resolve, importable)
    fewer = {path: classes - {"A"} for path, classes in defined.items()}
    assert graph.reach(fewer) == _walk(fewer, imports, resolve, importable)  # one graph, several questions
