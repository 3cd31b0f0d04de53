"""TFD019 where a PyTorch 0.3 number leaves its file by a ``return``: what the other files of
the run do with the calls' results decides (``facts.uses.foreign_uses``, the engine's
``ForeignCallers.return_uses``), as the calls of the defining file always did. ``metrics.py``'s
``accuracy`` counts with ``correct += pred.eq(y).sum()`` (a number in 0.3, a 0-dim tensor
since 0.4) and returns ``correct / total``; ``main.py`` writes the result as JSON, which a
tensor cannot be. Where a caller uses the result as a tensor the number is not made; where a
caller hands it to something unknown the fix stays unsafe."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, run_script

pytest.importorskip("torch")

METRICS = '''import torch


def accuracy(batches):
    correct, total = 0, 0
    for pred, y in batches:
        correct += pred.eq(y).sum()
        total += len(y)
    return correct / total


def train(batches):
    return "model", accuracy(batches)
'''

BATCHES = "[(torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])), (torch.tensor([0, 0]), torch.tensor([0, 1]))]"

MAIN = f'''import json

import torch

from metrics import accuracy, train

batches = {BATCHES}
acc = accuracy(batches)
model, again = train(batches)
print(json.dumps({{"accuracy": acc, "again": again}}))
'''


def _project(root: Path, main: str = MAIN, **others: str) -> Path:
    root.mkdir(parents=True)
    (root / "metrics.py").write_text(METRICS, encoding="utf-8")
    (root / "main.py").write_text(main, encoding="utf-8")
    for name, text in others.items():
        (root / f"{name}.py").write_text(text, encoding="utf-8")
    return root


def _line(root: Path) -> str:
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    return next(line for line in out.splitlines() if line.startswith("metrics.py:7:") and "TFD019" in line)


def test_a_number_the_other_files_write_as_json_is_made_again_and_the_script_runs(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    before = run_script("main.py", cwd=root)
    assert before.returncode != 0 and "not JSON serializable" in before.stderr, before.stderr
    assert "[*]" in _line(root)
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert "correct += pred.eq(y).sum().item()" in (root / "metrics.py").read_text(encoding="utf-8")
    after = run_script("main.py", cwd=root)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == '{"accuracy": 0.6, "again": 0.6}'


def test_without_the_other_files_the_return_is_not_shown_to_take_a_number(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    out = run_cli("check", "metrics.py", "--no-cache", cwd=root).stdout.decode()
    line = next(line for line in out.splitlines() if line.startswith("metrics.py:7:") and "TFD019" in line)
    assert "[*]" not in line and "unsafe" in line, line


@pytest.mark.parametrize("main, others", [
    (MAIN, {"report": "from metrics import accuracy\n\nprint(accuracy([]).item())\n"}),  # a tensor's method
    (MAIN, {"report": "from metrics import train\n\n_, acc = train([])\nacc.backward()\n"}),  # the element, as a tensor
])
def test_a_caller_that_uses_the_result_as_a_tensor_keeps_it(tmp_path: Path, main: str, others: dict) -> None:
    root = _project(tmp_path / "p", main, **others)
    out = run_cli("check", ".", "--no-cache", "--unsafe-fixes", cwd=root).stdout.decode()
    assert not [line for line in out.splitlines() if line.startswith("metrics.py:7:") and "TFD019" in line], out


@pytest.mark.parametrize("others", [
    {"report": "from metrics import accuracy\nimport logger\n\nlogger.log(accuracy([]))\n"},  # handed to unknown code
    {"report": "from metrics import train\n\nfound = train([])\n"},  # the tuple kept whole
    {"report": "import metrics\n\nscore = metrics.accuracy\n"},  # the function handed on
])
def test_a_caller_whose_use_is_not_shown_leaves_the_fix_unsafe(tmp_path: Path, others: dict) -> None:
    root = _project(tmp_path / "p", **others)
    line = _line(root)
    assert "[*]" not in line and "unsafe" in line, line


OTHER_PROJECT = '''import torch


def accuracy(scores):
    return scores.sum()


print(accuracy(torch.ones(2)).item())
'''


def test_a_file_of_another_project_that_spells_the_name_is_no_caller(tmp_path: Path) -> None:
    """Issue 31: a run over a folder of two projects writes what one run per project writes. The
    other project's ``accuracy`` (its own, used as a tensor) cannot reach ``metrics.py`` by any
    import, so it casts no doubt on the callers of this one."""
    for layout in ("together", "apart"):
        _project(tmp_path / layout / "app")
        (tmp_path / layout / "tools").mkdir()
        (tmp_path / layout / "tools" / "score.py").write_text(OTHER_PROJECT, encoding="utf-8")
    assert run_cli("apply", ".", "--no-cache", cwd=tmp_path / "together").returncode == 0
    for name in ("app", "tools"):
        assert run_cli("apply", ".", "--no-cache", cwd=tmp_path / "apart" / name).returncode == 0
    compared = 0
    for path in sorted((tmp_path / "apart").rglob("*.py")):
        assert (tmp_path / "together" / path.relative_to(tmp_path / "apart")).read_bytes() == path.read_bytes(), path
        compared += 1
    assert compared == 3
    assert "pred.eq(y).sum().item()" in (tmp_path / "together" / "app" / "metrics.py").read_text(encoding="utf-8")


def test_a_file_of_the_same_project_that_spells_the_name_without_importing_it_casts_doubt(tmp_path: Path) -> None:
    # `report.py` reaches `metrics.py` through `helpers.py`, which imports the module, not the name
    root = _project(tmp_path / "p", helpers="import metrics\n", report="import helpers\n\nprint(helpers.metrics.accuracy([]).item())\n")
    line = _line(root)
    assert "[*]" not in line and "unsafe" in line, line



SCORER = '''import json

import torch


class Scorer(object):
    def hits(self, pred, y):
        return pred.eq(y).sum()

    def report(self, pred, y):
        return json.dumps({"hits": self.hits(pred, y)})
'''

PAIR = "torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])"


@pytest.mark.parametrize("main", [
    f"import torch\nfrom scorer import Scorer\n\nprint(Scorer().hits({PAIR}).item() + 1)\n",  # a tensor's method
    "from scorer import Scorer\n\nprint(Scorer.__name__)\n",  # a file that imports the class
])
def test_a_method_of_a_class_other_files_import_is_not_followed_to_its_own_calls_alone(tmp_path: Path, main: str) -> None:
    """Issue 31: where a method returns a 0.3 number (``pred.eq(y).sum()``), its calls in its
    own file used to decide (``json.dumps({"hits": self.hits(pred, y)})``: a number was meant),
    though the instances of a class other files import may be called there too, and what those
    calls do with the result is not read: ``main.py``'s ``.item()`` then failed on the number.
    The fix is no longer safe there; the script runs as it did."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "scorer.py").write_text(SCORER, encoding="utf-8")
    (root / "main.py").write_text(main, encoding="utf-8")
    before = run_script("main.py", cwd=root)
    assert before.returncode == 0, before.stderr
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert "        return pred.eq(y).sum()\n" in (root / "scorer.py").read_text(encoding="utf-8")
    after = run_script("main.py", cwd=root)
    assert after.returncode == 0 and after.stdout == before.stdout, after.stderr
    alone = run_cli("check", "scorer.py", "--no-cache", cwd=root).stdout.decode()  # the file alone: its calls decide
    assert any(line.startswith("scorer.py:8:") and "TFD019" in line and "[*]" in line for line in alone.splitlines()), alone


PICK = '''import torch

VOCAB = {0: "the", 1: "cat"}


def pick(probs):
    return torch.multinomial(probs, 1)[0]


def word(probs):
    return VOCAB[pick(probs)]
'''


def test_a_refusal_at_the_own_file_s_calls_does_not_speak_for_the_other_files(tmp_path: Path) -> None:
    """Issue 31: ``pick``'s result fails as a key of the file's plain dict for a tensor of any
    shape (a refusal: ``facts.refusals``), which made ``.item()`` safe whatever its dimensions; but
    ``main.py`` hands the result to code that calls ``.item()`` on it, which an int does not have.
    Where other files of the run call the function, the refusal at this file's calls no longer
    decides: the fix is unsafe, and the script runs as it did."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "vocab.py").write_text(PICK, encoding="utf-8")
    (root / "report.py").write_text("def show(x):\n    print(x.item())\n", encoding="utf-8")
    (root / "main.py").write_text(
        "import torch\n\nfrom report import show\nfrom vocab import pick\n\nshow(pick(torch.tensor([0.0, 1.0])))\n", encoding="utf-8")
    before = run_script("main.py", cwd=root)
    assert before.returncode == 0 and before.stdout.strip() == "1", before.stderr
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    line = next(l for l in out.splitlines() if l.startswith("vocab.py:7:") and "TFD019" in l)
    assert "[*]" not in line and "unsafe" in line, line
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert (root / "vocab.py").read_text(encoding="utf-8") == PICK
    after = run_script("main.py", cwd=root)
    assert after.returncode == 0 and after.stdout == before.stdout, after.stderr
    alone = run_cli("check", "vocab.py", "--no-cache", cwd=root).stdout.decode()  # the file alone: its calls decide
    assert any(l.startswith("vocab.py:7:") and "[*]" in l and "any shape" in l for l in alone.splitlines()), alone
