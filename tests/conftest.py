from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def console_script() -> list[str]:
    """The installed console script (the real entry point users run)."""
    exe = shutil.which("torchfix-device")
    if exe is None:
        pytest.fail("the `torchfix-device` console script is not installed: run `pip install -e .[test]`")
    return [exe]


def run_cli(*args: str, cwd: Path | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [*console_script(), *args], cwd=cwd, input=input, capture_output=True, env=env, timeout=300
    )


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
