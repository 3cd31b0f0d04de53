"""The command-line contract (the README's Usage section), through the installed console script.

Every test runs ``torchfix-device`` in a subprocess, the way users and scripts do: stdout and
stderr are pipes, so nothing here may carry colour.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import console_script, run_cli
from torchfix_device import __version__
from torchfix_device.codemods.base import DOC_SECTIONS
from torchfix_device.codemods.catalog import all_codemods

LEGACY = """\
import torch
import torch.nn as nn


def train(model, loader):
    criterion = nn.CrossEntropyLoss()
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        total += loss.data[0]
    return total


state = torch.load("ckpt.pt")
"""
ITEM_LINE = "legacy.py:10:18: TFD006 [*] `.data[0]` on a scalar: use `.item()`"
LOAD_LINE = "legacy.py:14:9: TFD005 [*] `torch.load` without `map_location`: add `map_location=device`"

# TFD012 is an unsafe fix: held back unless unsafe fixes are asked for.
RESIDUAL = """\
import torch.nn as nn


class Block(nn.Module):
    def forward(self, x):
        out = self.body(x)
        out += x
        return self.head(out)
"""

CLEAN = "import os\n\nprint(os.getcwd())\n"
FINDING = re.compile(r"^[^\s:]+\.py:\d+:\d+: TFD\d{3} (\[\*\] )?[^\s[]\S*.*$")  # ruff's concise line
ANSI = b"\x1b["


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.glob("*.py"))}


def _no_traceback(out: subprocess.CompletedProcess) -> str:
    stderr = out.stderr.decode()
    assert "Traceback" not in stderr, stderr
    return stderr


def _plain_env(**extra: str) -> dict[str, str]:
    """The user's environment as a script would have it: no NO_COLOR, no wide COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    return {**env, **extra}


# -- help, version, entry points ---------------------------------------------------------------
def test_help_lists_every_command() -> None:
    for flag in ("--help", "-h"):
        out = run_cli(flag)
        assert out.returncode == 0, _no_traceback(out)
        text = out.stdout.decode()
        for command in ("apply", "check", "rules", "explain", "verify"):
            assert command in text
    apply_help = run_cli("apply", "--help").stdout.decode()
    for option in ("--diff", "--select", "--ignore", "--unsafe-fixes"):
        assert option in apply_help


def test_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0
    assert out.stdout.decode() == f"torchfix-device {__version__}\n"


def test_python_dash_m_is_the_same_program() -> None:
    help_ = subprocess.run([sys.executable, "-m", "torchfix_device", "--help"], capture_output=True)
    assert help_.returncode == 0 and b"apply" in help_.stdout and b"check" in help_.stdout
    version = subprocess.run([sys.executable, "-m", "torchfix_device", "--version"], capture_output=True)
    assert version.stdout.decode() == f"torchfix-device {__version__}\n"


def test_bad_usage_exits_2_without_traceback(project: Path) -> None:
    for args in ((), ("bogus",), ("check", "--frobnicate", ".")):
        out = run_cli(*args, cwd=project)
        assert out.returncode == 2, args
        _no_traceback(out)


def test_apply_without_a_path_works_on_the_current_folder_as_check_does(project: Path) -> None:
    """Issue 33, item 8: ``apply`` with no PATH takes ``.`` (it said "Missing argument 'paths'")."""
    before = {p.name: p.read_bytes() for p in project.glob("*.py")}
    listed = run_cli("check", cwd=project)
    assert listed.returncode == 1 and listed.stdout
    diff = run_cli("apply", "--diff", cwd=project)
    assert diff.returncode == 1 and diff.stdout.startswith(b"--- a/")
    assert {p.name: p.read_bytes() for p in project.glob("*.py")} == before
    out = run_cli("apply", "--allow-dirty", cwd=project)
    assert out.returncode == 0, out.stderr.decode()
    after = {p.name: p.read_bytes() for p in project.glob("*.py")}
    assert after != before and after == {**before, **{n: b for n, b in after.items() if b != before[n]}}
    assert run_cli("apply", "--diff", cwd=project).stdout == b""  # everything the first run could fix


# -- rules and explain -------------------------------------------------------------------------
def test_rules_lists_codemods_with_their_safety() -> None:
    out = run_cli("rules")
    assert out.returncode == 0
    rows = {line.split("│")[1].strip(): line for line in out.stdout.decode().splitlines() if "│ TFD" in line}
    assert "torch-load-without-map-location" in rows["TFD005"] and " safe " in rows["TFD005"]
    assert "loss-data-index" in rows["TFD006"] and " safe " in rows["TFD006"]
    assert any(" unsafe " in row for row in rows.values())  # the column tells the two apart
    assert sorted(rows) == [c.code for c in all_codemods()]  # every registered codemod, in order


def test_rules_keeps_names_whole_in_a_narrow_pipe() -> None:
    """The names are what ``--select`` takes: an 80-column pipe must not cut them to ``…``."""
    out = subprocess.run([*console_script(), "rules"], capture_output=True, env=_plain_env(COLUMNS="80"))
    text = out.stdout.decode()
    assert "torch-load-without-map-location" in text and "…" not in text.split("summary")[0]
    assert ANSI not in out.stdout


def test_explain_shows_every_doc_section() -> None:
    for key in ("TFD005", "tfd005", "torch-load-without-map-location"):
        out = run_cli("explain", key)
        assert out.returncode == 0, _no_traceback(out)
        text = out.stdout.decode()
        assert "TFD005" in text and "torch-load-without-map-location" in text
        for heading in DOC_SECTIONS:
            assert heading in text, heading
        assert "(missing)" not in text
    assert "TFD006" in run_cli("explain", "TFD006").stdout.decode()


def test_explain_unknown_code_exits_2_with_a_clear_message() -> None:
    out = run_cli("explain", "NOPE")
    assert out.returncode == 2
    assert out.stdout == b""
    stderr = _no_traceback(out)
    assert "unknown codemod 'NOPE'" in stderr and "TFD005 (torch-load-without-map-location)" in stderr


# -- check ---------------------------------------------------------------------------------------
def test_check_prints_findings_on_stdout_and_exits_1(project: Path) -> None:
    before = _snapshot(project)
    out = run_cli("check", ".", cwd=project)
    assert out.returncode == 1, _no_traceback(out)
    lines = out.stdout.decode().splitlines()
    assert lines == [ITEM_LINE, LOAD_LINE]
    assert all(FINDING.match(line) for line in lines)
    assert _snapshot(project) == before  # check never writes


def test_check_summary_goes_to_stderr_only(project: Path) -> None:
    out = run_cli("check", ".", cwd=project)
    stderr = _no_traceback(out)
    assert "2 files scanned, 1 would change, 0 failed" in stderr
    assert b"scanned" not in out.stdout
    assert not any(line in stderr for line in (ITEM_LINE, LOAD_LINE))  # findings are not echoed there


def test_check_summary_says_how_to_apply_the_fixes(tmp_path: Path) -> None:
    """Issue 33, item 10: after the summary, how many findings ``apply`` would fix, and how many
    more ``--unsafe-fixes`` would (as ruff's "[*] N fixable with the `--fix` option")."""
    (tmp_path / "m.py").write_text(
        'import torch\n\nstate = torch.load("ckpt.pt")\n\n\ndef move(x, gpu_id):\n    return x.cuda(gpu_id)\n'
    )
    safe = run_cli("check", ".", cwd=tmp_path).stderr.decode().splitlines()
    assert safe[-1] == "1 fixable with `torchfix-device apply`; 1 more with `--unsafe-fixes`", safe
    unsafe = run_cli("check", "--unsafe-fixes", ".", cwd=tmp_path).stderr.decode().splitlines()
    assert unsafe[-1] == "2 fixable with `torchfix-device apply --unsafe-fixes`", unsafe
    only_unsafe = run_cli("check", "--select", "TFD001", ".", cwd=tmp_path).stderr.decode().splitlines()
    assert only_unsafe[-1] == "1 fixable with `torchfix-device apply --unsafe-fixes`", only_unsafe
    quiet = run_cli("check", "-q", ".", cwd=tmp_path)
    assert b"fixable" not in quiet.stderr
    (tmp_path / "m.py").write_text("import os\n")
    clean = run_cli("check", ".", cwd=tmp_path)
    assert b"fixable" not in clean.stderr


def test_check_exits_0_without_findings(project: Path) -> None:
    out = run_cli("check", "clean.py", cwd=project)
    assert out.returncode == 0 and out.stdout == b""
    assert "1 file scanned" in _no_traceback(out)


# -- apply ---------------------------------------------------------------------------------------
def test_apply_diff_prints_the_diff_and_writes_nothing(project: Path) -> None:
    before = _snapshot(project)
    out = run_cli("apply", "--diff", ".", cwd=project)
    assert out.returncode == 1, _no_traceback(out)  # as ruff's --diff: 1 when there are pending changes
    diff = out.stdout.decode()
    assert diff.startswith("--- a/legacy.py\n+++ b/legacy.py\n@@ ")
    assert "-        total += loss.data[0]\n+        total += loss.item()\n" in diff
    assert '-state = torch.load("ckpt.pt")\n+state = torch.load("ckpt.pt", map_location=device)\n' in diff
    assert "clean.py" not in diff
    assert "scanned" not in diff and "1 would change" in out.stderr.decode()
    assert _snapshot(project) == before  # bytes and mtimes


def test_apply_writes_and_a_second_apply_changes_nothing(project: Path) -> None:
    clean_before = _snapshot(project)["clean.py"]
    out = run_cli("apply", ".", cwd=project)
    assert out.returncode == 0, _no_traceback(out)
    assert out.stdout == b""  # everything but a diff goes to stderr
    assert "2 files scanned, 1 changed, 0 failed; fixes: TFD005 ×1, TFD006 ×1" in out.stderr.decode()
    rewritten = (project / "legacy.py").read_text()
    assert "total += loss.item()" in rewritten and 'torch.load("ckpt.pt", map_location=device)' in rewritten
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in rewritten
    after = _snapshot(project)
    assert after["clean.py"] == clean_before

    again = run_cli("apply", ".", cwd=project)
    assert again.returncode == 0 and "0 changed" in again.stderr.decode()
    assert _snapshot(project) == after  # not even touched
    assert run_cli("apply", "--diff", ".", cwd=project).stdout == b""
    assert run_cli("check", ".", cwd=project).returncode == 0


# -- selecting codemods ------------------------------------------------------------------------
def _codes(out: subprocess.CompletedProcess) -> set[str]:
    _no_traceback(out)
    return {line.split()[1] for line in out.stdout.decode().splitlines()}


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--select", "TFD006"), {"TFD006"}),
        (("--select", "loss-data-index"), {"TFD006"}),
        (("--select", "tfd005"), {"TFD005"}),
        (("--select", "TFD005,loss-data-index"), {"TFD005", "TFD006"}),
        (("--select", "TFD005", "--select", "TFD006"), {"TFD005", "TFD006"}),
        (("--select", " TFD005 , TFD006 "), {"TFD005", "TFD006"}),
        (("--ignore", "TFD006"), {"TFD005"}),
        (("--ignore", "torch-load-without-map-location"), {"TFD006"}),
        (("--ignore", "TFD005,TFD006"), set()),
        (("--select", "TFD005,TFD006", "--ignore", "TFD005"), {"TFD006"}),
    ],
)
def test_select_and_ignore(project: Path, args: tuple[str, ...], expected: set[str]) -> None:
    out = run_cli("check", *args, ".", cwd=project)
    assert _codes(out) == expected
    assert out.returncode == (1 if expected else 0)


def test_apply_with_select_only_applies_that_codemod(project: Path) -> None:
    out = run_cli("apply", "--select", "loss-data-index", "legacy.py", cwd=project)
    assert out.returncode == 0, _no_traceback(out)
    text = (project / "legacy.py").read_text()
    assert "loss.item()" in text and 'torch.load("ckpt.pt")' in text and "map_location" not in text


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_code_exits_2(project: Path, option: str) -> None:
    before = _snapshot(project)
    out = run_cli("apply", option, "TFD005,TFD999", ".", cwd=project)
    assert out.returncode == 2
    assert "unknown codemod 'TFD999'" in _no_traceback(out)
    assert _snapshot(project) == before


# -- [tool.torchfix-device] in pyproject.toml ----------------------------------------------------
def _configure(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text(f'[project]\nname = "demo"\n\n[tool.torchfix-device]\n{body}\n')


@pytest.mark.parametrize(
    "body, codes, files",
    [
        ('select = ["TFD005"]', {"TFD005"}, {"legacy.py", "sub/also_legacy.py"}),
        ('select = ["loss-data-index"]', {"TFD006"}, {"legacy.py", "sub/also_legacy.py"}),
        ('ignore = ["TFD005"]', {"TFD006"}, {"legacy.py", "sub/also_legacy.py"}),
        ('exclude = ["legacy.py"]', {"TFD005", "TFD006"}, {"sub/also_legacy.py"}),
        ('exclude = ["legacy.py", "sub/*.py"]', set(), set()),
        ('exclude = ["sub"]', {"TFD005", "TFD006"}, {"legacy.py"}),
    ],
)
def test_pyproject_settings_are_read(project: Path, body: str, codes: set[str], files: set[str]) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "also_legacy.py").write_text(LEGACY)
    _configure(project, body)
    out = run_cli("check", ".", cwd=project)
    assert _codes(out) == codes
    assert {line.split(":")[0] for line in out.stdout.decode().splitlines()} == files


def test_pyproject_is_found_above_the_named_path(project: Path) -> None:
    _configure(project, 'select = ["TFD006"]')
    (project / "pkg").mkdir()
    (project / "pkg" / "legacy.py").write_text(LEGACY)
    assert _codes(run_cli("check", "legacy.py", cwd=project / "pkg")) == {"TFD006"}
    assert _codes(run_cli("check", "pkg", cwd=project)) == {"TFD006"}


def test_command_line_wins_over_pyproject(project: Path) -> None:
    _configure(project, 'select = ["TFD005"]\nignore = ["TFD006"]')
    assert _codes(run_cli("check", ".", cwd=project)) == {"TFD005"}
    assert _codes(run_cli("check", "--select", "TFD006", "--ignore", "TFD005", ".", cwd=project)) == {"TFD006"}


def test_unsafe_fixes_from_pyproject_and_command_line(tmp_path: Path) -> None:
    block = tmp_path / "block.py"
    block.write_text(RESIDUAL)
    held = run_cli("check", ".", cwd=tmp_path).stdout.decode()
    assert "TFD012" in held and "[unsafe fix: rerun with --unsafe-fixes]" in held

    _configure(tmp_path, "unsafe-fixes = true")
    configured = run_cli("check", ".", cwd=tmp_path).stdout.decode()
    assert "TFD012" in configured and "unsafe fix" not in configured
    overridden = run_cli("check", "--no-unsafe-fixes", ".", cwd=tmp_path).stdout.decode()
    assert "[unsafe fix: rerun with --unsafe-fixes]" in overridden

    assert run_cli("apply", "--no-unsafe-fixes", ".", cwd=tmp_path).returncode == 0
    assert block.read_text() == RESIDUAL
    assert run_cli("apply", ".", cwd=tmp_path).returncode == 0
    assert "out = out + x" in block.read_text()


def test_unsafe_fixes_flag_without_config(tmp_path: Path) -> None:
    block = tmp_path / "block.py"
    block.write_text(RESIDUAL)
    assert run_cli("apply", ".", cwd=tmp_path).returncode == 0 and block.read_text() == RESIDUAL
    assert run_cli("apply", "--unsafe-fixes", ".", cwd=tmp_path).returncode == 0
    assert "out = out + x" in block.read_text()


def test_pyproject_without_our_table_means_defaults(project: Path) -> None:
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\n\n[tool.ruff]\nline-length = 99\n')
    assert _codes(run_cli("check", ".", cwd=project)) == {"TFD005", "TFD006"}


@pytest.mark.parametrize(
    "body, message",
    [
        ('selekt = ["TFD005"]', "unknown key(s) selekt"),
        ('select = ["TFD005"]\nunsafe_fixes = true', "unknown key(s) unsafe_fixes"),
        ('select = "TFD005"', "[tool.torchfix-device] select must be a list of strings"),
        ('unsafe-fixes = "yes"', "[tool.torchfix-device] unsafe-fixes must be true or false"),
        ('select = ["TFD999"]', "[tool.torchfix-device]: unknown codemod 'TFD999'"),
        ('ignore = ["no-such-rule"]', "[tool.torchfix-device]: unknown codemod 'no-such-rule'"),
        ("select = [", "cannot read"),
    ],
)
def test_bad_pyproject_exits_2_naming_the_problem(project: Path, body: str, message: str) -> None:
    _configure(project, body)
    before = _snapshot(project)
    for command in ("check", "apply"):
        out = run_cli(command, ".", cwd=project)
        assert out.returncode == 2, command
        stderr = _no_traceback(out)
        assert message in stderr and "pyproject.toml" in stderr, stderr
    assert _snapshot(project) == before


def test_pyproject_table_of_the_wrong_type_exits_2(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool]\ntorchfix-device = 3\n')
    out = run_cli("check", ".", cwd=project)
    assert out.returncode == 2 and "[tool.torchfix-device] must be a table" in _no_traceback(out)


# -- output hygiene ------------------------------------------------------------------------------
def test_no_colour_codes_when_output_is_a_pipe(project: Path) -> None:
    """Without NO_COLOR, with a colour-capable TERM: pipes still get plain text."""
    (project / "broken.py").write_text("import torch\ndef f(:\n")
    env = _plain_env()
    for args in (
        ("apply", "--diff", "."),
        ("check", "."),
        ("rules",),
        ("explain", "TFD005"),
        ("explain", "NOPE"),
        ("check", "--select", "TFD999", "."),
        ("apply", "."),
    ):
        out = subprocess.run([*console_script(), *args], cwd=project, capture_output=True, env=env, timeout=300)
        assert ANSI not in out.stdout, args
        assert ANSI not in out.stderr, args
        assert b"Traceback" not in out.stderr


def test_user_text_is_not_read_as_markup(tmp_path: Path) -> None:
    """File names and messages are printed verbatim, brackets and all (rich markup is off)."""
    folder = tmp_path / "[draft]"
    folder.mkdir()
    (folder / "bad[red].py").write_text("import torch\ndef f(:\n")
    out = run_cli("apply", ".", cwd=tmp_path)
    assert out.returncode == 1
    assert "failed: [draft]/bad[red].py:2:7: syntax error" in _no_traceback(out)
    missing = run_cli("check", "[bold]gone.py", cwd=tmp_path)
    assert missing.returncode == 2 and "no such file or folder: [bold]gone.py" in _no_traceback(missing)


def test_colour_only_on_a_terminal(project: Path) -> None:
    """A terminal gets a coloured diff (and still nothing written); the pipe tests above get none."""
    pexpect = pytest.importorskip("pexpect")
    before = _snapshot(project)
    env = _plain_env(COLUMNS="120")
    child = pexpect.spawn(console_script()[0], ["apply", "--diff", "."], cwd=str(project), env=env, timeout=120)
    child.expect(pexpect.EOF)
    child.close()
    output = child.before
    assert child.exitstatus == 1, output  # pending changes
    assert ANSI in output and b"loss.item()" in output
    assert _snapshot(project) == before


COLOUR = re.compile(rb"\x1b\[(?:\d+;)*(?:3[0-7]|9[0-7]|38|4[0-7]|10[0-7]|48)[;m]")
"""An SGR sequence that sets a colour (bold or underline alone is not colour, as NO_COLOR means it)."""


def test_no_color_wins_over_a_terminal_and_force_color_colours_a_pipe(project: Path) -> None:
    """Issue 33, item 13: ``NO_COLOR`` turns colour off even on a terminal; ``FORCE_COLOR`` turns
    it on in a pipe: the patch, the findings (ruff's colours) and the labels on stderr. A file
    named by ``--output-file`` never gets colour."""
    pexpect = pytest.importorskip("pexpect")
    (project / "broken.py").write_text("import torch\ndef f(:\n")
    for args in (["apply", "--diff", "."], ["check", "."]):
        child = pexpect.spawn(console_script()[0], args, cwd=str(project), env=_plain_env(NO_COLOR="1", COLUMNS="120"), timeout=120)
        child.expect(pexpect.EOF)
        child.close()
        assert b"broken.py" in child.before and not COLOUR.search(child.before), (args, child.before)
    forced = _plain_env(FORCE_COLOR="1")
    diff = subprocess.run([*console_script(), "apply", "--diff", "."], cwd=project, capture_output=True, env=forced, timeout=300)
    assert COLOUR.search(diff.stdout) and b"loss.item()" in diff.stdout, diff.stdout
    check = subprocess.run([*console_script(), "check", "."], cwd=project, capture_output=True, env=forced, timeout=300)
    assert COLOUR.search(check.stdout) and COLOUR.search(check.stderr), (check.stdout, check.stderr)
    assert b"\x1b[1;31mTFD006\x1b[0m \x1b[36m[*]\x1b[0m" in check.stdout  # ruff's: the code red, [*] cyan
    to_file = subprocess.run([*console_script(), "check", "-o", "out.txt", "."], cwd=project, capture_output=True, env=forced, timeout=300)
    assert to_file.returncode == 1 and ANSI not in (project / "out.txt").read_bytes()
    both = subprocess.run([*console_script(), "check", "."], cwd=project, capture_output=True, env={**forced, "NO_COLOR": "1"}, timeout=300)
    assert ANSI not in both.stdout and ANSI not in both.stderr  # NO_COLOR wins


def test_option_placeholders_are_readable_at_80_columns() -> None:
    """Issue 33, item 13: at 80 columns every option that takes a value shows its placeholder
    (``--select CODES``, ``-o, --output-file FILE``) next to its name, never a type name
    (``TEXT``, ``<list[str]>``), and no help line is wider than the terminal."""
    from torchfix_device.cli.flags import BOTH, FLAGS, SWITCH

    for command in BOTH:
        out = subprocess.run([*console_script(), command, "--help"], capture_output=True, env=_plain_env(COLUMNS="80"))
        text = out.stdout.decode()
        assert out.returncode == 0 and max(len(line) for line in text.splitlines()) <= 80, text
        taking = [flag for flag in FLAGS if command in flag.commands and flag.kind != SWITCH and flag.fast]
        assert len(taking) >= 10
        for flag in taking:
            assert re.search(rf"(^ +|, ){re.escape(flag.names[0])} {re.escape(flag.metavar)}(\s|$)", text, re.M), (command, flag.names)
        assert not re.search(r"--[\w-]+ (TEXT|INTEGER|PATH|<)", text), text
        assert "json-lines" in text or command == "apply"


def test_help_and_rules_wrap_and_never_cut_in_a_narrow_pipe() -> None:
    """Help is plain text wrapped to the width; every option name stays whole, as does every
    summary of ``rules`` (one row a line in a pipe)."""
    import typer.main

    from torchfix_device.cli.app import app  # the typer app: its options are what help must show

    command = typer.main.get_command(app)
    for name in ("check", "apply"):
        out = subprocess.run([*console_script(), name, "--help"], capture_output=True, env=_plain_env(COLUMNS="60"))
        text = out.stdout.decode()
        assert out.returncode == 0 and ANSI not in out.stdout and "…" not in text
        options = [opt for param in command.commands[name].params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")]
        assert len(options) > 20
        for option in options:
            assert option in text, (name, option)
    rules = subprocess.run([*console_script(), "rules"], capture_output=True, env=_plain_env(COLUMNS="60")).stdout.decode()
    for codemod in all_codemods():
        assert codemod.summary in rules, codemod.code
