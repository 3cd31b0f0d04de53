"""The codemod catalog (codes and names read without importing the codemods) and the warm path
it makes possible: a run answered from the cache imports neither libcst nor any codemod."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from torchfix_device.codemods import catalog
from torchfix_device.codemods.catalog import REGISTRY, all_codemods, select_codemods


def test_the_catalog_is_the_registry() -> None:
    assert [(r.code, r.name, r.module, r.class_name) for r in catalog.refs()] == [
        (c.code, c.name, c.__module__, c.__name__) for c in all_codemods()
    ]
    assert catalog.codes() == sorted(REGISTRY)


def test_a_reference_loads_its_class_and_reads_the_rest_from_it() -> None:
    ref = catalog.lookup_ref("torch-load-without-map-location")
    assert ref.code == "TFD005" and ref.load() is REGISTRY["TFD005"]
    assert ref.triggers == REGISTRY["TFD005"].triggers and ref.safe is REGISTRY["TFD005"].safe
    assert catalog.load_codemods([ref, REGISTRY["TFD001"]]) == [REGISTRY["TFD005"], REGISTRY["TFD001"]]


def test_selection_by_reference_matches_selection_by_class() -> None:
    for select, ignore in ((None, None), (["TFD005", "loss-data-index"], None), (None, ["cuda-call", "TFD003"])):
        assert [r.code for r in catalog.select_refs(select, ignore)] == [c.code for c in select_codemods(select, ignore)]
    with pytest.raises(catalog.UnknownRuleError, match="unknown codemod 'TFD999'; known: TFD001 \\(cuda-call\\)"):
        catalog.select_refs(["TFD999"], None)


def test_references_cross_process_boundaries_by_value() -> None:
    import pickle

    ref = catalog.lookup_ref("TFD003")
    assert pickle.loads(pickle.dumps(ref)) == ref


def _imported_modules(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, str]:
    """Run the CLI under ``-X importtime``: (the run, its import log)."""
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "torchfix_device", *args], cwd=cwd, capture_output=True, env=env, timeout=300
    )
    log = "\n".join(line for line in done.stderr.decode().splitlines() if line.startswith("import time:"))
    return done, log


def test_a_run_answered_from_the_cache_imports_no_libcst(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    (project / "pkg" / "model.py").write_text((ROOT / "examples" / "legacy_project" / "train.py").read_text())
    (project / "pkg" / "gen.py").write_text("# @generated\nimport torch\nx = torch.zeros(1).cuda()\n")
    (project / "pkg" / "plain.py").write_text("import os  # noqa: F401\n")
    cold, cold_log = _imported_modules(["check", "--jobs", "1", "pkg"], project)
    warm, warm_log = _imported_modules(["check", "--jobs", "1", "pkg"], project)
    assert cold.returncode == warm.returncode == 1 and cold.stdout and warm.stdout == cold.stdout
    assert "libcst" in cold_log  # the cold run transformed files
    assert "libcst" not in warm_log
    # the registry is read from its memo; no codemod (nor the base class) is imported
    imported = {line.rsplit("|", 1)[-1].strip() for line in warm_log.splitlines()}
    codemod_modules = {m for m in imported if m.startswith("torchfix_device.codemods.")}
    assert codemod_modules == {"torchfix_device.codemods.catalog"}, codemod_modules
    assert warm.stderr.decode().splitlines()[-1] == cold.stderr.decode().splitlines()[-1]
