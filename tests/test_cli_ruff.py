"""The command line a ruff user expects (issue 23): ruff's flags with ruff's meanings and exit
codes, through the installed console script. docs/cli.md maps each ruff flag to ours."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, console_script, run_cli, sweep_sample

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
# TFD006 is fixed, TFD013 is report only: after `check --fix` one finding remains
REPORT_ONLY = """\
import torch.nn as nn


class Head(nn.Module):
    def forward(self, x):
        layer = nn.Linear(4, 2)
        return layer(x)
"""
CLEAN = "import os\n\nprint(os.getcwd())\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def _err(out: subprocess.CompletedProcess) -> str:
    text = out.stderr.decode()
    assert "Traceback" not in text, text
    return text


def _codes(out: subprocess.CompletedProcess) -> set[str]:
    _err(out)
    return {line.split()[1] for line in out.stdout.decode().splitlines()}


# -- exit codes of --diff (item 1) ----------------------------------------------------------------
def test_diff_exits_1_with_pending_changes_0_without_and_2_on_bad_usage(project: Path) -> None:
    for command in (("apply", "--diff"), ("check", "--diff"), ("check", "--fix", "--diff")):
        pending = run_cli(*command, ".", cwd=project)
        assert pending.returncode == 1 and pending.stdout.startswith(b"--- a/legacy.py\n"), command
        nothing = run_cli(*command, "clean.py", cwd=project)
        assert nothing.returncode == 0 and nothing.stdout == b"", command
        assert run_cli(*command, "--exit-zero", ".", cwd=project).returncode == 0
    (project / "broken.py").write_text("import torch\ndef f(:\n")
    left_out = run_cli("apply", "--diff", "broken.py", "clean.py", cwd=project)
    assert left_out.returncode == 1 and "failed: broken.py:2:7: syntax error" in _err(left_out)
    for bad in (("--select", "TFD999"), ("--config", "nope.toml"), ("--shard", "5/4")):
        assert run_cli("check", "--diff", *bad, ".", cwd=project).returncode == 2, bad
    assert (project / "legacy.py").read_text() == LEGACY


# -- check --fix, --show-fixes, --exit-non-zero-on-fix ----------------------------------------------
def test_check_fix_writes_the_fixes_and_reports_what_remains(project: Path) -> None:
    (project / "head.py").write_text(REPORT_ONLY)
    out = run_cli("check", "--fix", "--show-fixes", cwd=project)  # no PATH: the current folder
    stderr = _err(out)
    assert out.returncode == 1  # a finding remains (TFD013 is report only)
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("head.py:6:17: TFD013 ") and lines[0].endswith("[manual review]")
    assert "Fixed 2 findings:\n- legacy.py:\n    1 × TFD005 (torch-load-without-map-location)\n    1 × TFD006 (loss-data-index)" in stderr
    assert "loss.item()" in (project / "legacy.py").read_text()
    again = run_cli("check", "--fix", "--exit-non-zero-on-fix", "legacy.py", cwd=project)
    assert again.returncode == 0 and again.stdout == b""  # nothing left, nothing fixed
    (project / "legacy.py").write_text(LEGACY)
    fixed = run_cli("check", "--fix", "--exit-non-zero-on-fix", "legacy.py", cwd=project)
    assert fixed.returncode == 1 and fixed.stdout == b""  # fixed everything, and says so by its exit code
    (project / "legacy.py").write_text(LEGACY)
    plain = run_cli("check", "--fix", "legacy.py", cwd=project)
    assert plain.returncode == 0 and "loss.item()" in (project / "legacy.py").read_text()
    (project / "legacy.py").write_text(LEGACY)
    applied = run_cli("apply", "--exit-non-zero-on-fix", "legacy.py", cwd=project)
    assert applied.returncode == 1 and "1 changed" in _err(applied)


def test_show_fixes_in_a_dry_run(project: Path) -> None:
    out = run_cli("check", "--show-fixes", ".", cwd=project)
    assert "Would fix 2 findings:\n- legacy.py:\n" in _err(out)
    assert (project / "legacy.py").read_text() == LEGACY


# -- --statistics, --output-file, --exit-zero, -q, -v -----------------------------------------------
def test_statistics_as_ruff_prints_them(project: Path) -> None:
    (project / "head.py").write_text(REPORT_ONLY)
    (project / "more.py").write_text(LEGACY)
    out = run_cli("check", "--statistics", ".", cwd=project)
    assert out.returncode == 1
    assert out.stdout.decode().splitlines() == [
        "2\tTFD005\t[*] torch-load-without-map-location",
        "2\tTFD006\t[*] loss-data-index",
        "1\tTFD013\t[ ] layer-built-in-forward",
    ]
    data = json.loads(run_cli("check", "--statistics", "--output-format", "json", ".", cwd=project).stdout)
    assert data[0] == {"code": "TFD005", "name": "torch-load-without-map-location", "count": 2, "fixable": True, "fixable_count": 2}


def test_output_file_exit_zero_quiet_and_verbose(project: Path) -> None:
    out = run_cli("check", "--output-file", "findings.txt", "--exit-zero", "-q", ".", cwd=project)
    assert out.returncode == 0 and out.stdout == b""
    assert _err(out) == ""  # -q: no summary
    written = (project / "findings.txt").read_text().splitlines()
    assert [line.split()[1] for line in written] == ["TFD006", "TFD005"]
    patch = run_cli("apply", "--diff", "-o", "fix.patch", ".", cwd=project)
    assert patch.returncode == 1 and patch.stdout == b"" and (project / "fix.patch").read_text().startswith("--- a/legacy.py")
    bad = run_cli("check", "--output-file", "no/such/folder/x.txt", ".", cwd=project)
    assert bad.returncode == 2 and "no such folder" in _err(bad)
    verbose = run_cli("check", "-v", ".", cwd=project)
    stderr = _err(verbose)
    for expected in ("configuration: none (defaults)", "codemods: TFD001 TFD002", "cache: ", "legacy.py: changed", "done in "):
        assert expected in stderr, expected


# -- configuration: --config, --isolated, [tool.torchfix_device], max-file-size --------------------
def test_config_file_overrides_and_isolated(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchfix-device]\nselect = ["TFD005"]\n')
    (project / "other.toml").write_text('[tool.torchfix-device]\nselect = ["TFD006"]\n')
    (project / "torchfix.toml").write_text('select = ["loss-data-index"]\n')  # top-level keys, as ruff.toml
    assert _codes(run_cli("check", ".", cwd=project)) == {"TFD005"}
    assert _codes(run_cli("check", "--config", "other.toml", ".", cwd=project)) == {"TFD006"}
    assert _codes(run_cli("check", "--config", "torchfix.toml", ".", cwd=project)) == {"TFD006"}
    assert _codes(run_cli("check", "--isolated", ".", cwd=project)) == {"TFD005", "TFD006"}
    assert _codes(run_cli("check", "--config", 'select = ["TFD006"]', ".", cwd=project)) == {"TFD006"}
    assert _codes(run_cli("check", "--config", "other.toml", "--config", "ignore = ['TFD006']", ".", cwd=project)) == set()
    missing = run_cli("check", "--config", "nope.toml", ".", cwd=project)
    assert missing.returncode == 2 and "--config nope.toml: no such file" in _err(missing)
    bad = run_cli("check", "--config", "selekt = 3", ".", cwd=project)
    assert bad.returncode == 2 and "unknown key(s) selekt" in _err(bad)


def test_underscore_table_is_read_and_both_spellings_are_refused(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchfix_device]\nselect = ["TFD006"]\n')
    assert _codes(run_cli("check", ".", cwd=project)) == {"TFD006"}
    (project / "pyproject.toml").write_text('[tool.torchfix_device]\nselect = ["TFD006"]\n[tool.torchfix-device]\nselect = ["TFD005"]\n')
    both = run_cli("check", ".", cwd=project)
    assert both.returncode == 2 and "both [tool.torchfix-device] and [tool.torchfix_device]" in _err(both)


def test_max_file_size_raises_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    big.write_text(LEGACY + "# " + "padding " * 150_000 + "\n")  # 1.2 MB (one comment: quick to parse)
    out = run_cli("check", "big.py", cwd=tmp_path)
    assert out.returncode == 0 and "over the 1 MB limit" in _err(out) and "--max-file-size" in _err(out)
    raised = run_cli("check", "--max-file-size", "2MB", "big.py", cwd=tmp_path)
    assert raised.returncode == 1 and b"TFD005" in raised.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.torchfix-device]\nmax-file-size = "1.5 MB"\n')
    assert run_cli("check", "big.py", cwd=tmp_path).returncode == 1
    nonsense = run_cli("check", "--max-file-size", "lots", "big.py", cwd=tmp_path)
    assert nonsense.returncode == 2 and "--max-file-size" in _err(nonsense)


# -- which files: --exclude, --extend-exclude, --force-exclude -------------------------------------
def test_exclude_extend_exclude_and_force_exclude(project: Path) -> None:
    (project / "vendor").mkdir()
    (project / "vendor" / "old.py").write_text(LEGACY)
    (project / "pyproject.toml").write_text('[tool.torchfix-device]\nexclude = ["vendor"]\n')
    files = lambda out: {line.split(":")[0] for line in out.stdout.decode().splitlines()}  # noqa: E731
    assert files(run_cli("check", ".", cwd=project)) == {"legacy.py"}
    assert files(run_cli("check", "--exclude", "legacy.py", ".", cwd=project)) == {"vendor/old.py"}  # replaces
    assert files(run_cli("check", "--extend-exclude", "legacy.py", ".", cwd=project)) == set()  # adds
    # named on the command line: taken, unless --force-exclude (what pre-commit hooks need)
    assert files(run_cli("check", "vendor/old.py", "legacy.py", cwd=project)) == {"vendor/old.py", "legacy.py"}
    forced = run_cli("check", "--force-exclude", "vendor/old.py", "legacy.py", cwd=project)
    assert files(forced) == {"legacy.py"} and "1 skipped (1 excluded)" in _err(forced)
    applied = run_cli("apply", "--allow-dirty", "--force-exclude", "vendor/old.py", cwd=project)
    assert applied.returncode == 0 and (project / "vendor" / "old.py").read_text() == LEGACY


def test_the_pre_commit_hooks_force_the_exclusions() -> None:
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    entries = [line.split(":", 1)[1].split() for line in hooks.splitlines() if line.strip().startswith("entry:")]
    assert len(entries) == 2 and all("--force-exclude" in entry for entry in entries)


# -- selecting: ALL, prefixes, --extend-select ------------------------------------------------------
@pytest.mark.parametrize(
    "args, expected",
    [
        (("--select", "ALL"), {"TFD005", "TFD006"}),
        (("--select", "TFD00"), {"TFD005", "TFD006"}),
        (("--select", "TFD"), {"TFD005", "TFD006"}),
        (("--select", "TFD005", "--extend-select", "TFD006"), {"TFD005", "TFD006"}),
        (("--select", "ALL", "--ignore", "TFD006"), {"TFD005"}),
        (("--ignore", "TFD00"), set()),
    ],
)
def test_select_all_prefixes_and_extend_select(project: Path, args: tuple[str, ...], expected: set[str]) -> None:
    out = run_cli("check", *args, ".", cwd=project)
    assert _codes(out) == expected
    assert out.returncode == (1 if expected else 0)


def test_unknown_prefix_is_a_usage_error(project: Path) -> None:
    out = run_cli("check", "--select", "TFD9", ".", cwd=project)
    assert out.returncode == 2 and "unknown codemod 'TFD9'" in _err(out)


# -- --cache-dir ------------------------------------------------------------------------------------
def test_cache_dir(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.mktemp("cache") / "here"
    first = run_cli("check", "--cache-dir", str(cache), "-v", ".", cwd=project)
    assert f"cache: {cache}" in _err(first) and any(cache.rglob("*.json"))
    second = run_cli("check", "--cache-dir", str(cache), "-v", ".", cwd=project)
    assert "legacy.py: changed (cached result)" in _err(second)
    env = {**os.environ, "NO_COLOR": "1", "TORCHFIX_DEVICE_CACHE_DIR": str(cache)}
    via_env = subprocess.run([*console_script(), "check", "-v", "."], cwd=project, capture_output=True, env=env)
    assert "legacy.py: changed (cached result)" in _err(via_env)


# -- --add-noqa -------------------------------------------------------------------------------------
def test_add_noqa_silences_every_finding_and_a_second_run_adds_none(project: Path) -> None:
    (project / "multi.py").write_text(
        "import torch\n\nx = torch.load(  # weights\n    'a.pt'\n)\ny = torch.load('b.pt')  # noqa: E501\n"
    )
    out = run_cli("check", "--add-noqa", ".", cwd=project)
    assert out.returncode == 0 and "Added 4 noqa directives." in _err(out)
    assert (project / "multi.py").read_text() == (
        "import torch\n\nx = torch.load(  # weights\n    'a.pt'\n)  # noqa: TFD005\n"
        "y = torch.load('b.pt')  # noqa: E501, TFD005\n"
    )
    assert "total += loss.data[0]  # noqa: TFD006\n" in (project / "legacy.py").read_text()
    assert run_cli("check", ".", cwd=project).returncode == 0  # nothing reported any more
    again = run_cli("check", "--add-noqa", ".", cwd=project)
    assert "Added 0 noqa directives." in _err(again)
    assert (project / "clean.py").read_text() == CLEAN
    both = run_cli("check", "--add-noqa", "--fix", ".", cwd=project)
    assert both.returncode == 2


# -- rules and explain -----------------------------------------------------------------------------
def test_rules_shows_the_fix_tier_and_json() -> None:
    text = run_cli("rules").stdout.decode()
    row = next(line for line in text.splitlines() if "TFD013" in line)
    assert "report only" in row and " safe " not in row
    records = json.loads(run_cli("rules", "--output-format", "json").stdout)
    tiers = {r["code"]: r["fix"] for r in records}
    assert tiers["TFD013"] == "report only" and tiers["TFD001"] == "safe fix" and tiers["TFD012"] == "unsafe fix"
    assert all({"code", "name", "fix", "summary", "explanation"} <= set(r) for r in records)
    assert "## What it does" in records[0]["explanation"]


def test_explain_all() -> None:
    out = run_cli("explain", "--all")
    text = out.stdout.decode()
    assert out.returncode == 0
    codes = [line.split()[1] for line in text.splitlines() if line.startswith("# TFD")]
    records = json.loads(run_cli("rules", "--output-format", "json").stdout)
    assert codes == [r["code"] for r in records] and len(codes) > 10
    assert "Fix: report only" in text
    assert run_cli("explain").returncode == 2  # a CODE or --all


# -- syntax errors are always reported (item 8) -----------------------------------------------------
def test_a_syntax_error_is_reported_in_a_file_without_torch_and_from_stdin(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("def f(:\n    pass\n")
    out = run_cli("check", "plain.py", cwd=tmp_path)
    assert out.returncode == 1 and "failed: plain.py:1:7: syntax error" in _err(out)
    for command in ("check", "apply"):
        piped = run_cli(command, "-", cwd=tmp_path, input=b"def f(:\n")
        assert piped.returncode == 1, command
        assert "syntax error" in _err(piped)


# -- messages are deterministic (item 4) -------------------------------------------------------------
LOADED_MODEL = """\
import torch


def main():
    model = torch.load("m.pt")
    y = model(torch.zeros(1))
    model.eval()
    z = model(y)
    model.train()
    print(model.state_dict())
    return model.cuda()(z)
"""


def _check_with_hash_seed(seed: str, *paths: str, cwd: Path) -> bytes:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONHASHSEED": seed}
    out = subprocess.run([*console_script(), "check", "--no-cache", "--unsafe-fixes", *paths], capture_output=True, env=env, cwd=cwd)
    assert out.returncode == 1 and b"TFD015" in out.stdout
    return out.stdout


def test_the_same_input_prints_the_same_text_in_every_run_and_hash_seed(tmp_path: Path) -> None:
    """TFD015 named the first use of the loaded model it met in a set (``it is called`` in one
    run, ``.train`` in another): that file under many seeds."""
    (tmp_path / "loaded.py").write_text(LOADED_MODEL)
    loaded = {_check_with_hash_seed(seed, "loaded.py", cwd=tmp_path) for seed in ("0", "1", "2", "3", "5", "8", "13", "21")}
    assert len(loaded) == 1 and b"used as a model (it is called)" in loaded.pop()  # the first use in the source


@pytest.mark.sweep
def test_the_fixtures_print_the_same_text_under_two_hash_seeds(tmp_path: Path) -> None:
    """The fixtures and examples (CI: a sample with every codemod's folder) under two seeds."""
    everything = [str(p) for p in sweep_sample([*FIXTURES.rglob("*.py"), *(ROOT / "examples").rglob("*.py")])]
    assert _check_with_hash_seed("0", *everything, cwd=tmp_path) == _check_with_hash_seed("4", *everything, cwd=tmp_path)


def test_check_fix_on_stdin_writes_the_fixed_source_and_lists_what_remains_on_stderr(tmp_path: Path) -> None:
    source = b'import torch\nx = torch.load("a")\ny = torch.zeros(2).cuda(dev)\n'
    out = run_cli("check", "--fix", "-", cwd=tmp_path, input=source)
    assert out.returncode == 1  # the explicit .cuda(dev) remains
    assert b'torch.load("a", map_location=device)' in out.stdout and b"TFD001" not in out.stdout
    assert "-:3:5: TFD001 " in _err(out)
