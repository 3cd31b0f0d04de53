"""Stage 1 of the engine: which codemods can possibly match a file, decided with the stdlib ``ast``.

CPython's parser is an order of magnitude faster than libcst's parse, and much faster again than
libcst's metadata and tree walks. So before a file is handed to libcst, one ``ast`` walk collects
a few facts about it (:class:`FileFacts`), and each codemod's *necessary condition* is checked on
them. A codemod whose condition fails cannot report or rewrite anything in the file; when no
codemod is left, libcst never sees the file.

Each condition must be necessary, never sufficient: it may say "maybe" for a file the codemod
then leaves alone, but it must never say "no" for a file where the codemod would report or
change something. The conditions rest on two facts of libcst's ``QualifiedNameProvider``:

- a qualified name starting with ``torch.`` needs an absolute ``import torch...`` or
  ``from torch... import`` somewhere in the file (an unbound ``torch``, a relative import or a
  star import gives no such name);
- the last part of a qualified name is spelt in the file as an attribute (``nn.Linear``) or as
  an imported name (``from torch.nn import Linear as L``).

A codemod without an entry in :data:`CONDITIONS` is always run (a new codemod is safe by
default). ``tests/test_candidates.py`` checks that results with and without this stage are the
same on every fixture.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

from torchfix_device._cst import LEGACY_TENSOR_DTYPES
from torchfix_device.codemod import Codemod
from torchfix_device.codemods.cuda_amp import NAMES as AMP_NAMES
from torchfix_device.codemods.factory_without_device import FACTORIES
from torchfix_device.codemods.layer_built_in_forward import STATEFUL_LAYERS
from torchfix_device.codemods.legacy_loss_reduction_args import LOSS_CLASSES, LOSS_FUNCTIONS

FACTORY_NAMES = frozenset(q.rpartition(".")[2] for q in FACTORIES) | frozenset(LEGACY_TENSOR_DTYPES)
LEGACY_TYPE_NAMES = frozenset(LEGACY_TENSOR_DTYPES)
LOSS_NAMES = frozenset(LOSS_CLASSES) | frozenset(LOSS_FUNCTIONS)
DEVICE_AWARE_WORDS = ("device", ".to(", "cuda")
"""A function outside an ``nn.Module`` is only looked into by TFD003 when its text holds one."""


@dataclass
class FileFacts:
    """What one ``ast`` walk tells about a file."""

    text: str
    torch_imported: bool = False
    """An absolute import of ``torch`` or one of its submodules, anywhere in the file."""
    names: set[str] = field(default_factory=set)
    """Attribute names and imported names (every dotted part): the possible last parts of a
    qualified name."""
    call_attrs: set[str] = field(default_factory=set)
    """``x.NAME(...)``: the method names called."""
    statement_call_attrs: set[str] = field(default_factory=set)
    """``x.NAME(...)`` as a whole statement (its result dropped)."""
    subscripted_attrs: set[str] = field(default_factory=set)
    """``x.NAME[...]``."""
    keywords: set[str] = field(default_factory=set)
    """Keyword argument names of calls."""
    function_names: set[str] = field(default_factory=set)
    has_class_with_bases: bool = False
    augassign_to_name_in_forward: bool = False
    """``name op= ...`` somewhere inside a function called ``forward``."""


def collect_facts(tree: ast.AST, text: str) -> FileFacts:
    facts = FileFacts(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            facts.names.add(node.attr)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                facts.call_attrs.add(node.func.attr)
            facts.keywords.update(k.arg for k in node.keywords if k.arg)
        elif isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
                facts.statement_call_attrs.add(node.value.func.attr)
        elif isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Attribute):
                facts.subscripted_attrs.add(node.value.attr)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                facts.names.update(alias.name.split("."))
                facts.torch_imported |= alias.name.split(".")[0] == "torch"
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                facts.names.update(alias.name.split("."))
            if node.module:
                facts.names.update(node.module.split("."))
                facts.torch_imported |= node.level == 0 and node.module.split(".")[0] == "torch"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            facts.function_names.add(node.name)
            if node.name == "forward" and not facts.augassign_to_name_in_forward:
                facts.augassign_to_name_in_forward = any(
                    isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) for n in ast.walk(node)
                )
        elif isinstance(node, ast.ClassDef):
            facts.has_class_with_bases |= bool(node.bases)
    return facts


def _module_class_possible(f: FileFacts) -> bool:
    """An ``nn.Module`` subclass needs a base whose qualified name is ``torch.nn.*``: a torch
    import, and ``nn`` spelt as an imported name or an attribute."""
    return f.torch_imported and f.has_class_with_bases and "nn" in f.names


def _factory_site_possible(f: FileFacts) -> bool:
    if not (f.torch_imported and f.names & FACTORY_NAMES):
        return False
    in_function = bool(f.function_names) and any(w in f.text for w in DEVICE_AWARE_WORDS)
    return f.has_class_with_bases or in_function


def _torch_load_possible(f: FileFacts) -> bool:
    return f.torch_imported and "load" in f.names


CONDITIONS: dict[str, Callable[[FileFacts], bool]] = {
    # cuda-call: a `.cuda(...)` call (guards and conditionals only go with a rewritten one)
    "TFD001": lambda f: "cuda" in f.call_attrs,
    # dropped-move: `x.cuda()` / `x.to(...)` as a statement
    "TFD002": lambda f: bool(f.statement_call_attrs & {"cuda", "to"}),
    # factory-without-device: a torch factory or legacy constructor in a module class or a
    # device-aware function
    "TFD003": _factory_site_possible,
    # unregistered-layer-container: an nn.Module subclass
    "TFD004": _module_class_possible,
    # torch-load-without-map-location: `torch.load` / `torch.serialization.load`
    "TFD005": _torch_load_possible,
    # loss-data-index: `x.data[...]`
    "TFD006": lambda f: "data" in f.subscripted_attrs,
    # tensor-attribute-not-buffer: an nn.Module subclass with an `__init__`
    "TFD007": lambda f: _module_class_possible(f) and "__init__" in f.function_names,
    # cuda-tensor-type: `torch.cuda.FloatTensor` and friends
    "TFD008": lambda f: f.torch_imported and "cuda" in f.names and bool(f.names & LEGACY_TYPE_NAMES),
    # variable-wrapper: `torch.autograd.Variable`
    "TFD009": lambda f: f.torch_imported and "Variable" in f.names,
    # legacy-loss-reduction-args: a loss given size_average=, reduce= or reduction=
    "TFD010": lambda f: f.torch_imported and bool(f.names & LOSS_NAMES)
    and bool(f.keywords & {"size_average", "reduce", "reduction"}),
    # cuda-amp: `torch.cuda.amp.autocast` / `GradScaler`
    "TFD011": lambda f: f.torch_imported and "amp" in f.names and bool(f.names & set(AMP_NAMES)),
    # inplace-op-in-forward: `name op= ...` in a module's `forward`
    "TFD012": lambda f: _module_class_possible(f) and f.augassign_to_name_in_forward,
    # layer-built-in-forward: a stateful torch.nn layer called in a module's `forward`
    "TFD013": lambda f: _module_class_possible(f) and "forward" in f.function_names
    and bool(f.names & STATEFUL_LAYERS),
    # set-default-cuda-tensor-type: `torch.set_default_tensor_type`
    "TFD014": lambda f: f.torch_imported and "set_default_tensor_type" in f.names,
    # torch-load-of-whole-model: `torch.load` / `torch.serialization.load` (its result used as a model)
    "TFD015": _torch_load_possible,
}


def parse_facts(text: str) -> FileFacts | None:
    """The facts of ``text``, or None when CPython cannot parse it (the caller then runs the
    full engine, which reports the error as before)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text, "<stage1>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return collect_facts(tree, text)
    except RecursionError:
        return None


def candidate_codemods(facts: FileFacts, codemods: Sequence[type[Codemod]]) -> list[type[Codemod]]:
    """The codemods of ``codemods`` that may match the file ``facts`` describe, in order."""
    return [c for c in codemods if CONDITIONS.get(c.code, _always)(facts)]


def _always(facts: FileFacts) -> bool:
    return True
