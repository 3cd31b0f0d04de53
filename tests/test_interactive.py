"""``apply --interactive`` (item 1), driven through a real pseudo-terminal with pexpect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import console_script, run_cli

pexpect = pytest.importorskip("pexpect")

LEGACY = """\
import torch

x = torch.randn(3)
x.cuda()
model = torch.load("m.pt").cuda()
"""
DEVICE = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
PROMPT = r"\[y,n,a,d,q,\?\]\? "


def _spawn(cwd: Path, *args: str):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="dumb", COLUMNS="120")
    return pexpect.spawn(console_script()[0], ["apply", "--interactive", *args], cwd=str(cwd), env=env,
                         timeout=120, encoding="utf-8")


def _answer(child, answers: list[str]) -> str:
    """Answer each prompt in turn; return everything shown."""
    seen = []
    for answer in answers:
        child.expect(PROMPT)
        seen.append(child.before)
        child.sendline(answer)
    child.expect(pexpect.EOF)
    seen.append(child.before)
    child.close()
    return "".join(seen).replace("\r", "")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text(LEGACY)
    (tmp_path / "b.py").write_text(LEGACY)
    return tmp_path


def test_each_rewrite_is_shown_with_what_it_needs_and_only_accepted_ones_land(project: Path) -> None:
    child = _spawn(project, "a.py")
    shown = _answer(child, ["?", "y", "n", "n", "y"])
    assert child.exitstatus == 0, shown
    # the first rewrite comes with the device binding it needs, and names its codemod
    first = shown.split("rewrite 2 of 4")[0]
    assert "rewrite 1 of 4" in first and "TFD001 a.py:4:1:" in first
    assert "+" + DEVICE in first and "-x.cuda()\n+x.to(device)\n" in first
    assert "a - apply this rewrite and all remaining ones in this file" in shown  # the help
    assert "TFD002 a.py:4:1:" in shown and "TFD005 a.py:5:9:" in shown
    assert (project / "a.py").read_text() == (
        "import torch\n\n" + DEVICE + "\nx = torch.randn(3)\nx.to(device)\n"
        'model = torch.load("m.pt", map_location=device).cuda()\n'
    )
    assert "1 file scanned, 1 changed" in shown


def test_apply_all_then_skip_file(project: Path) -> None:
    child = _spawn(project, ".")
    shown = _answer(child, ["n", "a", "d"])  # a.py: skip one, accept the rest; b.py: skip all
    assert child.exitstatus == 0, shown
    assert (project / "a.py").read_text() == (  # TFD002 without TFD001 on line 4: assigned back, still .cuda()
        "import torch\n\n" + DEVICE + "\nx = torch.randn(3)\nx = x.cuda()\n"
        'model = torch.load("m.pt", map_location=device).to(device)\n'
    )
    assert (project / "b.py").read_text() == LEGACY


def test_accepting_everything_gives_what_plain_apply_writes(project: Path) -> None:
    child = _spawn(project, "a.py")
    _answer(child, ["y", "y", "y", "y"])
    assert run_cli("apply", "b.py", cwd=project).returncode == 0
    assert (project / "a.py").read_text() == (project / "b.py").read_text() != LEGACY


def test_quit_keeps_what_was_accepted_and_leaves_the_rest(project: Path) -> None:
    child = _spawn(project, ".")
    shown = _answer(child, ["n", "n", "n", "y", "q"])  # a.py: only TFD005; b.py: quit at once
    assert child.exitstatus == 0, shown
    assert (project / "a.py").read_text() == (
        "import torch\n\n" + DEVICE + "\nx = torch.randn(3)\nx.cuda()\n"
        'model = torch.load("m.pt", map_location=device).cuda()\n'
    )
    assert (project / "b.py").read_text() == LEGACY


def test_interactive_needs_a_terminal(project: Path) -> None:
    out = run_cli("apply", "--interactive", ".", cwd=project, input=b"y\n")
    assert out.returncode == 2
    assert b"--interactive needs a terminal" in out.stderr
    assert (project / "a.py").read_text() == LEGACY


def test_ctrl_c_at_the_prompt_quits_keeping_what_was_accepted(project: Path) -> None:
    child = _spawn(project, "a.py")
    child.expect(PROMPT)
    child.sendline("n")
    for _ in range(2):
        child.expect(PROMPT)
        child.sendline("n")
    child.expect(PROMPT)
    child.sendline("y")  # the last one: TFD005 only
    child.expect(pexpect.EOF)
    child.close()
    assert 'torch.load("m.pt", map_location=device).cuda()' in (project / "a.py").read_text()
    child = _spawn(project, "b.py")
    child.expect(PROMPT)
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert "Traceback" not in child.before
    assert child.exitstatus == 130  # as the README says for Ctrl-C
    assert (project / "b.py").read_text() == LEGACY


REGISTERED = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(2, 2)]

    def forward(self, x):
        return self.layers[0](x)


state = torch.load("m.pt")
"""


def test_a_declined_rewrite_has_no_consequences_and_is_not_left_for_review(tmp_path: Path) -> None:
    """Declining TFD004 (which would add ``state_dict`` keys) prints no checkpoint warning and no
    "manual review" line: it was the user's choice, not work left to do."""
    (tmp_path / "net.py").write_text(REGISTERED)
    child = _spawn(tmp_path, "net.py")
    shown = _answer(child, ["n", "y"])  # TFD004: no; TFD005: yes
    assert child.exitstatus == 0, shown
    after = shown.split("rewrite 2 of 2")[1]
    assert "checkpoint" not in after and "manual review" not in after, after
    assert "declined in review: 1" in after
    text = (tmp_path / "net.py").read_text()
    assert "self.layers = [nn.Linear(2, 2)]" in text and 'torch.load("m.pt", map_location=device)' in text


def test_ctrl_c_at_the_prompt_writes_what_was_accepted_says_so_and_exits_130(project: Path) -> None:
    child = _spawn(project, ".")
    child.expect(PROMPT)
    child.sendline("a")  # a.py: every rewrite
    child.expect(PROMPT)  # b.py's first
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    shown = child.before.replace("\r", "")
    assert child.exitstatus == 130, shown
    assert "interrupted at the prompt: the rewrites accepted so far are written (1 file)" in shown
    assert "Traceback" not in shown
    assert (project / "a.py").read_text() != LEGACY and "x = x.to(device)" in (project / "a.py").read_text()
    assert (project / "b.py").read_text() == LEGACY


def test_notebooks_are_skipped_with_a_message(tmp_path: Path) -> None:
    """The README says so: interactive review covers Python files; notebooks are left as they are."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook()
    nb.cells = [new_code_cell("import torch\nm = torch.load('m.pt')")]
    nbformat.write(nb, str(tmp_path / "nb.ipynb"))
    before = (tmp_path / "nb.ipynb").read_bytes()
    child = _spawn(tmp_path, "nb.ipynb")
    child.expect(pexpect.EOF)
    child.close()
    assert "skipped: nb.ipynb: notebooks are not reviewed interactively" in child.before.replace("\r", "")
    assert (tmp_path / "nb.ipynb").read_bytes() == before
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert "notebooks are skipped" in readme


def _pipe_console():
    import io

    from rich.console import Console

    shown = io.StringIO()
    return Console(file=shown, force_terminal=False, no_color=True), shown


def test_ask_line_reads_a_line_and_raises_eoferror_at_the_end_of_input() -> None:
    from torchfix_device.cli.interactive import ask_line

    console, shown = _pipe_console()
    read, write = os.pipe()
    with os.fdopen(read) as stdin, os.fdopen(write, "w") as feed:
        feed.write("y\r\n")
        feed.flush()
        assert ask_line(console, "[y,n]? ", stdin) == "y"
        feed.close()
        with pytest.raises(EOFError):
            ask_line(console, "[y,n]? ", stdin)
    assert shown.getvalue() == "[y,n]? [y,n]? "


def test_ctrl_c_while_ask_line_waits_raises_keyboardinterrupt_and_restores_the_wakeup_fd() -> None:
    """The wait watches a pipe the signal writes to (``signal.set_wakeup_fd``): a Ctrl-C ends it
    whenever it comes, also between the prompt and the read (where ``input()`` lost it), and the
    process's own wakeup fd is put back."""
    import signal
    import threading

    from torchfix_device.cli.interactive import ask_line

    console, _ = _pipe_console()
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    read, write = os.pipe()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    with os.fdopen(read) as stdin:
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                ask_line(console, "? ", stdin)  # nothing is ever written: only the signal ends it
        finally:
            timer.cancel()
            os.close(write)
    assert signal.set_wakeup_fd(before) == before  # the one set before (none here) is back
