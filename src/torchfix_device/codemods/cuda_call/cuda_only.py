"""TFD001's evidence that a ``.cuda()`` serves a CUDA-only library.

A block that imports cupy, pycuda, pynvrtc or numba's CUDA and calls ``.cuda()`` among its own
statements is setting CUDA up for that library (a kernel compiled with NVRTC, a CuPy array
sharing a tensor's memory): no other device can run the block, so there is nothing
device-agnostic to write. Such calls are left as they are and reported.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

CUDA_ONLY_LIBRARIES = ("cupy", "cupyx", "pycuda", "pynvrtc", "numba.cuda")


def cuda_only_calls(module: cst.Module) -> dict[int, str]:
    """``id`` of each ``.cuda()`` call among the statements of a block that imports a CUDA-only
    library → that library's name. Nested functions and classes are blocks of their own."""
    found: dict[int, str] = {}
    for statements in _blocks(module):
        library = next((lib for s in statements if (lib := _cuda_only_import(s)) is not None), None)
        if library is None:
            continue
        for stmt in statements:
            for call in _cuda_calls(stmt):
                found.setdefault(id(call), library)
    return found


def cuda_only_library(module: cst.Module) -> str | None:
    """The first CUDA-only library any block of ``module`` imports; None where none does."""
    return next((lib for statements in _blocks(module) for s in statements if (lib := _cuda_only_import(s)) is not None), None)


def _blocks(module: cst.Module):
    yield module.body
    for node in traversal.walk_statements(module):
        body = getattr(node, "body", None)
        if isinstance(body, cst.IndentedBlock) and not isinstance(node, cst.ClassDef):
            yield body.body


def _cuda_only_import(stmt: cst.BaseStatement) -> str | None:
    if isinstance(stmt, cst.Try):  # ``try: import cupy`` / ``except ImportError: ...``
        return next((lib for s in stmt.body.body if (lib := _cuda_only_import(s)) is not None), None)
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None
    for small in stmt.body:
        names: list[str] = []
        if isinstance(small, cst.Import):
            names = [nodes.dotted_name(a.name) or "" for a in small.names]
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            base = nodes.dotted_name(small.module) or ""
            names = [base]
            if base == "numba" and not isinstance(small.names, cst.ImportStar):
                names += [f"numba.{nodes.code_of(a.name)}" for a in small.names]
        for name in names:
            for library in CUDA_ONLY_LIBRARIES:
                if name == library or name.startswith(library + "."):
                    return library
    return None


def _cuda_calls(stmt: cst.BaseStatement) -> list[cst.Call]:
    """The ``.cuda()`` calls of ``stmt``, outside functions, classes and lambdas defined in it."""
    calls: list[cst.Call] = []
    stack: list[cst.CSTNode] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Call) and m.matches(node.func, m.Attribute(attr=m.Name("cuda"))):
            calls.append(node)
        stack.extend(traversal.children(node))
    return calls
