"""The fast path (issue 23, item 11): ``check`` and ``apply`` command lines parsed without the
typer app, so that a run answered from the cache imports neither typer nor rich nor libcst. It
must be the same program: the same options as the typer app, and the same output and exit code
for the same command line (``TORCHFIX_DEVICE_NO_FAST_PATH=1`` forces the typer app)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from conftest import run_cli
from torchfix_device.cli import fast_parser as fastpath
from torchfix_device.cli import flags
from torchfix_device.cli.app import app

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\nx = torch.zeros(2).cuda(dev)\n'
TYPER_ONLY = {"--interactive", "-i", "--help", "-h"}
"""Options the fast path leaves to the typer app."""


def _typer_options(command: str) -> dict[str, tuple[str, bool, bool]]:
    """option → (parameter name, is a flag, is repeatable) of the typer command."""
    found = {}
    for param in typer.main.get_command(app).commands[command].params:
        for opt in (*param.opts, *param.secondary_opts):
            if opt.startswith("-"):
                found[opt] = (param.name, bool(getattr(param, "is_flag", False)), bool(getattr(param, "multiple", False)))
    return found


@pytest.mark.parametrize("command", ["check", "apply"])
def test_the_fast_path_knows_the_typer_options_with_their_meaning(command: str) -> None:
    typer_options = _typer_options(command)
    table = fastpath.OPTIONS[command]
    assert set(table) == set(typer_options) - TYPER_ONLY
    for option, (field, kind) in table.items():
        name, is_flag, multiple = typer_options[option]
        assert field == name, option
        assert is_flag == (kind in (fastpath.TRUE, fastpath.FALSE)), option
        assert multiple == (kind == flags.LIST), option


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--help"], ["check", "-h"], ["apply", "-i", "."], ["check", "--frobnicate", "."], ["check", "--jobs", "0"],
        ["check", "--jobs", "two"], ["check", "--output-format", "xml"], ["check", "--select"], ["check", "--select", "--diff"],
        ["check", "--diff=yes"], ["check", "-qv"], ["check", "--", "x.py"], ["rules"], ["--version"], [],
    ],
)
def test_the_typer_app_answers_what_the_fast_path_does_not_read(argv: list[str]) -> None:
    assert fastpath.parse(argv) is None


def test_the_fast_path_reads_values_as_typer_does() -> None:
    args = fastpath.parse(["check", "a.py", "--select=TFD001", "-j", "2", "--select", "TFD005", "--output-format", "JSON", "-", "-q"])
    assert args is not None
    assert [str(p) for p in args.paths] == ["a.py", "-"]
    assert args.select == ["TFD001", "TFD005"] and args.jobs == 2 and args.output_format == "json" and args.quiet
    assert fastpath.parse(["apply", "--no-unsafe-fixes", "x.py"]).unsafe_fixes is False
    assert fastpath.parse(["apply"]).paths == []  # the current folder, as for check


def test_every_option_of_the_table_reaches_both_parsers() -> None:
    """One table (cli/flags.py) makes both: each spelling of each flag is an option of the typer
    command, and the fast parser reads it unless the flag says otherwise."""
    for command in flags.BOTH:
        typer_options = _typer_options(command)
        spellings = 0
        for flag in flags.flags_of(command):
            for name in (*flag.names, *([flag.negative] if flag.negative else [])):
                assert typer_options[name][0] == flag.field, name
                assert (name in fastpath.OPTIONS[command]) == flag.fast, name
                spellings += 1
        assert spellings == len(typer_options)


CASES = [
    ("check", "."),
    ("check",),
    ("check", "-q", "--statistics", "."),
    ("check", "--output-format", "json", "--select", "ALL", "--ignore", "TFD001", "."),
    ("check", "--output-format", "sarif", "--no-cache", "-j", "1", "."),
    ("check", "--show-fixes", "--exit-zero", "--extend-select", "TFD00", "m.py"),
    ("check", "missing.py", "m.py"),
    ("check", "--select", "NOPE", "."),
    ("check", "--config", "selekt = 1", "."),
    ("check", "--isolated", "--exclude", "m.py", "."),
    ("apply", "--diff", "."),
    ("apply", "--diff"),
    ("apply", "--diff", "--output-dir", "out", "."),
    ("check", "--fix", "--show-fixes", "."),
    ("apply", "--unsafe-fixes", "--exit-non-zero-on-fix", "."),
    ("check", "--add-noqa", "."),
]


def _run(argv: tuple[str, ...], cwd: Path, fast: bool) -> tuple[int, bytes, bytes]:
    out = run_cli(*argv, cwd=cwd, env={} if fast else {fastpath.DISABLE_ENV: "1"})
    return out.returncode, out.stdout, out.stderr


def test_fast_path_and_typer_app_give_the_same_output_and_exit_code(tmp_path: Path) -> None:
    """Each command line in a fresh copy of the same project, once each way."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "m.py").write_text(LEGACY)
    (project / "clean.py").write_text("import os\n")
    work = tmp_path / "work"  # the same path each time: sarif and messages name it
    compared = 0
    for argv in CASES:
        outcomes = []
        for fast in (True, False):
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(project, work)
            code, stdout, stderr = _run(argv, work, fast)
            files = {p.relative_to(work).as_posix(): p.read_bytes() for p in sorted(work.rglob("*.py"))}
            outcomes.append((code, stdout, stderr, files))
        assert outcomes[0] == outcomes[1], argv
        assert b"Traceback" not in outcomes[0][2], argv
        compared += 1
    assert compared == len(CASES)


def test_a_warm_run_imports_no_typer_rich_or_libcst(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(f"# {tmp_path}: not in the cache yet\n" + LEGACY)
    probe = (
        "import sys\n"
        "from torchfix_device.cli import main\n"
        "try:\n    main(sys.argv[1:])\n"
        "except SystemExit as exit:\n    code = exit.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'libcst', 'typer', 'rich', 'click', 'pydantic', 'torch'})\n"
        "print('HEAVY', code, ','.join(heavy), file=sys.stderr)\n"
    )
    env = {**os.environ, "NO_COLOR": "1"}
    cold = subprocess.run([sys.executable, "-c", probe, "check", "m.py"], cwd=tmp_path, capture_output=True, env=env)
    assert cold.stderr.decode().splitlines()[-1] == "HEAVY 1 libcst", cold.stderr.decode()  # the cold run parsed
    for argv in (["check", "m.py"], ["check", "--output-format", "json", "."], ["apply", "--diff", "m.py"], ["check", "-v", "--statistics"]):
        warm = subprocess.run([sys.executable, "-c", probe, *argv], cwd=tmp_path, capture_output=True, env=env)
        assert warm.stderr.decode().splitlines()[-1] == "HEAVY 1 ", (argv, warm.stderr.decode())
    again = subprocess.run([sys.executable, "-c", probe, "check", "m.py"], cwd=tmp_path, capture_output=True, env=env)
    assert again.stdout == cold.stdout and b"TFD005" in again.stdout
