"""--jobs, the result cache and --shard: faster runs, the same results."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, console_script, run_cli
from torchfix_device import engine
from torchfix_device.prefilter import candidates
from torchfix_device.files import selection as file_selection
from torchfix_device.syntax import suppressions
from torchfix_device.run.cache import CACHE_DIR_NAME, ResultCache, default_cache_folder
from torchfix_device.codemods.catalog import all_codemods, select_codemods
from torchfix_device.options import RunOptions
from torchfix_device.run.runner import run
from torchfix_device.run.shard import Shard, ShardError


def _corpus(root: Path) -> Path:
    """A small tree with findings of many kinds: the example project, the first trap of each
    codemod's fixtures (kept small: the CLI runs over it several times), a file that does not
    parse."""
    shutil.copytree(ROOT / "examples" / "legacy_project", root / "legacy_project")
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "models"):
        for kind in (".noop.py",):
            first = next(iter(sorted(folder.glob(f"*{kind}"))), None)
            if first is not None:
                target = root / "fixtures" / folder.name / first.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(first, target)
    (root / "broken.py").write_text("import torch\ntorch.load(\n")
    return root


def _summary(results):
    return [(r.display, r.status, r.findings, r.new_text, r.error, r.notes) for r in results]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return _corpus(tmp_path_factory.mktemp("corpus"))


# -- --jobs ----------------------------------------------------------------------------------
def test_jobs_give_the_same_results_in_the_same_order(corpus: Path, monkeypatch) -> None:
    monkeypatch.chdir(corpus)
    one = run([Path(".")], all_codemods(), jobs=1)
    two = run([Path(".")], all_codemods(), jobs=2)
    assert len(one) > 15 and any(r.status == "changed" for r in one) and any(r.status == "failed" for r in one)
    assert _summary(two) == _summary(one)


def test_jobs_give_the_same_output_on_the_command_line(corpus: Path) -> None:
    for command in (["check"], ["apply", "--diff"]):
        one = run_cli(*command, "--no-cache", "--jobs", "1", ".", cwd=corpus)
        three = run_cli(*command, "--no-cache", "--jobs", "3", ".", cwd=corpus)
        assert one.stdout and one.returncode == 1
        assert (three.returncode, three.stdout, three.stderr) == (one.returncode, one.stdout, one.stderr)


def test_bad_jobs_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    out = run_cli("check", "--jobs", "0", "m.py", cwd=tmp_path)
    assert out.returncode == 2


def test_ctrl_c_with_a_process_pool_reports_every_file_it_wrote(tmp_path: Path) -> None:
    from test_robustness import _make_tree, _rewritten, _temp_files, _wait_for_rewrites

    expected = _make_tree(tmp_path / "tree", 400)
    process = subprocess.Popen(
        [*console_script(), "apply", "--jobs", "2", "--no-cache", "."], cwd=tmp_path / "tree",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    try:
        _wait_for_rewrites(process, expected, at_least=3)
        process.send_signal(signal.SIGINT)
        _, stderr_bytes = process.communicate(timeout=60)
    finally:
        process.kill()
    stderr = stderr_bytes.decode()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    line = [l for l in stderr.splitlines() if l.startswith("interrupted after")]
    assert len(line) == 1, stderr
    done = int(line[0].split()[2])
    assert 3 <= done < 400
    assert f"{done} files scanned, {done} changed, 0 failed" in stderr
    assert _rewritten(expected) == done  # workers finish their file; every written file is reported
    assert _temp_files(tmp_path) == []


# -- the cache -------------------------------------------------------------------------------
@pytest.fixture
def no_parsing(monkeypatch):
    """Make every parse (libcst's and stage 1's) fail the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("parsed although the cache holds the result")

    def install() -> None:
        monkeypatch.setattr(engine.cst, "parse_module", refuse)
        monkeypatch.setattr(engine, "parse_facts", refuse)
        monkeypatch.setattr(candidates, "compile", refuse, raising=False)
        monkeypatch.setattr(file_selection.tokenize, "generate_tokens", refuse)  # the skip marks are cached too
        monkeypatch.setattr(suppressions.tokenize, "generate_tokens", refuse)

    return install


def test_second_run_over_an_unchanged_tree_parses_nothing(corpus: Path, tmp_path: Path, monkeypatch, no_parsing) -> None:
    monkeypatch.chdir(corpus)
    cache = ResultCache(tmp_path / "cache", all_codemods())
    cold = run([Path(".")], all_codemods(), cache=cache)
    no_parsing()
    ok = [r for r in cold if r.status != "failed"]
    warm = run([p.path for p in ok], all_codemods(), cache=cache)
    assert _summary(warm) == _summary(ok)
    assert (tmp_path / "cache" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_apply_writes_a_file_whose_cached_result_changes_it(tmp_path: Path, no_parsing) -> None:
    path = tmp_path / "m.py"
    path.write_text('import torch\nstate = torch.load("ckpt.pt")\n')
    cache = ResultCache(tmp_path / "cache", all_codemods())
    [checked] = run([path], all_codemods(), cache=cache)
    assert checked.status == "changed"
    no_parsing()
    [applied] = run([path], all_codemods(), cache=cache, options=RunOptions(write=True))
    assert applied.status == "changed" and applied.findings == checked.findings
    assert path.read_text() == checked.new_text and "map_location=device" in checked.new_text


def test_cache_key_covers_content_codemods_and_options(tmp_path: Path) -> None:
    base = ResultCache(tmp_path, all_codemods())
    assert base.key(b"x = 1\n") == ResultCache(tmp_path, all_codemods()).key(b"x = 1\n")
    assert base.key(b"x = 1\n") != base.key(b"x = 2\n")
    assert base.key(b"x = 1\n") != ResultCache(tmp_path, all_codemods(), options=RunOptions(unsafe_fixes=True)).key(b"x = 1\n")
    fewer = select_codemods(["TFD001"], None)
    assert base.key(b"x = 1\n") != ResultCache(tmp_path, fewer).key(b"x = 1\n")


def test_cache_key_covers_the_device_expression(tmp_path: Path) -> None:
    default = ResultCache(tmp_path, all_codemods())
    chosen = ResultCache(tmp_path, all_codemods(), options=RunOptions(device_expression='torch.device("cuda:1")'))
    assert default.key(b"x = 1\n") != chosen.key(b"x = 1\n")


def test_device_expression_on_the_command_line_is_not_served_a_stale_rewrite(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "m.py").write_text('import torch\nstate = torch.load("ckpt.pt")\n')
    default = run_cli("apply", "--diff", ".", cwd=tmp_path)
    chosen = run_cli("apply", "--diff", "--device-expression", 'torch.device("cuda:1")', ".", cwd=tmp_path)
    assert b'torch.cuda.is_available()' in default.stdout
    assert b'device = torch.device("cuda:1")' in chosen.stdout


def test_cached_results_keep_suppressed_findings(tmp_path: Path, no_parsing) -> None:
    path = tmp_path / "m.py"
    path.write_text('import torch\nstate = torch.load("ckpt.pt")  # noqa: TFD005\n')
    cache = ResultCache(tmp_path / "cache", all_codemods())
    [cold] = run([path], all_codemods(), cache=cache)
    assert [f.code for f in cold.suppressed] == ["TFD005"] and not cold.findings
    no_parsing()
    [warm] = run([path], all_codemods(), cache=cache)
    assert warm.suppressed == cold.suppressed and warm.status == "unchanged"


def test_a_file_with_another_selection_is_analysed_again(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "m.py"
    path.write_text('import torch\nx = torch.load("p").cuda()\n')
    folder = tmp_path / "cache"
    run([path], all_codemods(), cache=ResultCache(folder, all_codemods()))
    only = select_codemods(["TFD005"], None)
    [result] = run([path], only, cache=ResultCache(folder, only))
    assert [f.code for f in result.findings] == ["TFD005"]


def test_cache_folder_is_next_to_the_nearest_pyproject(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "src").mkdir()
    assert default_cache_folder([tmp_path / "src"]) == tmp_path / CACHE_DIR_NAME
    elsewhere = tmp_path / "no_project"
    elsewhere.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr("torchfix_device.run.cache.find_pyproject", lambda start: None)
    assert default_cache_folder([elsewhere]) == tmp_path / "xdg" / "torchfix-device"


def test_command_line_cache_and_no_cache(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "m.py").write_text('import torch\nstate = torch.load("ckpt.pt")\n')
    first = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert not (tmp_path / CACHE_DIR_NAME).exists()
    cold = run_cli("check", ".", cwd=tmp_path)
    warm = run_cli("check", ".", cwd=tmp_path)
    assert (tmp_path / CACHE_DIR_NAME / ".gitignore").is_file()
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert (first.returncode, first.stdout, first.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    applied = run_cli("apply", ".", cwd=tmp_path)
    assert applied.returncode == 0 and "map_location=device" in (tmp_path / "m.py").read_text()
    # the cache folder is never scanned as code
    assert b"scanned" in applied.stderr and b"1 file scanned" in applied.stderr


# -- --shard ---------------------------------------------------------------------------------
def test_shards_partition_the_files_and_ignore_additions(tmp_path: Path) -> None:
    names = [f"pkg{i % 7}/mod{i}.py" for i in range(300)]
    paths = [Path(n) for n in names]
    shards = [Shard(i, 4) for i in range(1, 5)]
    picked = [s.select(paths, Path.as_posix) for s in shards]
    assert sorted(p for part in picked for p in part) == sorted(paths)
    assert all(40 < len(part) < 110 for part in picked)  # a hash, not a range: roughly even
    more = paths + [Path(f"new/extra{i}.py") for i in range(100)]
    for shard, before in zip(shards, picked):
        after = shard.select(more, Path.as_posix)
        assert [p for p in after if p in set(paths)] == before


@pytest.mark.parametrize("bad", ["0/4", "5/4", "1/0", "x", "1-4"])
def test_bad_shard_is_refused(bad: str) -> None:
    with pytest.raises(ShardError):
        Shard.parse(bad)


def test_shards_on_the_command_line_cover_the_findings_once(corpus: Path) -> None:
    full = run_cli("check", "--no-cache", ".", cwd=corpus)
    parts = [run_cli("check", "--no-cache", "--shard", f"{i}/3", ".", cwd=corpus) for i in (1, 2, 3)]
    lines = sorted(l for p in parts for l in p.stdout.decode().splitlines())
    assert lines == sorted(full.stdout.decode().splitlines())
    assert all(p.stdout for p in parts)
    assert run_cli("check", "--shard", "4/3", ".", cwd=corpus).returncode == 2


def test_warm_run_with_jobs_starts_no_pool_and_keeps_the_order(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    import torchfix_device.run.parallel as parallel

    monkeypatch.chdir(corpus)
    cache = ResultCache(tmp_path / "cache", all_codemods())
    reference = run([Path(".")], all_codemods(), jobs=1)
    # half the files cached: the other half goes to the pool, the order stays that of the files
    cached = [r.path for r in reference if r.status != "failed"][::2]
    run(cached, all_codemods(), cache=cache, jobs=1)
    mixed = run([Path(".")], all_codemods(), cache=cache, jobs=2)
    assert _summary(mixed) == _summary(reference)

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started although every result is cached")

    run([Path(".")], all_codemods(), cache=cache, jobs=1)  # fill the cache
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", no_pool)
    warm = run([r.path for r in reference if r.status != "failed"], all_codemods(), cache=cache, jobs=2)
    assert _summary(warm) == _summary([r for r in reference if r.status != "failed"])


def test_a_warm_run_reads_the_skip_marks_from_the_cache(tmp_path: Path, no_parsing) -> None:
    """Whether a file is skipped (``@generated``, skip-file) depends on options a later run may
    change; the cache keeps the file's marks, so a warm run decides without tokenizing it."""
    from torchfix_device.options import DEFAULT_OPTIONS, RunOptions

    (tmp_path / "noqa.py").write_text("import os  # noqa: F401\nimport torch\nm = torch.load('m')\n")
    (tmp_path / "gen.py").write_text("# @generated by a tool\nimport torch\nm = torch.load('m')\n")
    cache = ResultCache(tmp_path / "cache", all_codemods())
    with_generated = RunOptions(include_generated=True)
    cold = run([tmp_path / "gen.py", tmp_path / "noqa.py"], all_codemods(), cache=cache, options=with_generated)
    assert [r.status for r in cold] == ["changed", "changed"]
    no_parsing()
    default = run([tmp_path / "gen.py", tmp_path / "noqa.py"], all_codemods(), cache=cache, options=DEFAULT_OPTIONS)
    assert [(r.status, r.skip_kind) for r in default] == [("skipped", "@generated"), ("changed", None)]
    assert default[0].error.startswith("line 1: marked @generated") and default[1].findings == cold[1].findings
    again = run([tmp_path / "gen.py", tmp_path / "noqa.py"], all_codemods(), cache=cache, options=with_generated)
    assert _summary(again) == _summary(cold)
