"""A checkpoint loaded where the program keeps its values on the CPU (TFD005).

Where no file of the load's import group (the files of the run its file imports or is imported
by, through each other) puts a value on a device, the load gets ``map_location="cpu"``: the model
meets only CPU inputs there, and ``torch.cuda.is_available()``'s device would put it on the GPU
of any machine that has one (a CPU-only ``predict.py`` that a ``server.py`` imports). Where every
move of a file follows a flag the load does not see, no default device is taken either. The
scripts are executed before and after; CUDA is faked where it decides (``torch.cuda.is_available``
patched to say yes, with ``map_location`` checked for naming the CPU), as a CPU machine cannot
show the GPU path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, run_script
from torchfix_device.facts.project_placements import groups_on_cpu, places
from torchfix_device.facts.project_classes import imported_modules
from torchfix_device.facts.project_attributes import resolved_imports
from torchfix_device.facts.star_imports import Resolver

MODEL = '''import torch
import torch.nn as nn


class RNN(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super(RNN, self).__init__()
        self.n_hidden = n_hidden
        self.i2h = nn.Linear(n_in + n_hidden, n_hidden)
        self.i2o = nn.Linear(n_in + n_hidden, n_out)

    def forward(self, x, hidden):
        both = torch.cat((x, hidden), 1)
        return self.i2o(both), self.i2h(both)

    def init_hidden(self):
        return torch.zeros(1, self.n_hidden)
'''

TRAIN = '''import torch
from model import RNN

torch.manual_seed(0)
rnn = RNN(3, 4, 2)
torch.save(rnn.state_dict(), "rnn.pt")
'''

# The load a 0.3 script made: its values, and the loaded model's, stay where they are made.
PREDICT = '''import torch
from model import RNN

# A guard against a GPU load: the fake CUDA below says a GPU is there.
_load = torch.load


def _checked_load(*args, **kwargs):
    location = kwargs.get("map_location")
    assert location == "cpu", "the checkpoint would go to %r" % (location,)
    return _load(*args, **kwargs)


torch.load = _checked_load
torch.cuda.is_available = lambda: True

rnn = RNN(3, 4, 2)
rnn.load_state_dict(dict(torch.load("rnn.pt")))


def predict(x):
    hidden = rnn.init_hidden()
    output, hidden = rnn(x, hidden)
    return output.argmax(1).tolist()


if __name__ == "__main__":
    print(predict(torch.ones(1, 3)))
'''

SERVER = '''from predict import predict
import torch

print(predict(torch.zeros(1, 3)))
'''


def _project(root: Path, **files: str) -> Path:
    root.mkdir(parents=True)
    texts = {"model": MODEL, "train": TRAIN, "predict": PREDICT, "server": SERVER, **files}
    for name, text in texts.items():
        if text is not None:
            (root / f"{name}.py").write_text(text, encoding="utf-8")
    return root


def test_a_load_in_a_group_that_places_nothing_goes_to_the_cpu_and_the_script_runs(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    assert run_script("train.py", cwd=root).returncode == 0
    before = run_script("predict.py", cwd=root)
    assert before.returncode != 0 and "the checkpoint would go to None" in before.stderr, before.stderr
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    text = (root / "predict.py").read_text(encoding="utf-8")
    assert 'torch.load("rnn.pt", map_location="cpu")' in text and "torch.device" not in text
    for script in ("predict.py", "server.py"):
        after = run_script(script, cwd=root)
        assert after.returncode == 0 and after.stdout.strip() in ("[0]", "[1]"), after.stderr
    again = run_cli("apply", ".", "--no-cache", "--diff", cwd=root)
    assert again.returncode == 0 and b"+++" not in again.stdout  # a second run changes nothing


@pytest.mark.parametrize("where, text", [
    ("model", MODEL.replace("        return torch.zeros(1, self.n_hidden)", "        return torch.zeros(1, self.n_hidden).cuda()")),
    ("server", SERVER + "torch.zeros(1).to('cuda:0')\n"),  # a file importing the loading one
    ("train", TRAIN + "rnn.cuda()\n"),  # a file the loading one reaches through model.py only
])
def test_a_move_anywhere_in_the_group_keeps_the_default_device(tmp_path: Path, where: str, text: str) -> None:
    root = _project(tmp_path / "p", **{where: text})
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    line = next(l for l in out.splitlines() if "TFD005" in l)
    assert "map_location=device" in line, line


def test_another_project_in_the_run_changes_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    gpu = tmp_path / "q"
    gpu.mkdir()
    (gpu / "train.py").write_text("import torch\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    out = run_cli("check", str(root), str(gpu), "--no-cache", cwd=tmp_path).stdout.decode()
    assert 'map_location="cpu"' in next(l for l in out.splitlines() if "TFD005" in l)


def test_a_file_named_alone_whose_modules_the_run_left_out_keeps_the_default_device(tmp_path: Path) -> None:
    """``model.py`` is next to it but not in the run: nothing shows what it places."""
    root = _project(tmp_path / "p")
    out = run_cli("check", "predict.py", "--no-cache", cwd=root).stdout.decode()
    assert "map_location=device" in next(l for l in out.splitlines() if "TFD005" in l)


def test_a_lone_script_keeps_the_default_device(tmp_path: Path) -> None:
    """A file no file of the run imports and that imports none: a caller outside the run may
    move what it loads (``--device-expression`` and a module's own device aside)."""
    tmp_path.joinpath("m.py").write_text("import torch\nstate = torch.load('ckpt.pt')\n", encoding="utf-8")
    out = run_cli("check", ".", "--no-cache", cwd=tmp_path).stdout.decode()
    assert "map_location=device" in next(l for l in out.splitlines() if "TFD005" in l)


def test_a_dynamic_import_keeps_the_default_device(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", server=SERVER + "import importlib\nimportlib.import_module('model')\n")
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    assert "map_location=device" in next(l for l in out.splitlines() if "TFD005" in l)


def test_the_groups_of_a_run(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", lone="import torch\nx = torch.zeros(1)\n")
    other = tmp_path / "q"
    other.mkdir()
    (other / "gpu.py").write_text("import torch\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    (other / "cpu.py").write_text("import torch\nx = torch.zeros(1)\n", encoding="utf-8")
    resolver = Resolver([root, other])
    absolute = {resolver.absolute(p): p.read_bytes() for p in sorted(tmp_path.glob("*/*.py"))}
    resolved = resolved_imports({p: imported_modules(d) for p, d in absolute.items()}, resolver.module_files)
    staying = {f"{p.parent.name}/{p.name}" for p in groups_on_cpu(absolute, resolved, resolver.importable)}
    # q/cpu.py imports nothing that places, but a pickled object it loaded could bring q/gpu.py's
    # classes; p/lone.py is connected to no other file: nothing shows the program using it
    assert staying == {"p/model.py", "p/train.py", "p/predict.py", "p/server.py"}


@pytest.mark.parametrize("where", ["layers.py", "nets/layers.py"])
def test_a_file_of_the_folder_that_places_keeps_the_default_device(tmp_path: Path, where: str) -> None:
    """A whole pickled model's class may come from any module the script can import by name,
    imported or not: one that moves its inputs (``x = x.cuda()`` in ``forward``) needs the model
    on the GPU where it was."""
    root = _project(tmp_path / "p")
    (root / where).parent.mkdir(exist_ok=True)
    (root / where).write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x.cuda()\n", encoding="utf-8")
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    assert "map_location=device" in next(l for l in out.splitlines() if "TFD005" in l)


@pytest.mark.parametrize("code, placing", [
    ("import torch\nuse = torch.cuda.is_available()\ntorch.cuda.manual_seed(1)\n", False),
    ("import torch\nx = torch.zeros(2).to(torch.float64).to('cpu').to(dtype=torch.int64)\n", False),
    ("import torch\nm = torch.load('m.pt', map_location=lambda storage, loc: storage)\n", False),
    ("import torch\nm = torch.load('m.pt', map_location=torch.device('cpu'))\n", False),
    ("import torch\ny = torch.zeros(2)\nx = torch.ones(2, device=y.device)\n", False),
    ("print 'no torch words in Python 2'\n", False),
    ('"""Adapted from the non-cuda variant of the LSTM."""\nimport torch\n', False),  # prose names no device
    ("import torch\ndef f(x):\n    if isinstance(x, (torch.LongTensor, torch.cuda.LongTensor)):\n        return x\n", False),
    ("import torch\nx = torch.zeros(2).to(f'cuda:{gpu}')\n", True),
    ("import torch\nx = torch.zeros(2).to(torch.device(args.dev if args.dev else 'cuda'))\n", True),
    ("import torch\nm = torch.load('m.pt', map_location=lambda storage, loc: storage.cuda())\n", True),
    ("import torch\nm = torch.load('m.pt', map_location='cuda:0')\n", True),
    ("import torch\nx = torch.zeros(2).to(dev)\n", True),
    ("import torch\nx = torch.zeros(2, device=torch.device('cuda'))\n", True),
    ("import torch.nn as nn\nm = nn.DataParallel(nn.Linear(2, 2))\n", True),
    ("from torch.cuda import FloatTensor\n", True),
    ("import torch\nt = torch.zeros(2).type('torch.cuda.FloatTensor')\n", True),
    ("print 'Python 2'\nx = x.cuda()\n", True),  # unreadable: any word may place
])
def test_what_places_a_value(code: str, placing: bool) -> None:
    assert places(code.encode()) is placing


GENERATE = '''import argparse
import torch
import torch.nn as nn


def generate(model, steps=2, cuda=False):
    x = torch.zeros(1, 2)
    if cuda:
        x = x.cuda()
    for _ in range(steps):
        x = model(x)
    return x.sum().item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("filename")
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    torch.save(nn.Linear(2, 2), args.filename)
    model = torch.load(args.filename, weights_only=False)
    del args.filename
    print(generate(model, **vars(args)))
'''


def test_a_load_outside_the_flag_that_guards_every_move_is_left_for_review(tmp_path: Path) -> None:
    """``generate(model, cuda=args.cuda)`` moves its inputs only under ``--cuda``: a model loaded
    onto ``torch.cuda.is_available()``'s device would meet CPU inputs on any GPU machine."""
    (tmp_path / "generate.py").write_text(GENERATE, encoding="utf-8")
    out = run_cli("check", "generate.py", "--no-cache", cwd=tmp_path).stdout.decode()
    line = next(l for l in out.splitlines() if "TFD005" in l)
    assert "[*]" not in line and "every move of the file is under `if cuda:`" in line, line
    state = GENERATE.replace("torch.save(nn.Linear(2, 2), args.filename)", "model = nn.Linear(2, 2)\n    torch.save(model.state_dict(), args.filename)")
    state = state.replace("model = torch.load(args.filename, weights_only=False)", "model.load_state_dict(torch.load(args.filename))")
    (tmp_path / "generate.py").write_text(state, encoding="utf-8")
    assert run_cli("apply", "generate.py", "--no-cache", cwd=tmp_path).returncode == 0
    assert 'model.load_state_dict(torch.load(args.filename, map_location="cpu"))' in (tmp_path / "generate.py").read_text(encoding="utf-8")
    after = run_script("generate.py", "m.pt", cwd=tmp_path)
    assert after.returncode == 0, after.stderr
