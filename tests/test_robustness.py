"""Hostile input, interruption, a broken codemod, and generated programs (issue 7).

Every hostile file gets a clear per-file message and is left byte-identical; the other files
are still processed; no run ends in a traceback, a crash or a half-written file.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import console_script, run_cli
from torchfix_device.options import RunOptions
from torchfix_device import engine
from torchfix_device.report import console as report
from torchfix_device.codemods.base import Codemod
from torchfix_device.codemods.catalog import REGISTRY, all_codemods
from torchfix_device.files.sources import TEMP_SUFFIX
from torchfix_device.engine import transform_source
from torchfix_device.files.selection import MAX_FILE_BYTES
from torchfix_device.run.runner import run

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)\n'
)


def _stderr(out: subprocess.CompletedProcess) -> str:
    text = out.stderr.decode()
    assert "Traceback" not in text, text
    return text


def _temp_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX))


def _problem_lines(results) -> str:
    buffer = io.StringIO()
    report.print_problems(results, Console(file=buffer, no_color=True, width=300))
    return buffer.getvalue()


# -- hostile input ------------------------------------------------------------------------------
def test_ten_megabyte_file_is_skipped_with_the_limit_named(tmp_path: Path) -> None:
    """libcst handles roughly 0.1-0.5 MB a minute: a 10 MB file would stall the run for an
    hour, so files over ``MAX_FILE_BYTES`` are skipped at once with a message naming the limit."""
    line = b'x = torch.load("model.pt").cuda()  # padding padding padding padding\n'
    huge = tmp_path / "huge.py"
    huge.write_bytes(b"import torch\n" + line * (10_000_000 // len(line) + 1))
    assert huge.stat().st_size > 10_000_000 > MAX_FILE_BYTES
    content = huge.read_bytes()
    (tmp_path / "good.py").write_text(LEGACY)
    started = time.monotonic()
    out = run_cli("apply", ".", cwd=tmp_path)
    elapsed = time.monotonic() - started
    stderr = _stderr(out)
    assert out.returncode == 0, stderr  # skipped, like a symbolic link: not a failure
    assert f"skipped: huge.py: file is 10.0 MB, over the {MAX_FILE_BYTES / 1e6:g} MB limit for one file" in stderr
    assert "1 skipped" in stderr
    assert huge.read_bytes() == content
    assert (tmp_path / "good.py").read_text() == FIXED
    assert elapsed < 60


DEEP = {
    # libcst's native parser overflows the C stack on this (a segfault that killed the whole run);
    # CPython refuses more than 200 nested brackets, so the runner asks CPython first.
    "deep_parens.py": (
        "import torch\nm = torch.load('p')\nx = " + "(" * 2000 + "1" + ")" * 2000 + "\n",
        "deep_parens.py:3:205: syntax error: too many nested parentheses",
    ),
    # Valid Python, parsed by both, but its tree is deeper than Python's recursion limit allows
    # the codemods' visitors to walk.
    "long_chain.py": (
        "import torch\nm = torch.load('p')\nx = " + " + ".join(["a"] * 3000) + "\n",
        "long_chain.py:3: expression nested too deeply for the parser; skipped",
    ),
}


def test_deeply_nested_expressions_fail_per_file_and_the_others_are_processed(tmp_path: Path) -> None:
    for name, (text, _) in DEEP.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "good.py").write_text(LEGACY)
    out = run_cli("apply", ".", cwd=tmp_path)
    stderr = _stderr(out)
    assert out.returncode == 1
    for name, (text, message) in DEEP.items():
        assert f"failed: {message}" in stderr, stderr
        assert (tmp_path / name).read_text() == text
    assert (tmp_path / "good.py").read_text() == FIXED
    assert "3 files scanned, 1 changed, 2 failed" in stderr


def test_mixed_tabs_and_spaces_are_reported_with_the_line(tmp_path: Path) -> None:
    content = b"import torch\nif True:\n        x = torch.load('p')\n\ty = 1\n"
    (tmp_path / "tabs.py").write_bytes(content)
    (tmp_path / "good.py").write_text(LEGACY)
    out = run_cli("apply", ".", cwd=tmp_path)
    assert out.returncode == 1
    assert (
        "failed: tabs.py:4:1: syntax error: looks like Python 2 (tabs and spaces mixed in the indentation at line 4; "
        "Python 2 counted a tab as 8 spaces): indent with spaces only"
    ) in _stderr(out)
    assert (tmp_path / "tabs.py").read_bytes() == content
    assert (tmp_path / "good.py").read_text() == FIXED


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="running as root: chmod 000 does not stop root from reading a folder "
    "(test_unreadable_folder_reported_simulated covers the same code path)",
)
def test_unreadable_folder_is_reported(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "m.py").write_text(LEGACY)
    (tmp_path / "good.py").write_text(LEGACY)
    locked.chmod(0)
    try:
        out = run_cli("apply", ".", cwd=tmp_path)
    finally:
        locked.chmod(0o755)
    assert out.returncode == 1
    assert "failed: locked: cannot read folder: Permission denied" in _stderr(out)
    assert (tmp_path / "good.py").read_text() == FIXED
    assert (locked / "m.py").read_text() == LEGACY


def test_unreadable_folder_reported_simulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.walk`` errors (here: scandir refused on one folder, as for a non-root user on a
    chmod 000 folder) become a failed result naming the folder; the rest is processed."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "m.py").write_text(LEGACY)
    (tmp_path / "good.py").write_text(LEGACY)
    real_scandir = os.scandir

    def refusing_scandir(path="."):
        if Path(os.fspath(path)).name == "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refusing_scandir)
    monkeypatch.chdir(tmp_path)
    results = run([Path(".")], all_codemods(), options=RunOptions(write=True))
    by_name = {r.display: r for r in results}
    assert by_name["locked"].status == "failed"
    assert by_name["locked"].error == "cannot read folder: Permission denied"
    assert "failed: locked: cannot read folder: Permission denied" in _problem_lines(results)
    assert by_name["good.py"].status == "changed"
    assert (tmp_path / "good.py").read_text() == FIXED
    assert (locked / "m.py").read_text() == LEGACY


def test_symlinks_out_of_the_tree_and_loops_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_text(LEGACY)
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "real.py").write_text(LEGACY)
    (tree / "out_dir").symlink_to(outside)  # folder link leaving the tree
    (tree / "pkg" / "out_file.py").symlink_to(outside / "victim.py")  # file link leaving the tree
    (tree / "pkg" / "up").symlink_to("..")  # loop: a folder linking to its parent
    (tree / "self").symlink_to(".")  # loop: a folder linking to itself
    (tree / "ring.py").symlink_to("ring.py")  # a link that points at itself
    out = subprocess.run(
        [*console_script(), "apply", "."], cwd=tree, capture_output=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    stderr = _stderr(out)
    assert out.returncode == 0, stderr
    assert "1 file scanned, 1 changed" in stderr  # pkg/real.py, once
    assert (tree / "pkg" / "real.py").read_text() == FIXED
    assert (outside / "victim.py").read_text() == LEGACY
    assert (tree / "pkg" / "out_file.py").is_symlink() and (tree / "pkg" / "up").is_symlink()
    direct = run_cli("apply", "ring.py", cwd=tree)
    assert "skipped: ring.py: symbolic link (broken or looping link): not followed" in _stderr(direct)


def test_file_changed_while_the_run_works_on_it_keeps_the_newer_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.py"
    path.write_text(LEGACY)
    newer = LEGACY + "# edited by the user while the tool ran\n"
    real_transform = engine.transform_source

    def transform_then_user_saves(text, codemods, **kwargs):
        output = real_transform(text, codemods, **kwargs)
        path.write_text(newer)  # between our read and our write
        return output

    monkeypatch.setattr(engine, "transform_source", transform_then_user_saves)
    monkeypatch.chdir(tmp_path)
    [result] = run([Path("m.py")], all_codemods(), options=RunOptions(write=True))
    assert result.status == "failed"
    assert result.error == "file changed on disk during the run; the newer version was kept"
    assert "failed: m.py: file changed on disk during the run; the newer version was kept" in _problem_lines([result])
    assert path.read_text() == newer
    assert _temp_files(tmp_path) == []


# -- interruption -------------------------------------------------------------------------------
TEMPLATES = [
    "import torch\n\n\ndef load_{i}(path):\n    model = torch.load(path)\n    return model.cuda()\n",
    "import torch\n\nCKPT = 'ckpt_{i}.pt'\nstate = torch.load(CKPT)  # file {i}\n",
    "import torch\nimport torch.nn as nn\n\n\nclass Net{i}(nn.Module):\n    def forward(self, x):\n        return x + torch.randn(3)\n",
    "import torch\n\ncriterion = torch.nn.MSELoss()\n\n\ndef train_{i}(a, b):\n    loss = criterion(a, b)\n    return loss.data[0]\n",
]


def _make_tree(root: Path, count: int) -> dict[Path, tuple[bytes, bytes]]:
    """``count`` legacy files; for each, its original bytes and its expected full rewrite."""
    root.mkdir()
    # One in-process rewrite per template (0.2 s each, 400 would take a minute and a half): the
    # file number only appears in names and strings, so it is substituted into the rewrite.
    sentinel = "987654321"
    rewrites = [transform_source(t.format(i=sentinel), all_codemods()).text for t in TEMPLATES]
    expected = {}
    for i in range(count):
        template = TEMPLATES[i % len(TEMPLATES)]
        text = template.format(i=i)
        rewrite = rewrites[i % len(TEMPLATES)].replace(sentinel, str(i))
        assert rewrite != text
        if i in (0, 1, 2, 3, count - 1):  # the substitution gives what the engine gives
            assert rewrite == transform_source(text, all_codemods()).text
        path = root / f"m{i:03d}.py"
        path.write_text(text)
        expected[path] = (text.encode(), rewrite.encode())
    return expected


def _rewritten(expected: dict[Path, tuple[bytes, bytes]]) -> int:
    """How many files hold their full rewrite; asserts every other one is untouched."""
    done = 0
    for path, (original, rewrite) in expected.items():
        data = path.read_bytes()
        assert data in (original, rewrite), f"{path.name} is neither the original nor the full rewrite"
        done += data == rewrite
    return done


def _start_apply(root: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*console_script(), "apply", "."], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def _wait_for_rewrites(process: subprocess.Popen, expected: dict, at_least: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _count_rewritten_quietly(expected) < at_least:
        assert process.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.05)


def _count_rewritten_quietly(expected: dict) -> int:
    return sum(path.read_bytes() == rewrite for path, (_, rewrite) in expected.items())


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_ctrl_c_stops_cleanly_and_says_how_far_it_got(tmp_path: Path, cache: str) -> None:
    """Cold: the files are rewritten in pool workers (which ignore SIGINT). Warm (a `check` has
    cached every result): the main process writes them, and a Ctrl-C may land in a write."""
    expected = _make_tree(tmp_path / "tree", 400)
    if cache == "warm":
        assert run_cli("check", ".", cwd=tmp_path / "tree").returncode == 1
    process = _start_apply(tmp_path / "tree")
    try:
        _wait_for_rewrites(process, expected, at_least=3)
        process.send_signal(signal.SIGINT)
        _, stderr_bytes = process.communicate(timeout=60)
    finally:
        process.kill()
    stderr = stderr_bytes.decode()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "Aborted" not in stderr, stderr
    line = [l for l in stderr.splitlines() if l.startswith("interrupted after")]
    assert len(line) == 1, stderr
    done = int(line[0].split()[2])
    assert line[0] == f"interrupted after {done} of 400 files; every file is either unchanged or fully rewritten"
    assert f"{done} files scanned, {done} changed, 0 failed" in stderr
    assert done < 400
    rewritten = _rewritten(expected)
    assert done <= rewritten <= done + 1  # the file in flight at Ctrl-C: not counted, maybe written
    assert _temp_files(tmp_path) == []


def test_kill_9_leaves_every_file_original_or_fully_rewritten(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    expected = _make_tree(tree, 400)
    process = _start_apply(tree)
    try:
        _wait_for_rewrites(process, expected, at_least=5)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGKILL
    assert 5 <= _rewritten(expected) < 400
    # SIGKILL cannot be cleaned up after: a kill between creating the temp file and renaming it
    # into place leaves that one temp file (hidden, never a .py, so never processed or imported).
    leftovers = _temp_files(tmp_path)
    assert len(leftovers) <= 1, leftovers
    for temp in leftovers:
        assert temp.name.startswith(".m") and temp.parent == tree
        # the next run that writes that file removes it
        target = temp.name[1:].split(".py.", 1)[0] + ".py"
        out = run_cli("apply", target, cwd=tree)
        assert out.returncode == 0, out.stderr.decode()
    assert _temp_files(tmp_path) == []
    _rewritten(expected)


def test_a_rewrite_removes_temp_files_a_killed_run_left_for_that_file(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(LEGACY)
    stale = tmp_path / f".m.py.ab_12xyz{TEMP_SUFFIX}"  # mkstemp's pattern: 8 random characters
    stale.write_text("half-written")
    others = [tmp_path / f".m.py.x.py.ab_12xyz{TEMP_SUFFIX}", tmp_path / ".m.py.ab_12xyz.tmp", tmp_path / "notes.txt"]
    for other in others:
        other.write_text("not ours")
    out = run_cli("apply", "m.py", cwd=tmp_path)
    assert out.returncode == 0, _stderr(out)
    assert (tmp_path / "m.py").read_text() == FIXED
    assert not stale.exists()
    assert all(other.read_text() == "not ours" for other in others)


# -- the safety net: a broken codemod never writes ----------------------------------------------
@pytest.mark.parametrize(
    "replacement, message",
    [
        ("1x", "TFD990 (test-broken-codemod) raised CSTValidationError: Name '1x' is not a valid identifier."),
        ("class", "rewrite by TFD990 does not compile (line 3: invalid syntax)"),
    ],
)
def test_a_broken_codemod_leaves_the_file_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replacement: str, message: str
) -> None:
    class BrokenCodemod(Codemod):
        """Emits code that does not compile: ``spam`` → an invalid identifier."""

        code = "TFD990"
        name = "test-broken-codemod"
        summary = "test only: a deliberately broken rewrite"
        triggers = ("spam",)

        def leave_Name(self, original_node, updated_node):
            if original_node.value == "spam" and self.report(original_node, "spam"):
                return cst.Name(replacement)
            return updated_node

    content = b"import torch\n\nspam = torch.load('p')\n"
    path = tmp_path / "victim.py"
    path.write_bytes(content)
    monkeypatch.chdir(tmp_path)
    try:
        [result] = run([Path("victim.py")], [BrokenCodemod], options=RunOptions(write=True))
    finally:
        REGISTRY.pop("TFD990", None)
    assert "TFD990" not in REGISTRY
    assert result.status == "failed"
    assert result.error.startswith("internal error: ") and message in result.error, result.error
    assert "please report this bug" in result.error
    line = _problem_lines([result])
    assert line.startswith("failed: victim.py: internal error:") and "TFD990" in line
    assert path.read_bytes() == content
    assert _temp_files(tmp_path) == []


# -- generated programs ---------------------------------------------------------------------------
PLAIN_NAMES = ["alpha", "beta", "gamma", "count", "label", "width"]
TEXTS = ["cuda", "use cuda when you can", "model.cuda() is legacy", "torch.load(p)", "loss.data[0]", "plain"]


@st.composite
def plain_lines(draw, indent: str, module_level: bool = False) -> list[str]:
    """Ordinary code that no codemod may touch: assignments, strings mentioning cuda, comments,
    blank lines, calls."""
    names = PLAIN_NAMES + (["device"] if module_level else [])  # `device = 3`: never clobbered
    name = draw(st.sampled_from(names))
    kind = draw(st.sampled_from(["int", "str", "comment", "blank", "list", "call", "aug", "fstring"]))
    number = draw(st.integers(0, 999))
    text = draw(st.sampled_from(TEXTS))
    if kind == "int":
        return [f"{indent}{name} = {number}"]
    if kind == "str":
        return [f"{indent}{name} = {text!r}"]
    if kind == "comment":
        return [f"{indent}# {text}"]
    if kind == "blank":
        return [""]
    if kind == "list":
        return [f"{indent}{name} = [{number}, {number} * 2]  # {text}"]
    if kind == "call":
        return [f"{indent}print({text!r}, {number})"]
    if kind == "fstring":
        return [f"{indent}{name} = f\"{{{number}}} {text}\""]
    return [f"{indent}{name} = {number}", f"{indent}{name} += {number}"]


PATTERNS = {
    # name: (lines, code it must produce)
    "cuda": (["net = model.cuda()"], "TFD001"),
    "bare_to": (["a.to(device)"], "TFD002"),
    "load": (["state = torch.load(p)"], "TFD005"),
    "loss": (["criterion = nn.MSELoss()", "loss = criterion(a, b)", "total = loss.data[0]"], "TFD006"),
}


@st.composite
def programs(draw) -> tuple[str, list[str], set[str]]:
    """A program mixing the targeted patterns with ordinary code: its text, its plain lines (in
    order) and the codes its patterns must produce."""
    lines: list[str] = []
    plain: list[str] = []
    codes: set[str] = set()

    def add_plain(chunks: list[list[str]]) -> None:
        for chunk in chunks:
            lines.extend(chunk)
            plain.extend(chunk)

    def add_pattern(chunk: list[str], code: str, indent: str) -> None:
        lines.extend(indent + line for line in chunk)
        codes.add(code)

    header = ["import torch", "import torch.nn as nn", ""]
    add_plain([header])
    add_plain(draw(st.lists(plain_lines("", module_level=True), max_size=4)))
    if draw(st.booleans()):
        add_pattern(['ckpt = torch.load("model.pt")'], "TFD005", "")
    for k in range(draw(st.integers(0, 2))):  # plain helper functions
        add_plain([["", "", f"def helper_{k}(value):"]])
        add_plain(draw(st.lists(plain_lines("    "), max_size=3)))
        add_plain([[f"    return value + {k}"]])
    if draw(st.booleans()):  # an nn.Module
        add_plain([["", "", "class Net(nn.Module):", "    def __init__(self, n):", "        super().__init__()"]])
        add_plain(draw(st.lists(plain_lines("        "), max_size=3)))
        if draw(st.booleans()):
            add_pattern(["self.layers = [nn.Linear(n, n), nn.Linear(n, n)]"], "TFD004", "        ")
        add_plain([["        self.fc = nn.Linear(n, n)", "", "    def forward(self, x):"]])
        add_plain(draw(st.lists(plain_lines("        "), max_size=3)))
        if draw(st.booleans()):
            add_pattern(["noise = torch.randn(4)"], "TFD003", "        ")
        add_plain([["        return self.fc(x)"]])
    if draw(st.booleans()):  # a training function
        add_plain([["", "", "def train(model, a, b, p, device):"]])
        chosen = draw(st.lists(st.sampled_from(sorted(PATTERNS)), max_size=4, unique=True))
        for name in chosen:
            add_plain(draw(st.lists(plain_lines("    "), max_size=2)))
            pattern, code = PATTERNS[name]
            add_pattern(pattern, code, "    ")
        add_plain([["    return None"]])
    add_plain(draw(st.lists(plain_lines("", module_level=True), max_size=3)))
    return "\n".join(lines) + "\n", plain, codes


def _is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    remaining = iter(haystack)
    return all(any(line == candidate for candidate in remaining) for line in needles)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_compile_are_stable_and_keep_plain_code(program) -> None:
    text, plain, codes = program
    compile(text, "<generated>", "exec")
    first = transform_source(text, all_codemods())
    compile(first.text, "<rewrite>", "exec")
    assert transform_source(first.text, all_codemods()).text == first.text, "a second run changed the code"
    out_lines = first.text.splitlines()
    assert _is_subsequence(plain, out_lines), "a line of plain code changed, moved or vanished"
    assert codes <= {f.code for f in first.findings}
    if any(f.fixed for f in first.findings):
        assert first.text != text
    else:
        assert first.text == text
