"""What a model file must define, read statically (``ast``) so that nothing runs in the parent.

Two kinds of file are verified. A *user's model file* (neither ``run`` nor ``CODEMODS`` at its
top level) defines ``nn.Module`` classes, or ``make_model()`` and ``example_inputs()``: see
:mod:`~torchfix_device.verify.user_harness`. A *fixture model* (``verify/models/<name>.py``, or
a user's file written the same way) reproduces a bug and has

- a module docstring saying which seed article and which bug it reproduces;
- ``CODEMODS = ("TFD001", ...)``: the codemods it exercises; the verifier checks that each of
  them actually fixed something in it;
- optionally ``INTENDED_CHANGE = "..."``: why the rewrite may change the CPU numbers (outputs or
  the model's ``state_dict``); without it they must stay the same;
- one function ``run(device)`` that builds the model and its inputs for ``device`` (a
  ``torch.device``), in the legacy style that has the bug, and returns ``(model, output)``:
  ``model`` an ``nn.Module`` or ``None``, ``output`` a tensor or a tuple of tensors.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "models"
_CODE_RE = re.compile(r"^TFD\d{3}$")


@dataclass(frozen=True)
class ModelSpec:
    path: Path
    name: str
    doc: str = ""
    codemods: tuple[str, ...] = ()
    intended_change: str | None = None
    problems: tuple[str, ...] = field(default_factory=tuple)
    """Ways the file breaks the contract; empty for a valid model file."""
    kind: str = "fixture"
    """``fixture`` (the contract below) or ``user`` (a plain model file)."""


def bundled_models() -> list[Path]:
    """The fixture models shipped with the package, sorted by name."""
    return sorted(p for p in MODELS_DIR.glob("*.py") if not p.name.startswith("_"))


def read_spec(path: Path) -> ModelSpec:
    """The contract fields of ``path``, with a list of what is missing or malformed."""
    name = path.stem
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        return ModelSpec(path, name, problems=(f"cannot read: {exc}",))
    except SyntaxError as exc:
        return ModelSpec(path, name, problems=(f"line {exc.lineno}: syntax error: {exc.msg}",))
    values = _top_level_constants(tree)
    if "CODEMODS" not in values and not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
        return ModelSpec(path, name, doc=ast.get_docstring(tree) or "", kind="user")
    problems: list[str] = []
    doc = ast.get_docstring(tree) or ""
    if not doc:
        problems.append("no module docstring (say which seed and which bug)")
    codemods = values.get("CODEMODS")
    if not isinstance(codemods, (tuple, list)) or not codemods or not all(
        isinstance(c, str) and _CODE_RE.match(c) for c in codemods
    ):
        problems.append('CODEMODS must be a literal tuple of codes, e.g. CODEMODS = ("TFD001",)')
        codemods = ()
    intended = values.get("INTENDED_CHANGE")
    if intended is not None and not (isinstance(intended, str) and intended.strip()):
        problems.append("INTENDED_CHANGE must be a non-empty string")
        intended = None
    run = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
    if not run:
        problems.append("no top-level function run(device)")
    elif len(run[0].args.args) + len(run[0].args.posonlyargs) < 1:
        problems.append("run() must take the device as its argument")
    return ModelSpec(
        path=path,
        name=name,
        doc=doc,
        codemods=tuple(codemods),
        intended_change=intended,
        problems=tuple(problems),
    )


def _top_level_constants(tree: ast.Module) -> dict[str, object]:
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        try:
            values[target] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            values[target] = ...
    return values
