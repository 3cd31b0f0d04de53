"""Which files of the run may put a value on a device, and which import groups put none: a
run-level fact, read with CPython's ``ast`` by the runner before any file is transformed.

A file *places* where its code (as written, or once migrated) may put a value anywhere but the
CPU: a ``.cuda`` (not ``torch.cuda.is_available()``, the seeding and the counting calls), a
``.to(...)`` that names more than a dtype or ``"cpu"``, a ``device``/``map_location`` keyword
that names more than the CPU (``map_location=lambda storage, loc: storage`` keeps the CPU),
``torch.device(...)`` of anything but ``"cpu"``, ``set_default_tensor_type``/``set_default_device``,
``DataParallel``, an import from ``torch.cuda``, or a string naming ``cuda`` (:func:`names_cuda`); a
type an ``isinstance`` test names (``torch.cuda.LongTensor``) compares, and places nothing. A plain
``torch.load(path)`` does not count: that is the load TFD005 gives a location. A file without
any of these words (``cuda``, ``.to(``, ``device``, ``DataParallel``, ``set_default``,
``map_location``) places nothing, whatever its syntax (Python 2 included); a file that holds one
and that ``ast`` cannot read may place.

An *import group* is a set of files of the run connected by their imports, either way and
through each other (a script, the modules it imports, the server that imports the script). The
group *stays on the CPU* where it holds more than one file (of a lone file the run shows none of
the program that uses what it loads: a caller elsewhere may move the rest), none of its files places, none imports dynamically, and none
imports a module of the project that the run left out (a file found next to it or under the
run's folders but not named in the run): then every value its code makes is on the CPU, and a
checkpoint loaded there belongs on the CPU too (``map_location="cpu"``, TFD005), whatever
device it was saved from. A whole pickled object brings its class with it, from any module the
script can import by name: so no file of the run in the script's folder or below it may place
either (InferSent's ``demo.ipynb`` unpickles an encoder whose ``models.py`` moves its batches).
Modules outside the project (the standard library, installed packages) put none of its values
anywhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable, Mapping

from torchfix_device.facts.project_classes import parsed

WORDS = (b"cuda", b".to(", b"device", b"DataParallel", b"set_default", b"map_location")
"""A file holding none of these places nothing."""
NOT_PLACING_CUDA = frozenset({"is_available", "manual_seed", "manual_seed_all", "device_count", "synchronize", "empty_cache"})
"""``torch.cuda.X`` that put no value anywhere (also :mod:`.cpu_paths`' placements, one file in libcst)."""
PLACING_KEYWORDS = frozenset({"device", "map_location"})
PLACING_NAMES = frozenset({"set_default_tensor_type", "set_default_device", "DataParallel", "DistributedDataParallel"})
DTYPE_KEYWORDS = frozenset({"dtype", "non_blocking", "copy"})


def _places(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        if node.attr == "cuda":
            return True  # not ``torch.cuda.is_available()`` and the like: see _harmless_cuda
        return node.attr in PLACING_NAMES
    if isinstance(node, ast.Name):
        return node.id in PLACING_NAMES
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "to":
            return not _dtype_or_cpu_only(node)
        if node.func.attr == "device" and not _cpu_only(node):
            return True
    if isinstance(node, ast.keyword) and node.arg in PLACING_KEYWORDS:
        return not _names_the_cpu(node.value) and not _a_value_device(node.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return names_cuda(node.value)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        module = getattr(node, "module", None) or ""
        return "cuda" in module.split(".") or any("cuda" in alias.name.split(".") for alias in node.names)
    return False


def names_cuda(text: str) -> bool:
    """A string that may name a CUDA device or type: ``"cuda"``, ``"cuda:1"``, the ``"cuda:"`` of
    ``f"cuda:{gpu}"``, ``"torch.cuda.FloatTensor"`` (not a docstring's "the non-cuda variant")."""
    return re.fullmatch(r"\s*cuda(:\d*)?\s*", text) is not None or "torch.cuda." in text


def _dtype_or_cpu_only(call: ast.Call) -> bool:
    """``x.to(torch.float32)``, ``x.to("cpu")``, ``x.to(dtype=...)``: no device but the CPU."""
    if not call.args and not call.keywords:
        return False
    for arg in call.args:
        if isinstance(arg, ast.Starred) or not (_names_the_cpu(arg) or _a_dtype(arg)):
            return False
    return all(k.arg in DTYPE_KEYWORDS for k in call.keywords)


def _a_dtype(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "torch" \
        and expr.attr not in ("device", "cuda")


def _cpu_only(call: ast.Call) -> bool:
    return len(call.args) == 1 and not call.keywords and _names_the_cpu(call.args[0])


def _names_the_cpu(expr: ast.AST) -> bool:
    """``"cpu"``, ``torch.device("cpu")``, ``lambda storage, loc: storage``."""
    if isinstance(expr, ast.Constant):
        return expr.value == "cpu"
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "device":
        return _cpu_only(expr)
    if isinstance(expr, ast.Lambda):
        params = expr.args.posonlyargs + expr.args.args
        return bool(params) and isinstance(expr.body, ast.Name) and expr.body.id == params[0].arg
    return False


def _a_value_device(expr: ast.AST) -> bool:
    """``x.device``, ``self.w.device``: a value's own device, which follows a tensor already
    placed (never ``torch.device``)."""
    return isinstance(expr, ast.Attribute) and expr.attr == "device" and not (isinstance(expr.value, ast.Name) and expr.value.id == "torch")


def places(data: bytes) -> bool:
    """Whether a file's code may put a value on a device (see the module docstring)."""
    if not any(word in data for word in WORDS):
        return False
    tree = parsed(data)
    if tree is None:
        return True
    harmless = _harmless_cuda(tree)
    return any(_places(node) and id(node) not in harmless for node in ast.walk(tree))


def _harmless_cuda(tree: ast.Module) -> set[int]:
    """The ``.cuda`` attributes of ``torch.cuda.is_available()`` and the other calls that put no
    value anywhere, and of the types an ``isinstance`` test names (``torch.cuda.LongTensor``)."""
    harmless = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in NOT_PLACING_CUDA \
                and isinstance(node.value, ast.Attribute) and node.value.attr == "cuda":
            harmless.add(id(node.value))
        elif is_type_test(node):
            harmless.update(id(n) for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute) and n.attr == "cuda")  # type: ignore[attr-defined]
    return harmless


def is_type_test(node: ast.AST) -> bool:
    """``isinstance(x, types)``: the types it names are only compared with."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
        and len(node.args) == 2 and not node.keywords


def groups_on_cpu(
    programs: Mapping[Path, bytes], resolved: Mapping[Path, "list[tuple[str, int, Path]] | None"],
    importable: Callable[[Path], Callable[[Path], bool]], placing: "set[Path] | None" = None,
) -> set[Path]:
    """The files of ``programs`` whose import group stays on the CPU (see the module docstring;
    ``resolved``: each file's imports resolved to the files they may be, None where it imports
    dynamically: then it may import any file ``importable`` says it can, and it is doubtful;
    ``placing``: the files that :func:`places`, found here when not given)."""
    edges: dict[Path, set[Path]] = {path: set() for path in programs}
    placing = {path for path, data in programs.items() if places(data)} if placing is None else placing
    doubtful = set(placing)
    for path, found in resolved.items():
        if path not in edges:
            continue
        if found is None:
            doubtful.add(path)
            can = importable(path)
            found = [("", 0, other) for other in programs if other != path and can(other)]
        for _, _, target in found:
            if target in edges:
                edges[path].add(target)
                edges[target].add(path)
            else:
                doubtful.add(path)  # a module of the project the run left out
    staying: set[Path] = set()
    seen: set[Path] = set()
    for start in edges:
        if start in seen:
            continue
        group, stack = {start}, [start]
        while stack:
            for other in edges[stack.pop()]:
                if other not in group:
                    group.add(other)
                    stack.append(other)
        seen |= group
        if len(group) > 1 and not group & doubtful:  # a lone file: the run shows none of its program
            staying |= group
    # A pickled object's class is imported by the unpickler, from the script's folder or below.
    placing_folders = {folder for path in placing for folder in path.parents}
    return {path for path in staying if path.parent not in placing_folders}
