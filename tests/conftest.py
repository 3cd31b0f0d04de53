from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from cli_zygote import Zygote

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# The exhaustive sweeps (`@pytest.mark.sweep`: a shortcut of the engine against libcst's own
# answer, or stage 1 against the unfiltered engine, on every node of every fixture) take a
# quarter of the suite's CPU for questions a sample answers in CI: each runs on `sweep_sample`.
# `TFD_SWEEP=all` gives them every file, as `benchmarks/sweeps.py` runs them (and, with
# `--corpus`, the Python files of a corpus too, through `TFD_SWEEP_EXTRA`).
SWEEP_ALL = os.environ.get("TFD_SWEEP", "") == "all"


def sweep_sample(paths, every: int = 4) -> list[Path]:
    """One case in ``every`` of each folder of ``paths`` (a case: the files of one name before
    its first dot, a fixture's ``.in.py`` with its ``.out.py``), at least one case per folder
    and, where the folder has one, a case with an input (``.in.py``): a folder of fixtures is
    one codemod's. Cases are chosen by a hash of their path under the repository: the same files
    on every machine and in every run, and a new fixture moves at most itself in or out. Under
    ``TFD_SWEEP=all`` every one of ``paths``, then every ``*.py`` under the folders listed in
    ``TFD_SWEEP_EXTRA`` (``os.pathsep``-separated)."""
    paths = sorted(set(paths))
    if SWEEP_ALL:
        extra = [Path(p) for p in os.environ.get("TFD_SWEEP_EXTRA", "").split(os.pathsep) if p]
        return paths + sorted(f for folder in extra for f in folder.rglob("*.py"))
    folders: dict[Path, dict[str, list[Path]]] = {}
    for path in paths:
        folders.setdefault(path.parent, {}).setdefault(path.name.split(".")[0], []).append(path)
    chosen: list[Path] = []
    for folder, cases in folders.items():
        ranked = [cases[c] for c in sorted(cases, key=lambda case: zlib.crc32(sweep_id(folder / case).encode()))]
        taken = ranked[: -(-len(ranked) // every)]
        with_input = [files for files in ranked if any(f.name.endswith(".in.py") for f in files)]
        if with_input and not any(files in with_input for files in taken):
            taken.append(with_input[0])
        chosen += [f for files in taken for f in files]
    return sorted(chosen)


def sweep_id(path: Path) -> str:
    """A sweep's test id for ``path``: its path under the repository, or as given outside it."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()


def console_script() -> list[str]:
    """The installed console script (the real entry point users run)."""
    exe = shutil.which("torchfix-device")
    if exe is None:
        pytest.fail("the `torchfix-device` console script is not installed: run `pip install -e .[test]`")
    return [exe]


def run_cli(*args: str, cwd: Path | None = None, input: bytes | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One run of the command line in a process of its own, forked from an interpreter that
    has imported it already (:mod:`cli_zygote`); the tests of the process itself (signals,
    terminals, hash seeds, imports) run the console script with ``subprocess`` instead.
    ``env``: variables to set on top of this process's environment, ``NO_COLOR`` and a width."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return _ZYGOTE.run([_script_path(), *args], cwd=cwd, input=input, env=env, timeout=300)


def run_script(script: str, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python script args`` in ``cwd`` (a user's script, before or after a migration), in this
    process's environment, with text output. The run is a child forked from a server that has
    imported torch (``verify.warm``'s script runs, which the run harness uses for the same purpose:
    ``tests/test_verify_warm.py`` holds them to what a new interpreter does), which saves each
    run the ~2 s of importing torch; a new interpreter where no server can start."""
    from torchfix_device.verify import warm

    env = dict(os.environ)
    found = warm.run_script([script, *args], Path(cwd), env, timeout)
    if found is None:
        return subprocess.run([sys.executable, script, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    status, out, err = found
    if status is None:
        raise subprocess.TimeoutExpired([script, *args], timeout)
    return subprocess.CompletedProcess([sys.executable, script, *args], status, out, err)


def _script_path() -> str:
    """The console script's own path (what ``sys.argv[0]`` is in a run of it), past any shim."""
    beside = Path(sys.executable).with_name("torchfix-device")
    return str(beside) if beside.is_file() else console_script()[0]


_ZYGOTE = Zygote()


def tree_snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (and ``root`` itself): mode, modification time, size and, for a
    regular file, its bytes. Equal snapshots: nothing was written, created or removed there."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in [".", *folders, *files]:
            path = Path(folder) / name
            info = path.lstat()
            data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
            found[os.path.relpath(path, root)] = (info.st_mode, info.st_mtime_ns, info.st_size, data)
    return found


def pytest_configure(config: pytest.Config) -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set (these machines and many containers set it), no
    interpreter the suite starts caches the bytecode of the package, an editable install: each
    of the hundreds of command-line runs, ``verify`` and harness interpreters compiled the
    modules it imports from source again (an import of the engine and codemods: 1.6 CPU-s
    without bytecode, 0.75 with). Before the workers start, the controlling process writes the
    bytecode of ``src/`` and of the helpers the suite's interpreters import, in Python's own
    ``__pycache__`` folders (ignored by git, checked against each source's size and time), as
    Python without that setting would have. Nothing under ``tests/fixtures`` or ``examples``.

    A suite started where SIGINT is ignored (in the background of a shell without job control:
    ``nohup pytest &``) would pass that on to every program it starts, and the tests that press
    Ctrl-C would wait for an interrupt that never comes: Python's own handler is set instead
    (a handled signal goes back to its default in a program started with exec)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not sys.dont_write_bytecode or hasattr(config, "workerinput"):
        return
    import compileall

    compileall.compile_dir(ROOT / "src", quiet=2)
    compileall.compile_dir(ROOT / "benchmarks" / "run_harness", quiet=2)
    compileall.compile_dir(ROOT / "tests", maxlevels=0, quiet=2, rx=re.compile(r"[/\\]test_[^/\\]*$"))


# The test modules that take longest (`--durations=0` summed by file, 2026-11-29: each 20-45 s
# of one worker's time), sent to the workers first. With `--dist loadfile` a worker takes the
# next module in collection order when it is done, and alphabetical order left the three
# `test_verify*` modules for last: one worker ran them for a minute and a half while the other
# had nothing left. Every other module keeps its place after these.
SLOWEST_FIRST = (
    "test_verify.py", "test_verify_warm.py", "test_differential.py", "test_verify_run.py",
    "test_candidates.py", "test_findings_stable.py", "test_safety_rewrites.py",
    "test_generated_scripts.py", "test_cli.py", "test_cli_ruff.py", "test_precommit.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(autouse=True, scope="session")
def _close_zygote():
    yield
    _ZYGOTE.close()


@pytest.fixture(autouse=True, scope="session")
def _private_user_cache(tmp_path_factory: pytest.TempPathFactory):
    """Runs outside a project (no ``pyproject.toml``) cache under ``$XDG_CACHE_HOME``: point it
    at a folder of this test session, not the user's ``~/.cache`` (inherited by the CLI runs)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield


@pytest.fixture
def cli():
    return run_cli
