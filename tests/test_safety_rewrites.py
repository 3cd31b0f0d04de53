"""Issue 21: safe rewrites that must not change what the program does, and fixes that must not be
lost when several codemods rewrite the same code. The programs are executed where it matters."""

from __future__ import annotations

import re
from pathlib import Path

import libcst
import pytest
from differential import python3
from conftest import run_script, sweep_sample
from generated import review_sites_changed

from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# every fixture's input in benchmarks/sweeps.py; a quarter of each codemod's in CI
INPUTS = sweep_sample([*FIXTURES.glob("*/*.in.py"), *FIXTURES.glob("*/*.noop.py")])
COMBINED = """import torch

model = torch.load("model.pt")
model.cuda()
model.eval()
"""


def _new_words(before: str, after: str) -> set[str]:
    """The identifiers and keywords ``after`` spells and ``before`` does not."""
    return set(re.findall(r"\w+", after)) - set(re.findall(r"\w+", before))


@pytest.mark.sweep
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fix_a_summary_counts_is_in_the_output(path: Path, unsafe: bool) -> None:
    """For each codemod the run counts a fix of, that codemod alone changes the file, and every
    word its fix brings that the file did not spell (``weights_only``, ``item``, ``ModuleList``)
    is in the run's output too: another codemod's rewrite of the same code must not drop it."""
    text = path.read_text(encoding="utf-8")
    codemods = all_codemods()
    # An input of the token pass (`.cuda(async=True)`): no other fix can be made without the
    # token fixes, so each codemod runs "alone" together with them, on what they give.
    first = [c for c in codemods if any(True for _ in c.token_fixes(text))] if not python3(text) else []
    if first and not unsafe and not all(f.safe for c in first for f in c.token_fixes(text)):
        with pytest.raises(libcst.ParserSyntaxError):  # the safe run leaves it unparseable: refused
            transform_source(text, codemods, options=RunOptions(unsafe_fixes=unsafe))
        return
    out = transform_source(text, codemods, options=RunOptions(unsafe_fixes=unsafe))
    base = transform_source(text, first, options=RunOptions(unsafe_fixes=unsafe)).text if first else text
    fixed = sorted({f.code for f in out.findings if f.fixed})
    checked = 0
    for codemod in codemods:
        if codemod.code not in fixed:
            continue
        alone = transform_source(text, [*first, codemod] if codemod not in first else first, options=RunOptions(unsafe_fixes=unsafe)).text
        assert alone != (base if codemod not in first else text), f"{codemod.code} counts a fix it does not make alone"
        checked += 1
        missing = _new_words(base if codemod not in first else text, alone) - set(re.findall(r"\w+", out.text))
        assert not missing, f"{codemod.code}'s fix brings {sorted(missing)}, missing from the output"
    assert checked == len(fixed)
    # and nothing else: a site reported for review is left as it was
    assert review_sites_changed(text, out.text, out.findings) == [], out.text


def test_a_loaded_model_moved_and_reassigned_keeps_every_counted_fix() -> None:
    out = transform_source(COMBINED, all_codemods(), options=RunOptions(unsafe_fixes=True))
    assert {f.code for f in out.findings if f.fixed} >= {"TFD001", "TFD002", "TFD005", "TFD015"}
    assert 'torch.load("model.pt", map_location=device, weights_only=False)' in out.text
    assert "model = model.to(device)" in out.text


def test_forwarded_load_arguments_are_left_alone_and_would_have_raised(tmp_path: Path) -> None:
    """``torch.load(path, *args)`` may get its location from ``args``: the old rewrite's
    ``map_location=device`` on top raises ``TypeError`` (multiple values), executed here."""
    code = (
        "import torch\n\ndef load(path, *args):\n    return torch.load(path, *args)\n\n"
        "torch.save({'w': torch.ones(2)}, 'w.pt')\nprint(sorted(load('w.pt', 'cpu')))\n"
    )
    out = transform_source(code, all_codemods())
    assert out.text == code
    assert not [f for f in out.findings if f.code == "TFD005"]  # the wrapper's callers choose the location
    old_rewrite = code.replace("torch.load(path, *args)", "torch.load(path, *args, map_location='cpu')")
    for source, ok in ((out.text, True), (old_rewrite, False)):
        script = tmp_path / "load.py"
        script.write_text(source, encoding="utf-8")
        run = run_script(str(script), cwd=tmp_path, timeout=300)
        assert (run.returncode == 0) is ok, run.stderr
        if not ok:
            assert "TypeError" in run.stderr and "map_location" in run.stderr


TORCHSCRIPT = (FIXTURES / "cuda_call" / "torchscript.in.py").read_text(encoding="utf-8")


def test_a_move_inside_torchscript_takes_a_tensor_argument_and_still_compiles(tmp_path: Path) -> None:
    """The rewrite must be importable (TorchScript compiles at import) and compute the same; the
    old rewrite's module-level ``device`` does not compile inside a scripted function."""
    out = transform_source(TORCHSCRIPT, all_codemods())
    assert "torch.randn(3).to(x.device)" in out.text and "torch.ones(3).to(x.device)" in out.text
    assert any(f.code == "TFD001" and not f.fixed and "inside TorchScript" in f.message for f in out.findings)
    check = "\nprint(add_noise(torch.zeros(3)).shape, Scaler()(torch.ones(3)).tolist())\n"
    # TorchScript runs .cuda() natively (no patching it here): on this CPU machine "before" is the
    # same program with the moves made to the CPU
    before = TORCHSCRIPT.replace(".cuda()", ".cpu()")
    old = TORCHSCRIPT.replace("import torch\n", 'import torch\n\ndevice = torch.device("cpu")\n', 1).replace(
        "torch.randn(3).cuda()", "torch.randn(3).to(device)"
    )
    results = {}
    for name, source in (("before", before), ("after", out.text), ("old rewrite", old)):
        script = tmp_path / f"{name.replace(' ', '_')}.py"
        script.write_text(source + check, encoding="utf-8")
        results[name] = run_script(str(script), cwd=tmp_path, timeout=300)
    assert results["before"].returncode == 0, results["before"].stderr
    assert results["after"].returncode == 0, results["after"].stderr
    assert results["after"].stdout == results["before"].stdout
    assert results["old rewrite"].returncode != 0 and "device" in results["old rewrite"].stderr


def test_no_review_item_for_what_the_same_run_fixed() -> None:
    """Issue 33, item 4: a type a rewritten ``isinstance(...)`` consumed is not also reported as a
    CUDA type "used as a value" (the run printed a fix and a review item for the same call)."""
    from torchfix_device.codemods.catalog import all_codemods as every

    folder = Path(__file__).parent / "fixtures" / "cuda_tensor_type"
    for name in ("isinstance_tuple.in.py", "isinstance.in.py", "isinstance_adds_torch.in.py"):
        path = folder / name
        if not path.exists():
            continue
        out = transform_source(path.read_text(encoding="utf-8"), every())
        fixed_lines = {f.line for f in out.findings if f.fixed}
        reviewed = [f for f in out.findings if not f.fixed and f.line in fixed_lines and f.code == "TFD008"]
        assert fixed_lines and reviewed == [], (name, reviewed)
