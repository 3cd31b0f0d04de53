"""A warm run over an unchanged tree answers from the cache without learning the run's facts again
(``run/run_memo.py``), and never with facts that no longer hold: an edited file, a module outside
the run that a star import reads, a module that appears, a torn run entry, a file's entry gone:
each makes the run learn its facts again, and every result equals a run without a cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.files import disk_log
from torchfix_device.options import RunOptions
from torchfix_device.run import runner
from torchfix_device.run.cache import CACHE_DIR_NAME, ResultCache
from torchfix_device.run.shard import Shard

MOVER = (
    "import torch\n\n\nclass Storage(object):\n    def __init__(self):\n        self.x = torch.zeros(3)\n\n"
    "    def cuda(self):\n        self.x = self.x.cuda()\n"
)
USER = (
    "import torch\nfrom storage import Storage\nfrom helpers import *\n\n"
    "s = Storage()\ns.cuda()\nx = torch.zeros(3)\nx.cuda()\nstate = torch.load('m.pt')\ny = Variable(x)\n"
)
HELPERS = "from torch.autograd import Variable\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``proj/`` holds the run; ``helpers.py``, star-imported by it, lies outside it, in the
    working folder above (where a module is looked for)."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "storage.py").write_text(MOVER)
    (project / "user.py").write_text(USER)
    (tmp_path / "helpers.py").write_text(HELPERS)
    monkeypatch.chdir(tmp_path)
    return project


class Learnt:
    """Counts the runs that learnt their facts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = runner._project_facts

        def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(runner, "_project_facts", counted)


def _run(cached: bool, options: RunOptions | None = None, jobs: int = 1, shard: str | None = None) -> list[tuple]:
    cache = ResultCache(Path(CACHE_DIR_NAME), all_codemods(), options or RunOptions()) if cached else None
    chosen = Shard.parse(shard) if shard else None
    results = runner.run([Path("proj")], all_codemods(), options=options, cache=cache, jobs=jobs, shard=chosen)
    return [(r.display, r.status, r.new_text, [(f.line, f.code, f.message, f.fixed) for f in r.findings]) for r in results]


def test_a_warm_run_over_an_unchanged_tree_learns_nothing_and_answers_the_same(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = _run(cached=False)
    assert any(status == "changed" for _, status, _, _ in fresh)
    learnt = Learnt(monkeypatch)
    assert _run(cached=True) == fresh
    assert learnt.count == 1
    assert _run(cached=True) == fresh
    assert _run(cached=True, jobs=2) == fresh
    assert learnt.count == 1  # both warm runs answered from the run entry
    [entry] = Path(CACHE_DIR_NAME).glob("run-*.json")
    assert oct(entry.stat().st_mode & 0o777) == "0o600"


def test_a_shard_answered_from_the_run_entry(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run entry is one for every shard (the facts are learnt over every file)."""
    (tree / "more.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    shards = {f"{i}/2": _run(cached=False, shard=f"{i}/2") for i in (1, 2)}
    assert sorted(r for rs in shards.values() for r in rs) == sorted(_run(cached=False))
    _run(cached=True)
    learnt = Learnt(monkeypatch)
    for shard, fresh in shards.items():
        assert _run(cached=True, shard=shard) == fresh
    assert learnt.count == 0


def _facts_learnt_again(monkeypatch: pytest.MonkeyPatch, change) -> None:  # noqa: ANN001
    _run(cached=True)
    change()
    fresh = _run(cached=False)
    learnt = Learnt(monkeypatch)
    assert _run(cached=True) == fresh
    assert learnt.count == 1, "the run must learn its facts again"
    assert _run(cached=True) == fresh
    assert learnt.count == 1, "and keep them for the next run"


def test_an_edited_file_of_the_run(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _facts_learnt_again(monkeypatch, lambda: (tree / "storage.py").write_text(MOVER.replace("def cuda", "def gpu")))


def test_a_module_outside_the_run_that_a_star_import_reads(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``helpers.py`` no longer binds ``Variable`` to torch's: what the star import binds changes,
    though no file of the run did."""
    fresh = _run(cached=False)
    _facts_learnt_again(monkeypatch, lambda: (tree.parent / "helpers.py").write_text("Variable = list\n"))
    assert _run(cached=False) != fresh


def test_a_module_that_appears_outside_the_run(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree.parent / "helpers.py").unlink()
    _facts_learnt_again(monkeypatch, lambda: (tree.parent / "helpers.py").write_text(HELPERS))


def test_a_package_outside_the_run_that_gains_a_submodule(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``helpers.py`` binds ``b`` by ``from pkg import b``: a submodule once ``pkg/b.py`` exists,
    else a name nothing shows."""
    package = tree.parent / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (tree.parent / "helpers.py").write_text(HELPERS + "from pkg import b\n")
    _facts_learnt_again(monkeypatch, lambda: (package / "b.py").write_text("x = 1\n"))


def test_a_torn_or_edited_run_entry_is_a_miss_and_is_written_again(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run(cached=True)
    [entry] = Path(CACHE_DIR_NAME).glob("run-*.json")
    good = entry.read_bytes()
    data = json.loads(good)
    salts = data["body"]["salts"]
    other = dict(salts)
    first, second = sorted(other)
    other[first], other[second] = salts[second], salts[first]  # each file given the other's salt
    spoiled = {
        "torn": good[: len(good) // 2],
        "not JSON": b"\x00\xff",
        "salts swapped": json.dumps({**data, "body": {**data["body"], "salts": other}}).encode(),
        "another version": json.dumps({**data, "version": "0"}).encode(),
        "observation edited": json.dumps({**data, "body": {**data["body"], "observations": []}}).encode(),
    }
    fresh = _run(cached=False)
    learnt = Learnt(monkeypatch)
    for count, (kind, body) in enumerate(spoiled.items(), start=1):
        entry.write_bytes(body)
        assert _run(cached=True) == fresh, kind
        assert learnt.count == count, kind
        assert json.loads(entry.read_bytes())["checksum"] == data["checksum"], kind


def test_a_file_whose_entry_is_gone_makes_the_run_learn_its_facts(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = _run(cached=False)
    _run(cached=True)
    entries = sorted(e for e in Path(CACHE_DIR_NAME).rglob("*.json") if e.parent.name != CACHE_DIR_NAME)
    assert len(entries) == 2
    entries[0].unlink()
    learnt = Learnt(monkeypatch)
    assert _run(cached=True) == fresh
    assert learnt.count == 1


def test_another_setting_has_its_own_run_entry(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unsafe fixes, another device expression: entries of their own; a ``check`` and an
    ``apply`` share one (whether files are written is not part of the setting)."""
    unsafe, device = RunOptions(unsafe_fixes=True), RunOptions(device_expression="dev")
    fresh_unsafe, fresh_device = _run(cached=False, options=unsafe), _run(cached=False, options=device)
    _run(cached=True)
    learnt = Learnt(monkeypatch)
    assert _run(cached=True, options=unsafe) == fresh_unsafe
    assert _run(cached=True, options=device) == fresh_device
    assert learnt.count == 2
    assert _run(cached=True, options=unsafe) == fresh_unsafe
    assert learnt.count == 2
    assert len(list(Path(CACHE_DIR_NAME).glob("run-*.json"))) == 3


def test_an_apply_answered_from_the_run_entry_writes_what_a_fresh_apply_writes(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run(cached=True)  # a check: the cache and the run entry filled
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    learnt = Learnt(monkeypatch)
    _run(cached=True, options=RunOptions(write=True))
    assert learnt.count == 0
    written = {p.name: p.read_bytes() for p in tree.iterdir()}
    for name, data in before.items():
        (tree / name).write_bytes(data)
    _run(cached=False, options=RunOptions(write=True))
    assert {p.name: p.read_bytes() for p in tree.iterdir()} == written != before


def test_the_disk_log_asks_every_question_again(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("x = 1\n")
    with disk_log.recording() as noted:
        disk_log.is_file(package / "__init__.py")
        disk_log.is_file(tmp_path / "later" / "__init__.py")  # in a folder that does not exist yet
        disk_log.submodule_names(package)
        disk_log.module_bytes(package / "m.py", 100)
    kept = json.loads(json.dumps(disk_log.observations(noted, 100)))
    assert disk_log.still_true(kept)
    for change, undo in [
        (lambda: (package / "__init__.py").write_text(""), lambda: (package / "__init__.py").unlink()),
        (lambda: (package / "sub").mkdir(), lambda: (package / "sub").rmdir()),
        (lambda: ((tmp_path / "later").mkdir(), (tmp_path / "later" / "__init__.py").write_text("")),
         lambda: ((tmp_path / "later" / "__init__.py").unlink(), (tmp_path / "later").rmdir())),
        (lambda: (package / "m.py").write_text("x = 2\n"), lambda: (package / "m.py").write_text("x = 1\n")),
        (lambda: (package / "m.py").write_text("x = 1\n" * 50), lambda: (package / "m.py").write_text("x = 1\n")),
    ]:
        change()
        assert not disk_log.still_true(kept)
        undo()
        assert disk_log.still_true(kept)
    assert not disk_log.still_true([o for o in kept if o[0] != "limit"])


def test_the_facts_pause_the_cycle_collector_and_restore_it(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from torchfix_device.run import run_facts

    seen = []
    real = run_facts._gathered

    def watched(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(run_facts, "_gathered", watched)
    assert gc.isenabled()
    _run(cached=False)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        _run(cached=False)
        assert seen == [False, False] and not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_a_task_of_the_pool_carries_a_path_not_the_runs_facts(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's options (every file's facts: 77 MB on the torch tree) go to each worker once,
    when it starts; a task is a path and the codemods."""
    import pickle

    from torchfix_device.run import parallel

    sizes = []
    real = parallel.ProcessPoolExecutor.submit

    def submit(self, fn, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        sizes.append(len(pickle.dumps((fn, args, kwargs))))
        assert not any(isinstance(a, (RunOptions, ResultCache)) for a in (*args, *kwargs.values()))
        return real(self, fn, *args, **kwargs)

    monkeypatch.setattr(parallel.ProcessPoolExecutor, "submit", submit)
    fresh = _run(cached=False)
    assert _run(cached=False, jobs=2) == fresh
    assert len(sizes) == 2 and max(sizes) < 4096, sizes


BROKEN = "import torch\n\ndef f(:\n    return torch.zeros(2).cuda()\n"


def test_a_file_that_does_not_parse_keeps_its_error_and_the_warm_run_learns_nothing(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A syntax error depends only on the bytes, the tool and the Python version: it is kept, so a
    warm run over a tree holding a broken file parses nothing and answers from the run entry."""
    from torchfix_device import engine

    (tree / "broken.py").write_text(BROKEN)
    fresh = _run(cached=False)
    [failed] = [r for r in fresh if r[1] == "failed"]
    assert failed[0].endswith("broken.py")
    assert _run(cached=True) == fresh
    learnt = Learnt(monkeypatch)

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("parsed although the cache holds the result")

    monkeypatch.setattr(engine, "transform_source", refuse)
    monkeypatch.setattr(engine.cst, "parse_module", refuse)
    assert _run(cached=True) == fresh
    assert _run(cached=True, jobs=2) == fresh
    assert learnt.count == 0
    cache = ResultCache(Path(CACHE_DIR_NAME), all_codemods(), RunOptions())
    results = runner.run([Path("proj")], all_codemods(), options=RunOptions(), cache=cache)
    assert {r.display: r.cached for r in results if r.status == "failed"} == {failed[0]: True}


def test_a_syntax_error_kept_under_another_python_version_is_a_miss(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython's grammar grows and its parser places the error: another version parses again."""
    from torchfix_device import engine
    from torchfix_device.run import cache as cache_module

    (tree / "broken.py").write_text(BROKEN)
    fresh = _run(cached=False)
    with pytest.MonkeyPatch.context() as other_python:
        other_python.setattr(cache_module, "_python", lambda: "3.99")
        _run(cached=True)
    parsed: list[str] = []
    real = engine.transform_source

    def counted(text, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        parsed.append(kwargs.get("filename", ""))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(engine, "transform_source", counted)
    assert _run(cached=True) == fresh
    assert [p for p in parsed if p.endswith("broken.py")], "the broken file must be parsed again"
    parsed.clear()
    assert _run(cached=True) == fresh
    assert parsed == []  # now kept for this version


def test_an_internal_error_is_not_kept(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A codemod's bug is reported on every run until it is fixed, never answered from the cache."""
    from torchfix_device import engine

    calls: list[str] = []

    def broken(text, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(kwargs.get("filename", ""))
        raise KeyError("a codemod bug")

    monkeypatch.setattr(engine, "transform_source", broken)
    first = _run(cached=True)
    assert all(status == "failed" for _, status, _, _ in first)
    count = len(calls)
    assert count == 2
    assert _run(cached=True) == first
    assert len(calls) == 2 * count
