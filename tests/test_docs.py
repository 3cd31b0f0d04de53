"""The documentation: generated parts in sync, the README's size and set-up commands, links.

The rules index (docs/rules/README.md) and the rule pages beside it are rendered from the codemods'
docstrings by ``scripts/generate_docs.py``; these tests fail while the committed files differ.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT

from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods, rule_slug

README = ROOT / "README.md"
README_LIMIT = 20_000  # bytes, as `wc -c` counts them: never more characters than that either
REGENERATE = "run `python scripts/generate_docs.py` and commit the result"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_docs", ROOT / "scripts" / "generate_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate_docs = _generator()


def _markdown_files() -> list[Path]:
    files = [README, ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [f for f in files if f.is_file()]


def _without_code_blocks(text: str) -> str:
    return re.sub(r"(?ms)^(```|~~~).*?^\1[^\n]*$", "", text)


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links there are not links)."""
    return re.sub(r"`[^`\n]*`", "", _without_code_blocks(text))


def test_generated_files_are_up_to_date() -> None:
    expected = generate_docs.expected_files(ROOT)
    pages = [p for p in expected if p.parent == generate_docs.RULES_FOLDER and p.name.startswith("TFD")]
    assert len(pages) == len(all_codemods()) > 0  # one page per codemod, and there are codemods
    stale = generate_docs.stale_files(ROOT)
    assert stale == [], f"out of date: {', '.join(p.as_posix() for p in stale)}: {REGENERATE}"


def test_the_rules_index_lists_every_codemod_and_the_readme_links_to_it() -> None:
    """The table lives in docs/rules/README.md (generated); README.md links to it and names at most
    five rule codes, so adding a rule touches its own files only (issue 34)."""
    index = (ROOT / "docs" / "rules" / "README.md").read_text(encoding="utf-8")
    codemods = all_codemods()
    assert len(codemods) >= 16
    for codemod in codemods:
        page = f"{codemod.code}-{codemod.name}.md"
        assert f"[{codemod.code}]({page})" in index, f"{codemod.code} missing from docs/rules/README.md: {REGENERATE}"
        assert (ROOT / "docs" / "rules" / page).is_file()
    readme = README.read_text(encoding="utf-8")
    assert "(docs/rules/README.md)" in readme
    named = set(re.findall(r"\bTFD\d{3}\b", readme))
    assert len(named) <= 5, f"README.md names {len(named)} rule codes: {sorted(named)}"


def test_check_mode_finds_a_stale_page_and_writing_mends_it(tmp_path: Path) -> None:
    assert generate_docs.main(["--root", str(tmp_path)]) == 0  # writes every page into the copy
    assert generate_docs.main(["--check", "--root", str(tmp_path)]) == 0
    page = tmp_path / "docs" / "rules" / generate_docs.page_name(all_codemods()[0])
    page.write_text(page.read_text(encoding="utf-8") + "hand edit\n", encoding="utf-8")
    (tmp_path / "docs" / "rules" / "TFD999-gone.md").write_text("a rule that no longer exists\n", encoding="utf-8")
    stale = {p.as_posix() for p in generate_docs.stale_files(tmp_path)}
    assert stale == {page.relative_to(tmp_path).as_posix(), "docs/rules/TFD999-gone.md"}
    assert generate_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert generate_docs.main(["--root", str(tmp_path)]) == 0
    assert generate_docs.stale_files(tmp_path) == []
    assert not (tmp_path / "docs" / "rules" / "TFD999-gone.md").exists()


def test_fix_tiers_match_what_the_codemods_do() -> None:
    """A report-only codemod changes none of its fixtures, even with unsafe fixes; every other
    codemod turns some ``.in`` fixture into a different ``.out``; the tier agrees with ``safe``."""
    from torchfix_device.engine import transform_source

    codemods = all_codemods()
    assert codemods
    for codemod in codemods:
        tier = generate_docs.fix_tier(codemod)
        assert tier == generate_docs.REPORT_ONLY or (tier == generate_docs.SAFE) == codemod.safe
        folder = ROOT / "tests" / "fixtures" / rule_slug(codemod.__module__)
        inputs = sorted(folder.glob("*.in.py"))
        assert inputs, f"{codemod.code}: no .in.py fixture in {folder}"
        changed = [
            p for p in inputs
            if transform_source(p.read_text(encoding="utf-8"), [codemod], options=RunOptions(unsafe_fixes=True)).text != p.read_text(encoding="utf-8")
        ]
        if tier == generate_docs.REPORT_ONLY:
            assert changed == [], f"{codemod.code} is listed as report only but rewrites {changed}"
        else:
            assert changed, f"{codemod.code} is listed as {tier} but rewrites none of its fixtures"


def test_readme_is_short_enough() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes (limit {README_LIMIT}): move detail to docs/ or benchmarks/"


SETUP_COMMANDS = (
    "python -m venv .venv && . .venv/bin/activate && pip install -e . && torchfix-device apply --diff examples/legacy_project",
    "pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu"
    ' && pip install -e ".[test]" && python -m pytest -q',
)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_readme_holds_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Set-up: two commands"):]
    block = section[section.index("```bash"):section.index("```", section.index("```bash") + 3)]
    lines = [line.strip() for line in block.splitlines()]
    for command in SETUP_COMMANDS:
        assert command in lines, f"README's set-up block lost {command!r}"
    assert "`.ci/run` runs the second command" in text


def test_the_setup_makes_a_virtual_environment_and_takes_torch_from_the_cpu_index() -> None:
    """Issue 33, item 2: on a fresh machine ``pip install torch`` alone is the CUDA build on Linux
    (and a bare system Python may refuse to install at all): the commands make and activate a
    virtual environment first, and name PyTorch's CPU wheel index for torch."""
    first, second = (command.split(" && ") for command in SETUP_COMMANDS)
    assert first[:2] == ["python -m venv .venv", ". .venv/bin/activate"]
    torch_step = second[0].split()
    assert torch_step[:3] == ["pip", "install", "torch==2.13.0"]
    assert torch_step[torch_step.index("--extra-index-url") + 1] == CPU_INDEX
    assert second[1:] == ['pip install -e ".[test]"', "python -m pytest -q"]


def _normalised(command: str) -> str:
    """``python -m pip install --quiet X`` and ``pip install X`` are the same command for CI."""
    command = command.strip().replace("--quiet ", "")
    return command[len("python -m "):] if command.startswith("python -m ") else command


def _ci_lines() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readmes_test_command() -> None:
    ci = [_normalised(line) for line in _ci_lines()]
    steps = [_normalised(part) for part in SETUP_COMMANDS[1].split("&&")]
    assert len(steps) == 3
    for step in steps:
        assert step in ci, f".ci/run does not run README's {step!r}"
    assert [ci.index(step) for step in steps] == sorted(ci.index(step) for step in steps), "README's order"
    assert ci[-1] == "pytest -q", "the suite must be the last command: its exit status is the script's"


def _fake_python(folder: Path, log: Path) -> None:
    """A ``python`` that logs its arguments; ``-m venv DIR`` makes a venv whose ``activate`` puts
    ``DIR/bin`` (another logging ``python``) first on PATH; pytest exits 3."""
    folder.mkdir(parents=True)
    script = folder / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$0 $*" >> "{log}"\n'
        'if [ "$1 $2" = "-m venv" ]; then\n'
        '  mkdir -p "$3/bin" && cp "$0" "$3/bin/python"\n'
        '  printf \'PATH="%s/bin:$PATH"; export PATH; VIRTUAL_ENV="%s"\\n\' "$3" "$3" > "$3/bin/activate"\n'
        "fi\n"
        'if [ "$1 $2" = "-m pytest" ]; then exit 3; fi\n'
        "exit 0\n",
        encoding="utf-8",
    )
    script.chmod(0o755)


def test_ci_installs_into_a_fresh_virtual_environment_and_exits_with_pytests_status(tmp_path: Path) -> None:
    """``.ci/run`` makes a virtual environment with ``python -m venv`` and runs every step with
    its ``python`` (so an install step missing from the README fails CI), and its exit status is
    pytest's. Run with a stand-in ``python`` that logs what it is asked."""
    import os
    import subprocess

    tree = tmp_path / "clone"
    (tree / ".ci").mkdir(parents=True)
    shutil.copy2(ROOT / ".ci" / "run", tree / ".ci" / "run")
    log = tmp_path / "log"
    _fake_python(tmp_path / "bin", log)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(["bash", str(tree / ".ci" / "run")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    calls = [line.split(" ", 1) for line in log.read_text(encoding="utf-8").splitlines()]
    assert calls[0][0] == str(tmp_path / "bin" / "python") and calls[0][1].startswith("-m venv ")
    venv = Path(calls[0][1].split()[2])
    assert not str(venv).startswith(str(ROOT)) and not venv.exists(), "a fresh venv, removed afterwards"
    rest = [(Path(exe), args) for exe, args in calls[1:]]
    assert all(exe == venv / "bin" / "python" for exe, _ in rest), rest
    steps = [_normalised(part) for part in SETUP_COMMANDS[1].split("&&")]
    assert [_normalised("python " + args) for _, args in rest] == [s.replace('"', "") for s in steps]  # as the shell passes them


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file."""
    headings = re.findall(r"(?m)^#{1,6} +(.+?) *$", _without_code_blocks(path.read_text(encoding="utf-8")))
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_to_files_that_exist(path: Path) -> None:
    targets = LINK.findall(_prose(path.read_text(encoding="utf-8")))
    broken = []
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        file, _, anchor = target.partition("#")
        linked = path.parent / file
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)  # the file is there, the heading is not
    assert broken == [], f"{path.relative_to(ROOT)}: links to missing files or headings: {broken}"


def test_the_link_check_sees_links() -> None:
    links = LINK.findall(_prose(README.read_text(encoding="utf-8")))
    assert "CONTRIBUTING.md" in links and any(link.startswith("docs/rules/") for link in links)
    assert LINK.findall(_prose("see `[no](nowhere.md)` and\n```\n[no](nowhere.md)\n```\n")) == []


TEST_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def test_tests_named_by_the_readme_exist() -> None:
    """The safety guarantees name the tests that hold them: each named file and test exists."""
    references = TEST_REFERENCE.findall(README.read_text(encoding="utf-8"))
    assert len(references) >= 10
    missing = []
    for file, test in references:
        source = ROOT / file
        if not source.is_file() or (test and not re.search(rf"(?m)^def {test}\(", source.read_text(encoding="utf-8"))):
            missing.append(f"{file}::{test}" if test else file)
    assert missing == [], f"README names tests that do not exist: {missing}"
