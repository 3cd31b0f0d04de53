"""The verifier and the runnable fixture models (tests/fixtures/models -> the package's models).

Each bundled model is verified on ``meta`` (the stand-in second device, under the device
checker): the original must fail with a device error, the rewrite must run, the CPU numbers must
agree (or the model declares ``INTENDED_CHANGE``), and the declared codemods must have fired.
The same on CUDA where there is one (``-m gpu``; skipped, never failed, without a GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import console_script

torch = pytest.importorskip("torch")

from torchfix_device.verify.contract import MODELS_DIR, bundled_models, read_spec  # noqa: E402
from torchfix_device.verify.verifier import ModelReport, verify_model  # noqa: E402

FIXTURE_MODELS = Path(__file__).resolve().parent / "fixtures" / "models"
MODELS = bundled_models()
EXPECTED_MODELS = {
    "seed000_noisy_dqn", "seed001_training_loop", "seed002_checkpoint_export",
    "seed003_resnet_list", "seed004_eval_model", "multi_codemod", "host_transfer", "init_state_buffer",
}


def explain(report: ModelReport) -> str:
    """Everything a failing assertion should show."""
    return json.dumps(report.to_json(), indent=1, default=str)


def assert_as_expected(report: ModelReport) -> None:
    why = explain(report)
    assert not report.problems, why
    assert not report.missing_codemods, f"declared codemods did not fire: {report.missing_codemods}\n{why}"
    assert report.original_dev.status == "failed" and report.original_dev.device_error, (
        f"BROKEN FIXTURE: the original must fail with a device error on {report.device}\n{why}"
    )
    assert report.rewrite_dev.status == "ran", f"the rewrite must run on {report.device}\n{why}"
    assert not report.rewrite_dev.forbidden_shims, why
    assert report.original_cpu.status == "ran" and report.rewrite_cpu.status == "ran", why
    if report.intended_change is None:
        assert report.cpu_equal is True, f"CPU numbers differ: {report.cpu_differences}\n{why}"
    else:
        assert report.cpu_equal is not None, why
    assert report.ok and not report.broken_fixture, why


# -- the models and their contract --------------------------------------------------------------
def test_fixture_models_are_the_packaged_models() -> None:
    assert FIXTURE_MODELS.is_symlink(), "tests/fixtures/models must link to the package's models"
    assert FIXTURE_MODELS.resolve() == MODELS_DIR
    assert {p.stem for p in MODELS} == EXPECTED_MODELS


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_model_follows_the_contract(path: Path) -> None:
    spec = read_spec(path)
    assert not spec.problems
    assert "seed" in spec.doc.lower(), "the docstring says which seed article the bug comes from"
    assert spec.codemods


def test_contract_problems_are_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("CODEMODS = ['cuda']\ndef build(device):\n    pass\n", encoding="utf-8")
    problems = " | ".join(read_spec(bad).problems)
    assert "docstring" in problems and "CODEMODS" in problems and "run(device)" in problems


# -- every model on the stand-in device, and on CUDA where there is one -------------------------
CLI_MODEL = "seed004_eval_model"
"""Verified on ``meta`` through the command line by ``test_cli_verify_json`` (with the same
expectations), so not a second time here."""


@pytest.mark.parametrize("path", [p for p in MODELS if p.stem != CLI_MODEL], ids=lambda p: p.stem)
def test_model_on_meta(path: Path) -> None:
    assert_as_expected(verify_model(path, "meta"))


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_model_on_cuda(path: Path) -> None:
    assert_as_expected(verify_model(path, "cuda"))


# -- the checker itself -------------------------------------------------------------------------
def test_meta_alone_misses_a_cpu_weight() -> None:
    """Why the checker exists: meta's kernels accept a CPU weight with a meta input."""
    x = torch.randn(2, 3, device="meta")
    assert torch.nn.functional.linear(x, torch.randn(4, 3)).device.type == "meta"


@pytest.mark.parametrize(
    "op",
    [
        lambda x, w: torch.nn.functional.linear(x, w),
        lambda x, w: torch.matmul(x, w.t()),
        lambda x, w: torch.nn.functional.conv2d(x.reshape(1, 1, 2, 3), w.reshape(4, 1, 1, 3)),
    ],
    ids=["linear", "matmul", "conv2d"],
)
def test_checker_catches_a_cpu_weight_with_a_meta_input(op) -> None:
    from torchfix_device.verify.checker import DeviceChecker, is_device_error

    x, w = torch.randn(2, 3, device="meta"), torch.randn(4, 3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device") as caught:
        with DeviceChecker():
            op(x, w)
    assert "meta" in str(caught.value) and "cpu" in str(caught.value)
    assert is_device_error(str(caught.value))


def test_checker_allows_moves_copies_cpu_scalars_and_cpu_indices() -> None:
    from torchfix_device.verify.checker import DeviceChecker

    with DeviceChecker() as checker:
        x = torch.randn(4, 3).to("meta")
        layer = torch.nn.Linear(3, 2).to(torch.device("meta"))
        y = layer(x) * torch.tensor(2.0) + 1
        picked = x[torch.tensor([0, 2])]
        target = torch.empty(4, 3, device="meta")
        target.copy_(torch.randn(4, 3))
        back = y.cpu()  # meta holds no data: zeros of the right shape
    assert y.device.type == picked.device.type == "meta"
    assert back.device.type == "cpu" and back.shape == (4, 2)
    assert checker.checked > 0 and checker.placeholders


def test_check_module_names_a_parameter_left_behind() -> None:
    from torchfix_device.verify.checker import DeviceMismatchError, check_module, misplaced

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model[0].to("meta")
    assert misplaced(model, torch.device("meta")) == [
        "parameter '1.weight' is on cpu", "parameter '1.bias' is on cpu",
        "buffer '1.running_mean' is on cpu", "buffer '1.running_var' is on cpu",
        "buffer '1.num_batches_tracked' is on cpu",
    ]
    with pytest.raises(DeviceMismatchError, match="not on the target device meta"):
        check_module(model, torch.device("meta"))


# -- a broken fixture is reported as one (so these tests can fail) ------------------------------
MOVES_EVERYTHING = '''
"""Broken on purpose (no seed): every tensor is reassigned after .cuda(), so nothing fails."""
import torch
import torch.nn as nn

CODEMODS = ("TFD001",)


def run(device):
    model = nn.Linear(3, 2).cuda()
    inputs = torch.randn(4, 3).cuda()
    return model, model(inputs)
'''

FAILS_OTHERWISE = '''
"""Broken on purpose (no seed): it fails, but not with a device error."""
import torch

CODEMODS = ("TFD001",)


def run(device):
    inputs = torch.randn(4, 3).cuda()
    return None, inputs.reshape(5, 5)
'''


@pytest.mark.parametrize("source, status", [(MOVES_EVERYTHING, "ran"), (FAILS_OTHERWISE, "failed")], ids=["runs", "other-error"])
def test_original_that_does_not_fail_with_a_device_error_is_a_broken_fixture(tmp_path: Path, source: str, status: str) -> None:
    model = tmp_path / "broken_model.py"
    model.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    report = verify_model(model, "meta")
    assert report.applied == ["TFD001"]
    assert report.original_dev.status == status and not report.original_dev.device_error
    assert report.broken_fixture and not report.original_ok and not report.ok


# -- the command line ---------------------------------------------------------------------------
def test_verify_without_paths_takes_every_bundled_model() -> None:
    from torchfix_device.verify.cli import model_files

    assert model_files([]) == MODELS and {p.stem for p in MODELS} >= EXPECTED_MODELS


def test_cli_verify_json(cli) -> None:
    """The command line's JSON, on one bundled model, held to the expectations
    test_model_on_meta holds the others to (that model is not run a second time there)."""
    chosen = [p for p in MODELS if p.stem == CLI_MODEL]
    assert len(chosen) == 1
    proc = cli("verify", "--json", *map(str, chosen))
    data = json.loads(proc.stdout)
    assert [entry["name"] for entry in data] == [p.stem for p in chosen]
    expected_device = "cuda" if torch.cuda.is_available() else "meta"
    for entry in data:
        assert entry["device"] == expected_device
        assert set(entry) >= {"declared", "applied", "original_dev", "rewrite_dev", "cpu_equal", "ok", "broken_fixture"}
    failing = {e["name"]: [k for k in ("codemods_ok", "original_ok", "rewrite_ok", "cpu_ok") if not e[k]] for e in data if not e["ok"]}
    assert not failing, f"models not as expected: {failing}\n{proc.stderr.decode()}"
    assert proc.returncode == 0


def test_cli_verify_table_reports_a_broken_fixture_and_exits_1(cli, tmp_path: Path) -> None:
    model = tmp_path / "broken_model.py"
    model.write_text(textwrap.dedent(MOVES_EVERYTHING).lstrip(), encoding="utf-8")
    proc = cli("verify", "--device", "meta", str(model))
    out = proc.stdout.decode()
    assert proc.returncode == 1, out + proc.stderr.decode()
    assert "broken_model" in out and "BROKEN FIXTURE" in out and "original on meta" in out


def test_cli_verify_refuses_the_cpu_as_target(cli) -> None:
    proc = cli("verify", "--device", "cpu")
    assert proc.returncode == 2 and "reference" in proc.stderr.decode()


def test_verify_without_torch_says_what_to_install(monkeypatch, capsys) -> None:
    import importlib.util

    from torchfix_device.verify import cli as verify_cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert verify_cli.run_verify([], None, False) == 2
    assert "pip install 'torchfix-device[verify]'" in capsys.readouterr().err


def test_rewrite_engine_and_verify_command_import_no_torch() -> None:
    code = (
        "import sys, torchfix_device.cli, torchfix_device.run.runner, torchfix_device.verify.cli, "
        "torchfix_device.verify.verifier\n"
        "from torchfix_device.codemods.catalog import all_codemods; all_codemods()\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    engine = "import sys, torchfix_device.cli, torchfix_device.run.runner\nassert not any(m.startswith('torchfix_device.verify') for m in sys.modules)\n"
    proc = subprocess.run([sys.executable, "-c", engine], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# -- a user's own model file (issue 23, item 10) ------------------------------------------------
USER_MODELS = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.fc1 = nn.Linear(4, hidden)
        self.fc2 = nn.Linear(hidden, 2)
        self.scale = torch.ones(1)

    def forward(self, x):
        noise = torch.zeros(x.size(0), 2)
        return self.fc2(self.fc1(x).relu()) * self.scale + noise


class Needs(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return self.fc(x)
'''

MAKE_MODEL = '''
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocabulary, width):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.head = nn.Linear(width, 3)

    def forward(self, tokens, mask):
        hidden = self.embed(tokens) * mask.unsqueeze(-1)
        return self.head(hidden).sum(1)


def make_model():
    return Tagger(10, 4)


def example_inputs():
    return torch.randint(0, 10, (2, 5)), torch.ones(2, 5)
'''


def test_verify_a_plain_model_file_in_plain_words(cli, tmp_path: Path) -> None:
    """No module docstring, no ``run()``: each constructible ``nn.Module`` is built and run before
    and after the rewrite; a missing numpy prints no warning (a shadow package stands in for it)."""
    model = tmp_path / "my_models.py"
    model.write_text(textwrap.dedent(USER_MODELS).lstrip(), encoding="utf-8")
    no_numpy = tmp_path / "no_numpy" / "numpy"
    no_numpy.mkdir(parents=True)
    (no_numpy / "__init__.py").write_text('raise ModuleNotFoundError("No module named numpy", name="numpy")\n')
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONPATH": str(no_numpy.parent)}
    proc = subprocess.run([*console_script(), "verify", "--device", "meta", str(model)], capture_output=True, text=True, env=env)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, out + err
    assert "BROKEN FIXTURE" not in out and "contract" not in out and "numpy" not in (out + err).lower(), out + err
    assert "before the rewrite, on meta" in out and "outputs on the CPU" in out
    verdicts = [line for line in out.splitlines() if line.startswith(("✓", "✗", "-"))]
    assert verdicts[0].startswith("✓ Net: fixed: before the rewrite it fails on meta (a device error); now it runs there; same outputs on the CPU")
    assert verdicts[1] == "- Needs: not run: its constructor needs n: define make_model() in the file"
    assert "1 of 1 models as expected on meta (1 not run)" in err


@pytest.mark.parametrize("cold", [False, True], ids=["forked", "new-interpreters"])
def test_verify_make_model_with_example_inputs_runs_one_pair_of_interpreters(tmp_path: Path, monkeypatch, cold: bool) -> None:
    from torchfix_device.verify import verifier, warm
    from torchfix_device.verify.user_verifier import verify_user_file

    model = tmp_path / "tagger.py"
    model.write_text(textwrap.dedent(MAKE_MODEL).lstrip(), encoding="utf-8")
    started = []
    real_run, real_forked = subprocess.run, warm.Server.run

    def counting_run(command, *args, **kwargs):
        started.append(("new", command))
        return real_run(command, *args, **kwargs)

    def counting_forked(self, argv, *args, **kwargs):
        started.append(("forked", argv))
        return real_forked(self, argv, *args, **kwargs)

    monkeypatch.setattr(verifier.subprocess, "run", counting_run)
    monkeypatch.setattr(warm.Server, "run", counting_forked)
    if cold:
        monkeypatch.setenv(warm.COLD_ENV, "1")
    (report,) = verify_user_file(read_spec(model), "meta")
    # one interpreter for the original, one for the rewrite: each runs meta, then the CPU
    assert [kind for kind, _ in started] == ["new" if cold else "forked"] * 2, started
    assert report.name == "make_model" and report.ok, report.to_json()
    assert report.inputs == "(2, 5), (2, 5)" and report.cpu_equal is True
    assert report.verdict() == "runs on meta before and after the rewrite; same outputs on the CPU"
    assert report.applied == []


def test_one_interpreter_runs_a_version_on_dev_and_then_on_the_cpu_except_with_cuda() -> None:
    from torchfix_device.verify.verifier import device_groups

    assert device_groups("meta") == [["meta", "cpu"]] and device_groups("mps") == [["mps", "cpu"]]
    assert device_groups("cuda") == [["cuda"], ["cpu"]]  # the CPU runs must not see the GPU


# -- a rewrite whose numbers change on purpose (issue 33, item 11) ------------------------------
LAYERS_IN_A_LIST = '''
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=4)
args = parser.parse_args()  # at the top level, as scripts do: sees none of the harness's arguments


class Blocks(nn.Module):
    """A BatchNorm and a Dropout kept in a plain list: model.eval() never reached them."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(args.width, 4)
        self.blocks = [nn.BatchNorm1d(4), nn.Dropout(0.5)]

    def forward(self, x):
        x = self.fc(x)
        for block in self.blocks:
            x = block(x)
        return x


class Counted(nn.Module):
    """Its output counts its parameters: registering the layer changes that, not a mode."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.extra = [nn.Linear(4, 4)]

    def forward(self, x):
        return self.extra[0](self.fc(x)) * sum(p.numel() for p in self.parameters())
'''


def test_the_rewrites_intended_change_of_outputs_passes_and_no_other(tmp_path: Path) -> None:
    """``verify examples/legacy_project`` ended in ✗ "the rewrite changes the outputs" for
    SmallResNet: its blocks sat in a plain list, so ``model.eval()`` left their BatchNorms in
    training mode; TFD004 registers them, which is the point. The verifier now checks that this is
    the whole difference (the original with those layers in eval mode gives the rewrite's
    outputs) and says so; a difference with another cause (``Counted``) still fails."""
    from torchfix_device.verify.user_verifier import verify_user_file

    model = tmp_path / "models.py"
    model.write_text(textwrap.dedent(LAYERS_IN_A_LIST).lstrip(), encoding="utf-8")
    reports = {report.name: report for report in verify_user_file(read_spec(model), "meta")}
    blocks, counted = reports["Blocks"], reports["Counted"]
    assert blocks.ok and blocks.output_differences and blocks.intended_change, blocks.to_json()
    assert blocks.verdict().startswith(
        "fixed: before the rewrite it fails on meta (a device error); now it runs there; "
        "the outputs on the CPU differ, as intended (output 0: max |diff| "
    ), blocks.verdict()
    assert blocks.verdict().endswith("eval() now reaches them; with them in eval mode in the original too, the outputs are the same")
    assert not counted.ok and counted.intended_change is None, counted.to_json()
    assert counted.verdict().startswith("the rewrite changes the outputs on the CPU: output 0: "), counted.verdict()


def test_the_bundled_example_project_verifies(cli) -> None:
    """The example project ends in ✓: SmallResNet's change is the intended one; the files with
    no model (a script reading ``model.pt`` among them: not even imported) are not run;
    a script's ``argparse`` at its top level does not read the harness's arguments."""
    from conftest import ROOT

    proc = cli("verify", "--device", "meta", str(ROOT / "examples" / "legacy_project"))
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, out + err
    verdicts = {line.split(":")[0][2:]: line for line in out.splitlines() if line.startswith(("✓", "✗", "-"))}
    assert verdicts["SmallResNet"].startswith(
        "✓ SmallResNet: fixed: before the rewrite it fails on meta (a device error); now it runs there; "
        "the outputs on the CPU differ, as intended"
    ), out
    assert "│ ✓ differ, as intended: output 0" in out  # the table's cell
    assert verdicts["evaluate"] == "- evaluate: not run: no model in this file: nn.Module classes with a forward(), or make_model()"
    # no class and no make_model: not imported at all (its top level reads model.pt)
    assert verdicts["export_onnx"] == "- export_onnx: not run: no model in this file: nn.Module classes with a forward(), or make_model()", out
    assert verdicts["train"].startswith("- train: not run: no model in this file"), out  # not SystemExit: 2 from argparse
    assert not [line for line in verdicts.values() if line.startswith("✗")], out
    assert "1 of 1 models as expected on meta" in err


def test_a_file_that_cannot_define_a_model_is_not_imported_and_one_that_fails_to_import_says_so(tmp_path) -> None:
    """Files with no class statement and no ``make_model`` are not imported (each import costs
    fresh interpreters loading torch); one that may hold a model and fails at its top level
    before the rewrite is reported as such."""
    from torchfix_device.verify.user_verifier import _reports, may_define_a_model

    cases = {
        "script.py": ("import torch\nnet = torch.load('model.pt')\nnet.eval()\n", False),
        "classes.py": ("import torch.nn as nn\nclass Net(nn.Module):\n    pass\n", True),
        "factory.py": ("from models import make_model\n", True),
        "dynamic.py": ("import torch.nn as nn\nNet = type('Net', (nn.Module,), {})\n", True),
        "broken.py": ("def f(:\n", True),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert may_define_a_model(tmp_path / name) is expected, name
    failed = {"cpu": {"status": "failed", "error": {"type": "FileNotFoundError", "message": "model.pt"}}}
    reports = _reports("classes", str(tmp_path / "classes.py"), "meta", [], [("original", ("cpu",), failed, "", tmp_path)])
    assert [r.skipped for r in reports] == [
        "importing it fails before the rewrite (original on cpu: FileNotFoundError: model.pt); verify imports each "
        "file, running its top level: keep models in modules of their own, or guard a script with "
        "`if __name__ == \"__main__\":`"
    ]
