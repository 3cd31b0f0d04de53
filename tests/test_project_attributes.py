"""What an attribute of an instance of a project class holds, across the files of a run
(:mod:`torchfix_device.facts.project_attributes`): a language model's sampler looks up
``corpus.dictionary.idx2word[word_id]``, where ``Corpus`` and ``Dictionary`` live in another
file. The fact makes TFD019's ``.item()`` safe there (a fresh tensor is no key of a plain dict),
and the program runs after ``apply``; the traps keep it unsafe. Executed before and after."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import run_cli, run_script
from torchfix_device.facts.project_attributes import (
    EVERY_ATTRIBUTE, MAPPING, PLAIN_DICT, SEQUENCE, class_attributes, stored_from_outside,
)

DATA_UTILS = '''import collections


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = {}

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word[len(self.word2idx)] = word
            self.word2idx[word] = len(self.word2idx)


class Corpus(object):
    def __init__(self, words):
        self.dictionary = Dictionary()
        for word in words:
            self.dictionary.add_word(word)
'''

MAIN = '''import torch
from data_utils import Corpus

torch.manual_seed(0)
corpus = Corpus("the cat sat on the mat".split())
model = torch.nn.Sequential(torch.nn.Linear(1, 5), torch.nn.LogSoftmax(dim=1))
inputs = torch.zeros(1, 1)
words = []
for i in range(6):
    prob = model(inputs).squeeze().data.exp()
    word_id = torch.multinomial(prob, 1)[0]
    inputs.fill_(word_id)
    word = corpus.dictionary.idx2word[word_id]
    words.append(word)
print(" ".join(words))
'''


def _project(root: Path, data_utils: str = DATA_UTILS, **others: str) -> Path:
    root.mkdir()
    (root / "data_utils.py").write_text(data_utils, encoding="utf-8")
    (root / "main.py").write_text(MAIN, encoding="utf-8")
    for name, text in others.items():
        (root / f"{name}.py").write_text(text, encoding="utf-8")
    return root


def _check(root: Path) -> str:
    checked = run_cli("check", ".", "--no-cache", cwd=root)
    return checked.stdout.decode()


def _run(root: Path) -> subprocess.CompletedProcess:
    return run_script("main.py", cwd=root)


def test_a_class_s_attributes_get_the_kind_every_assignment_gives() -> None:
    table = class_attributes(DATA_UTILS)
    assert table["Dictionary"] == {"word2idx": PLAIN_DICT, "idx2word": PLAIN_DICT}
    assert table["Corpus"] == {"dictionary": "class:Dictionary"}
    source = (
        "import collections\nfrom collections import OrderedDict as OD\nimport torch.nn as nn\n"
        "class Base:\n    def __init__(self):\n        self.items = []\n        self.names = OD()\n"
        "class A(Base):\n    def reset(self):\n        self.items = list()\n        self.counts = collections.Counter()\n"
        "        self.mixed = {}\n    def other(self):\n        self.mixed = []\n        self.pair, self.other = {}, {}\n"
        "    @staticmethod\n    def make(x):\n        x.made = {}\n"
        "class Net(nn.Module):\n    def __init__(self):\n        self.d = {}\n"
        "class Foreign(Elsewhere):\n    def __init__(self):\n        self.d = {}\n"
        "class Dynamic:\n    def __init__(self, **kw):\n        self.d = {}\n        for k, v in kw.items():\n            setattr(self, k, v)\n"
        "class Guarded:\n    def __init__(self):\n        self.d = {}\n    def __getattribute__(self, name):\n        return 0\n"
        "class Prop:\n    def __init__(self):\n        self.d = {}\n        self.e = {}\n    @property\n    def d(self):\n        return 0\n"
    )
    table = class_attributes(source)
    assert table["A"] == {"items": SEQUENCE, "names": PLAIN_DICT, "counts": MAPPING}  # mixed, pair, made: no kind
    assert table["Net"] == {"d": PLAIN_DICT}
    assert "Foreign" not in table and "Dynamic" not in table and "Guarded" not in table  # base, setattr, hook
    assert table["Prop"] == {"e": PLAIN_DICT}  # `d` is a property too


def test_stores_from_outside_a_class_s_methods_are_collected() -> None:
    source = (
        "def reset(c):\n    c.idx2word = None\n"
        "class K:\n    def __init__(self):\n        self.own = 1\n        self.child.deep = 2\n"
        "    @staticmethod\n    def s(x):\n        x.static = 3\n"
        "setattr(obj, 'named', 1)\n"
    )
    assert stored_from_outside(source) == {"idx2word", "deep", "static", "named"}
    assert EVERY_ATTRIBUTE in stored_from_outside("for k in d:\n    setattr(args, k, d[k])\n")


def test_a_lookup_in_a_dict_attribute_of_a_class_of_another_file_is_a_safe_fix_and_the_program_runs(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    before = _run(root)
    assert before.returncode != 0 and "KeyError: tensor(" in before.stderr, before.stderr
    applied = run_cli("apply", ".", "--no-cache", cwd=root)
    assert applied.returncode == 0, applied.stderr
    text = (root / "main.py").read_text(encoding="utf-8")
    assert "    word_id = torch.multinomial(prob, 1)[0].item()\n" in text
    after = _run(root)
    assert after.returncode == 0, after.stderr
    assert len(after.stdout.split()) == 6 and set(after.stdout.split()) <= {"the", "cat", "sat", "on", "mat"}


@pytest.mark.parametrize(
    "change, others",
    [
        (("self.idx2word = {}", "self.idx2word = collections.defaultdict(str)"), {}),  # adds the key
        (("self.dictionary = Dictionary()", "self.dictionary = make_dictionary()"), {}),  # not shown
        (("class Corpus(object):", "class Corpus(Base):"), {}),  # a base from elsewhere
        ((), {"helper": "import main\n\ndef reset(d):\n    d.idx2word = None\n"}),  # another file writes it
    ],
    ids=["defaultdict", "made-by-a-function", "foreign-base", "written-by-a-helper"],
)
def test_what_the_classes_do_not_show_keeps_the_fix_for_review(tmp_path: Path, change: tuple[str, ...], others: dict) -> None:
    data_utils = DATA_UTILS.replace(*change) if change else DATA_UTILS
    root = _project(tmp_path / "p", data_utils, **others)
    line = next(l for l in _check(root).splitlines() if "TFD019" in l)
    assert "[*]" not in line, line


def test_another_project_in_the_same_run_changes_nothing(tmp_path: Path) -> None:
    """A run over a folder holding this project and another whose helper writes an attribute of
    that name: the helper is not connected to this project by imports, so the fix stays safe."""
    top = tmp_path / "top"
    top.mkdir()
    _project(top / "lm")
    other = top / "other"
    other.mkdir()
    (other / "helper.py").write_text("def reset(d):\n    d.idx2word = None\n", encoding="utf-8")
    out = _check(top)
    line = next(l for l in out.splitlines() if "TFD019" in l)
    assert line.startswith("lm/main.py:11:15: TFD019 [*]"), out


def test_a_class_changing_its_attribute_changes_the_cached_answer_for_the_importing_file(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "pyproject.toml").write_text("[tool.torchfix-device]\n", encoding="utf-8")  # the cache lives here

    def verdict() -> str:
        out = run_cli("check", ".", cwd=root).stdout.decode()
        return next(l for l in out.splitlines() if "TFD019" in l)

    assert "[*]" in verdict()
    (root / "data_utils.py").write_text(DATA_UTILS.replace("self.idx2word = {}", "self.idx2word = collections.Counter()"), encoding="utf-8")
    assert "[*]" not in verdict()  # main.py is unchanged: its cached answer must not be
