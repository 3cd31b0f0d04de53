"""The run's import graph: which files of a run each file may import, and so which classes each
can reach (:func:`~torchfix_device.facts.project_classes.reachable_classes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Mapping

Resolve = Callable[[str, int, Path], "list[Path]"]
"""``(module spelt, relative level, importing file)`` → the files that module may be."""


class ImportGraph:
    """The run's files and the files each one's imports may be, built once for the several
    questions of a run (:meth:`reach`, asked once per round of
    :func:`~torchfix_device.facts.project_classes.subclasses_of`). Files importing each other in a
    cycle reach the same classes, so the graph is cut into its strongly connected parts, and each
    part's answer is its own classes and the answers of the parts it imports, sinks first: every
    file and import is looked at once, where a walk from each file looked at the whole graph
    again (minutes on the torch tree)."""

    def __init__(
        self, imports: Mapping[Path, "list[tuple[str, int]] | None"], resolve: Resolve,
        importable: Callable[[Path], Callable[[Path], bool]],
    ) -> None:
        self.imports, self.importable = imports, importable
        self.nodes: list[Path] = list(imports)
        self.index = index = {path: number for number, path in enumerate(self.nodes)}
        self.dynamic = {index[path] for path, modules in imports.items() if modules is None}
        self.edges: list[set[int]] = [set() for _ in self.nodes]
        for path, modules in imports.items():
            for spelt, level in modules or ():
                for target in resolve(spelt, level, path):
                    if target != path:
                        if target not in index:
                            index[target] = len(self.nodes)
                            self.nodes.append(target)
                            self.edges.append(set())
                        self.edges[index[path]].add(index[target])
        self.parts = _strong_parts(self.edges)
        self.part_of = [0] * len(self.nodes)
        for number, members in enumerate(self.parts):
            for node in members:
                self.part_of[node] = number

    def reach(self, defined: Mapping[Path, frozenset[str]]) -> dict[Path, frozenset[str]]:
        """For each file of the run, the classes of ``defined`` it can reach (see
        :func:`~torchfix_device.facts.project_classes.reachable_classes`), as sets of bits until the end (one per name)."""
        bit: dict[str, int] = {}
        for classes in defined.values():
            for name in classes:
                bit.setdefault(name, 1 << len(bit))
        own = [0] * len(self.nodes)
        where, part_of = self.index, self.part_of
        outside_paths: list[tuple[Path, int]] = []  # files the graph does not hold: a dynamic importer may reach them
        for path, classes in defined.items():
            value = sum(bit[name] for name in classes)
            if path in where:
                own[where[path]] |= value
            else:
                outside_paths.append((path, value))
        value_of = [0] * len(self.parts)
        for number, members in enumerate(self.parts):  # sinks first
            if len(members) == 1 and members[0] in self.dynamic:
                value_of[number] = self._anything(members[0], own, outside_paths)
                continue
            value = 0
            for node in members:
                value |= own[node]
                for target in self.edges[node]:
                    if part_of[target] != number:
                        value |= value_of[part_of[target]]
            value_of[number] = value
        names = {value: name for name, value in bit.items()}
        decoded: dict[int, frozenset[str]] = {}
        reached: dict[Path, frozenset[str]] = {}
        for path in self.imports:
            value = value_of[part_of[where[path]]]
            if value not in decoded:
                decoded[value] = frozenset(names[one] for one in _bits(value))
            reached[path] = decoded[value]
        return reached

    def _anything(self, node: int, own: list[int], outside: list[tuple[Path, int]]) -> int:
        """The classes of every file a dynamic importer could import, its own too."""
        importer = self.nodes[node]
        can = self.importable(importer)
        value = own[node]
        for other, classes in enumerate(own):
            if classes and other != node and can(self.nodes[other]):
                value |= classes
        for path, classes in outside:
            if can(path):
                value |= classes
        return value


def _bits(value: int) -> Iterator[int]:
    while value:
        low = value & -value
        yield low
        value ^= low


def _strong_parts(edges: list[set[int]]) -> list[list[int]]:
    """The strongly connected parts of the graph (Tarjan's, without recursion), each listed after
    every part it has an edge to."""
    counter, low, number = 0, [-1] * len(edges), [-1] * len(edges)
    on_stack, stack, parts = [False] * len(edges), [], []
    for root in range(len(edges)):
        if number[root] != -1:
            continue
        work = [(root, iter(edges[root]))]
        number[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, children = work[-1]
            for child in children:
                if number[child] == -1:
                    number[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack[child] = True
                    work.append((child, iter(edges[child])))
                    break
                if on_stack[child]:
                    low[node] = min(low[node], number[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == number[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        on_stack[member] = False
                        part.append(member)
                        if member == node:
                            break
                    parts.append(part)
    return parts
