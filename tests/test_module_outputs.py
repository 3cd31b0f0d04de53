"""What calling a module of this file gives (:mod:`torchfix_device.facts.module_outputs`): on the
CPU where the module is made there, never moved or given away, reads no global but imports, and
is given values on the CPU; asked through :func:`~torchfix_device.facts.devices.on_cpu`."""

from __future__ import annotations

import textwrap

import pytest
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
