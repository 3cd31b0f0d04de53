"""The result cache is not trusted (issue 22, item 5): an entry that does not validate (edited,
torn, malformed, moved to another file's key, another version's) is ignored and the file is
analysed again; a cached rewrite is compiled like a fresh one before it is written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import console_script, run_cli
from torchfix_device.run.cache import CACHE_DIR_NAME, ResultCache
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.files.selection import read_marks

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
    """The per-file result entries (in two-character shard folders); the catalog memo at the
    cache's top level is not one."""
    root = project / CACHE_DIR_NAME
    return sorted(e for e in root.rglob("*.json") if e.parent != root)


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


def _text_of(data: dict) -> dict:
    """The part of an entry holding the result."""
    return data.get("result", data)


def _edited(change):
    def edit(entry: Path) -> None:
        data = json.loads(entry.read_text())
        change(data)
        entry.write_text(json.dumps(data))
    return edit


def _replaced(content: bytes):
    return lambda entry: entry.write_bytes(content)


BAD_ENTRIES = {
    "edited text": _edited(lambda d: _text_of(d).__setitem__("text", "import os\nos.system('echo edited')\n")),
    "text is a number": _edited(lambda d: _text_of(d).__setitem__("text", 5)),
    "bad finding": _edited(lambda d: _text_of(d).__setitem__("findings", [{"line": "x"}])),
    "bad marks": _edited(lambda d: _text_of(d).__setitem__("marks", None)),
    "empty object": _edited(lambda d: d.clear()),
    "another version": _edited(lambda d: d.__setitem__("version", "0.0.1")),
    "empty file": _replaced(b""),
    "torn": _replaced(b"{"),
    "a list": _replaced(b"[1, 2]"),
    "not UTF-8": _replaced(b"\xff\xfe"),
    "a string": _replaced(b'"text"'),
}


def test_an_entry_that_does_not_validate_is_ignored_and_recomputed(project: Path) -> None:
    """One file per kind of bad entry (edited by hand, malformed, torn, another version's), all
    in one run: each file is analysed again and gets its real rewrite, none a traceback. An
    edited text used to be written into the file, and ``"text": 5`` ended in a traceback."""
    (project / "m.py").unlink()
    sources = {}
    for index, kind in enumerate(BAD_ENTRIES):
        path = project / f"m{index:02d}.py"
        path.write_text(LEGACY.replace("ckpt.pt", f"ckpt{index}.pt"))
        sources[kind] = path
    assert run_cli("check", "--jobs", "1", ".", cwd=project).returncode == 1
    assert len(_entries(project)) == len(BAD_ENTRIES)
    cache = ResultCache(project / CACHE_DIR_NAME, all_codemods())
    for kind, spoil in BAD_ENTRIES.items():
        entry = cache._entry(cache.key(sources[kind].read_bytes()))
        assert entry.is_file(), kind
        spoil(entry)
    out = run_cli("apply", ".", cwd=project)
    stderr = out.stderr.decode()
    assert out.returncode == 0 and "Traceback" not in stderr, stderr
    for index, (kind, path) in enumerate(sources.items()):
        assert path.read_text() == FIXED.replace("ckpt.pt", f"ckpt{index}.pt"), kind


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
    cache = ResultCache(project / CACHE_DIR_NAME, all_codemods())
    cache.put(raw, "import torch\nstate = torch.load(\n", [], [], [], read_marks(LEGACY))
    assert cache.get(raw) is not None  # it was stored and reads back
    _apply(project)
    assert (project / "m.py").read_text() == FIXED


def test_a_valid_entry_is_still_used(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks do not turn every entry into a miss: a warm run answers from the cache."""
    _warm(project)
    raw = (project / "m.py").read_bytes()
    cache = ResultCache(project / CACHE_DIR_NAME, all_codemods())
    hit = cache.get(raw)
    assert hit is not None and hit.new_text == FIXED and hit.findings


def test_the_tool_fingerprint_covers_every_codemod_and_fact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached result is the tool's answer: a change to any module of the package (a codemod,
    a fact), not only to the runner's own folder, must miss the cache. The fingerprint once
    hashed ``run/`` alone (the folder the cache module moved to), so a changed codemod kept
    giving its old answers from a warm cache."""
    import shutil

    import torchfix_device
    from torchfix_device.run import cache

    package = Path(torchfix_device.__file__).resolve().parent
    assert cache.package_root() == package
    copy = tmp_path / "torchfix_device"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "models"))
    monkeypatch.setattr(cache, "package_root", lambda: copy)
    fingerprints = []
    for changed in (None, "facts/uses.py", "codemods/zero_dim_tensor_as_number.py", "run/cache.py"):
        if changed is not None:
            target = copy / changed
            target.write_text(target.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
        cache.tool_fingerprint.cache_clear()
        fingerprints.append(cache.tool_fingerprint())
    cache.tool_fingerprint.cache_clear()
    assert len(set(fingerprints)) == 4, fingerprints


FUNCTIONS = '''import torch
from torch.autograd import Function


class Double(Function):
    def forward(self, x):
        return x * 2

    def backward(self, grad):
        return grad * 2


class Triple(Function):
    def forward(self, x):
        return x * 3

    def backward(self, grad):
        return grad * 3
'''
USES = "import torch\nfrom fns import Double, Triple\n\nx = torch.ones(2).cuda()\ny = Double()(x) + Triple()(x)\n"


def test_a_run_with_legacy_functions_reads_its_cache_under_another_hash_seed(tmp_path: Path) -> None:
    """The legacy autograd Functions each file reaches key the run's cache. Their digest was
    made from the text of sets of strings, whose order changes with the hash seed: a second run
    missed the cache of every file by chance (always, over a folder of many projects)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "fns.py").write_text(FUNCTIONS)
    (tmp_path / "use.py").write_text(USES)

    def check(seed: str) -> str:
        env = {**os.environ, "NO_COLOR": "1", "PYTHONHASHSEED": seed}
        out = subprocess.run([*console_script(), "check", "-v", "."], capture_output=True, env=env, cwd=tmp_path)
        assert out.returncode == 1 and b"TFD017" in out.stdout, out.stderr.decode()
        return (out.stdout + out.stderr).decode()

    assert "cached result" not in check("1")
    for seed in ("2", "3", "4"):
        assert check(seed).count("cached result") == 2, seed
