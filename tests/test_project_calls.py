"""What calling a module of this file gives (:mod:`torchfix_device.facts.project_calls`): on the
CPU where the module is made there, never moved or given away, reads no global but imports, and
is given values on the CPU; asked through :func:`~torchfix_device.facts.devices.on_cpu`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import run_cli, run_script
from test_value_facts import HEADER, ask

from torchfix_device.facts import devices

MODULE = HEADER + textwrap.dedent("""
import math


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1).float()
        pe[:, 0::2] = torch.sin(position * math.exp(-1.0))
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + Variable(self.pe[:, :x.size(1)], requires_grad=False))


model = nn.Linear(4, 2).cuda()
pe = PositionalEncoding(20, 0)
pe.eval()
""")


def test_the_output_of_a_module_of_this_file_that_stays_on_the_cpu() -> None:
    source = MODULE + textwrap.dedent("""
    def plot(batch):
        y = pe.forward(Variable(torch.zeros(1, 100, 20)))
        probe(y); probe(y[0, :, 4:8].data); probe(pe(torch.zeros(1, 3, 20))); probe(pe(batch)); probe(model(torch.zeros(4)))
    """)
    assert ask(source, devices.on_cpu) == [True, True, True, False, False]


@pytest.mark.parametrize(
    "change",
    [
        "pe.cuda()\n",  # moved in place
        "pe = pe.to(torch.device('cuda'))\n",  # moved and bound again
        "wrapped = nn.DataParallel(pe)\n",  # given away
        "keep = [pe]\n",  # stored
        "pe.apply(lambda m: m.cuda())\n",  # a function run on it
        "def to_gpu():\n    global pe\n    pe = pe.cuda()\n",  # moved by a function, through `global`
        "def to_gpu():\n    pe.cuda()\n",  # moved by a function that reads the global
    ],
)
def test_a_module_moved_given_or_stored_may_be_elsewhere(change: str) -> None:
    source = MODULE + change + "probe(pe(torch.zeros(1, 3, 20)))\n"
    assert ask(source, devices.on_cpu) == [False]


def test_a_module_reading_a_global_or_built_from_a_tensor_may_be_elsewhere() -> None:
    with_global = MODULE.replace("import math\n", "import math\nshift = torch.ones(20).cuda()\n").replace(
        "return self.dropout(x + ", "return self.dropout(shift + x + ")
    assert ask(with_global + "probe(pe(torch.zeros(1, 3, 20)))\n", devices.on_cpu) == [False]
    moved_inside = MODULE.replace('self.register_buffer("pe", pe.unsqueeze(0))', 'self.register_buffer("pe", pe.unsqueeze(0).cuda())')
    assert ask(moved_inside + "probe(pe(torch.zeros(1, 3, 20)))\n", devices.on_cpu) == [False]
    from_tensor = MODULE.replace("pe = PositionalEncoding(20, 0)", "pe = PositionalEncoding(torch.ones(2).cuda(), 0)")
    assert ask(from_tensor + "probe(pe(torch.zeros(1, 3, 20)))\n", devices.on_cpu) == [False]


# -- dimensions of a project module's output, of an attribute kept on self ------------------------
MODEL = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class DQN(nn.Module):
    def __init__(self, atoms, actions):
        super(DQN, self).__init__()
        self.atoms, self.actions = atoms, actions
        self.fc_v = nn.Linear(8, atoms)
        self.fc_a = nn.Linear(8, actions * atoms)

    def forward(self, x):
        v, a = self.fc_v(x).view(-1, 1, self.atoms), self.fc_a(x).view(-1, self.actions, self.atoms)
        return F.softmax(v + a - a.mean(1, keepdim=True), dim=2)
'''

AGENT = '''import json

import torch
from model import DQN


class Agent(object):
    def __init__(self, cuda=False):
        self.online_net = DQN(5, 3)
        self.support = torch.linspace(-1, 1, 5)
        if cuda:
            self.online_net.cuda()
            self.support = self.support.cuda()

    def value(self, states):
        total = 0
        for state in states:
            total += (self.online_net(state.unsqueeze(0)).data * self.support).sum(2).max(1)[0][0]
        return total


def main():
    torch.manual_seed(0)
    agent = Agent()
    print(json.dumps({"value": agent.value(torch.randn(4, 8))}))


main()
'''


def _agent(root: Path, model: str = MODEL, agent: str = AGENT) -> Path:
    root.mkdir(parents=True)
    (root / "model.py").write_text(model, encoding="utf-8")
    (root / "agent.py").write_text(agent, encoding="utf-8")
    return root


def test_the_output_of_a_module_of_another_file_has_the_dimensions_its_forward_shows(tmp_path: Path) -> None:
    """Rainbow's ``(self.online_net(s).data * self.support).sum(2).max(1)[0][0]``: a Python number
    in 0.3 (a 1-element vector's element), a 0-dim tensor since 0.4, here summed into a counter that
    starts from a number; ``DQN.forward`` (another file) returns a 3-dim tensor whatever its input,
    ``self.support`` is the 1-dim ``linspace`` its class keeps (moved or not): ``.item()``."""
    pytest.importorskip("torch")
    root = _agent(tmp_path / "p")
    before = run_script("agent.py", cwd=root)
    assert before.returncode != 0 and "Object of type Tensor is not JSON serializable" in before.stderr, before.stderr
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    text = (root / "agent.py").read_text(encoding="utf-8")
    assert ".max(1)[0][0].item()" in text, text
    after = run_script("agent.py", cwd=root)
    assert after.returncode == 0 and after.stdout.startswith('{"value": '), after.stderr
    # what 0.3 printed: the same program where the element is the Python number of a 1-element vector
    (root / "agent.py").write_text(AGENT.replace(".max(1)[0][0]", ".max(1)[0].reshape(-1)[0].item()"), encoding="utf-8")
    assert run_script("agent.py", cwd=root).stdout == after.stdout


@pytest.mark.parametrize(
    ("model", "agent"),
    [
        (MODEL.replace("return F.softmax(v + a - a.mean(1, keepdim=True), dim=2)",
                       "if x.dim() > 1:\n            return v.sum(1)\n        return F.softmax(v + a, dim=2)"), AGENT),  # returns disagree
        (MODEL, AGENT.replace("    def value(", "    def widen(self):\n        self.support.unsqueeze_(0)\n\n    def value(")),  # reshaped in place
        (MODEL, AGENT.replace("    agent = Agent()\n", "    agent = Agent()\n    agent.support = torch.ones(2, 5)\n")),  # set from outside
    ],
)
def test_dimensions_not_shown_leave_the_element_alone(tmp_path: Path, model: str, agent: str) -> None:
    root = _agent(tmp_path / "p", model, agent)
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert ".max(1)[0][0].item()" not in (root / "agent.py").read_text(encoding="utf-8")
