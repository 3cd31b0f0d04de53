"""The result cache is not trusted (issue 22, item 5): an entry that does not validate (edited,
torn, malformed, moved to another file's key, another version's) is ignored and the file is
analysed again; a cached rewrite is compiled like a fresh one before it is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from torchfix_device.cache import CACHE_DIR_NAME, ResultCache
from torchfix_device.catalog import all_codemods
from torchfix_device.file_selection import read_marks

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)\n'
)
OTHER = 'import torch\n\nweights = torch.load("other.pt")\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose cache lives in it (next to its pyproject.toml)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "m.py").write_text(LEGACY)
    return tmp_path


def _entries(project: Path) -> list[Path]:
    return sorted((project / CACHE_DIR_NAME).rglob("*.json"))


def _warm(project: Path) -> Path:
    out = run_cli("check", "m.py", cwd=project)
    assert out.returncode == 1, out.stderr.decode()
    [entry] = _entries(project)
    return entry


def _apply(project: Path) -> str:
    out = run_cli("apply", "m.py", cwd=project)
    stderr = out.stderr.decode()
    assert "Traceback" not in stderr, stderr
    assert out.returncode == 0, stderr
    return stderr


def _edit(entry: Path, change) -> None:
    data = json.loads(entry.read_text())
    change(data)
    entry.write_text(json.dumps(data))


def _text_of(data: dict) -> dict:
    """The part of an entry holding the result (older entries kept it at the top)."""
    return data.get("result", data)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: _text_of(d).__setitem__("text", "import os\nos.system('echo edited')\n"), id="edited-text"),
        pytest.param(lambda d: _text_of(d).__setitem__("text", 5), id="text-is-a-number"),
        pytest.param(lambda d: _text_of(d).__setitem__("findings", [{"line": "x"}]), id="bad-finding"),
        pytest.param(lambda d: _text_of(d).__setitem__("marks", None), id="bad-marks"),
        pytest.param(lambda d: d.clear(), id="empty-object"),
    ],
)
def test_an_entry_that_does_not_validate_is_ignored_and_recomputed(project: Path, change) -> None:
    entry = _warm(project)
    _edit(entry, change)
    _apply(project)
    assert (project / "m.py").read_text() == FIXED


@pytest.mark.parametrize("content", [b"", b"{", b"[1, 2]", b"\xff\xfe", b'"text"'])
def test_a_torn_or_foreign_entry_is_ignored(project: Path, content: bytes) -> None:
    entry = _warm(project)
    entry.write_bytes(content)
    _apply(project)
    assert (project / "m.py").read_text() == FIXED


def test_an_entry_moved_to_another_files_key_is_ignored(project: Path) -> None:
    """Each entry names the key it was written for: another file's result, copied over this
    file's entry, is not taken for this file's."""
    entry = _warm(project)
    (project / "other.py").write_text(OTHER)
    run_cli("check", "other.py", cwd=project)
    [other_entry] = [e for e in _entries(project) if e != entry]
    entry.write_bytes(other_entry.read_bytes())
    _apply(project)
    assert (project / "m.py").read_text() == FIXED


def test_a_cached_rewrite_that_does_not_compile_is_not_written(project: Path) -> None:
    """An entry that validates but whose rewrite does not compile (a bug of the version that
    wrote it) is compiled before it is used, like a fresh rewrite, and recomputed."""
    raw = (project / "m.py").read_bytes()
    cache = ResultCache(project / CACHE_DIR_NAME, all_codemods(), unsafe_fixes=False)
    cache.put(raw, "import torch\nstate = torch.load(\n", [], [], [], read_marks(LEGACY))
    assert cache.get(raw) is not None  # it was stored and reads back
    _apply(project)
    assert (project / "m.py").read_text() == FIXED


def test_a_valid_entry_is_still_used(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks do not turn every entry into a miss: a warm run answers from the cache."""
    _warm(project)
    raw = (project / "m.py").read_bytes()
    cache = ResultCache(project / CACHE_DIR_NAME, all_codemods(), unsafe_fixes=False)
    hit = cache.get(raw)
    assert hit is not None and hit.new_text == FIXED and hit.findings
