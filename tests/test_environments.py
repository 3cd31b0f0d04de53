"""Issue 31: an environment the project makes itself (a wrapper class of its own that derives from
``gym.Wrapper``, a function of another file that returns one) is a ``gym`` environment
(``facts.environments``): the action a 0.3 DQN picks with ``q.max(1)[1].data[0]`` (a number
then, a 0-dim tensor since 0.4) is handed to its ``step``, and becomes a number again, a safe fix.
A ``gym`` stand-in outside the project checks the action's type, as gym's discrete spaces do."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, run_script

pytest.importorskip("torch")

GYM = '''class Env(object):
    def step(self, action):
        if not isinstance(action, int):
            raise TypeError("the action must be an int, not %s" % type(action).__name__)
        return action, 1.0, True, {}


class Wrapper(Env):
    def __init__(self, env):
        self.env = env

    def step(self, action):
        return self.env.step(action)


def make(name):
    return Env()
'''

WRAPPERS = '''import gym


class FrameSkip(gym.Wrapper):
    def step(self, action):
        return self.env.step(action)


class Scaled(FrameSkip):
    pass


def wrap(env):
    env = FrameSkip(env)
    return Scaled(env)
'''

MAIN = '''import json

import gym
import torch
from torch.autograd import Variable

from wrappers import wrap

env = wrap(gym.make("PongNoFrameskip-v4"))
q_value = Variable(torch.tensor([[0.1, 0.9, 0.3]]))
action = q_value.max(1)[1].data[0]
print(json.dumps(env.step(action)))
'''

OBSERVER = "import runpy, sys\nsys.path[:0] = [{site!r}, '.']\nrunpy.run_path('main.py', run_name='__main__')\n"


def _project(tmp_path: Path, main: str = MAIN) -> tuple[Path, Path]:
    site, root = tmp_path / "site" / "gym", tmp_path / "p"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(GYM, encoding="utf-8")
    root.mkdir()
    (root / "wrappers.py").write_text(WRAPPERS, encoding="utf-8")
    (root / "main.py").write_text(main, encoding="utf-8")
    observer = tmp_path / "observe.py"
    observer.write_text(OBSERVER.format(site=str(tmp_path / "site")), encoding="utf-8")
    return root, observer


def test_the_action_a_project_wrapper_steps_with_becomes_a_number(tmp_path: Path) -> None:
    root, observer = _project(tmp_path)
    before = run_script(str(observer), cwd=root)
    assert before.returncode != 0 and "the action must be an int, not Tensor" in before.stderr, before.stderr
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    line = next(l for l in out.splitlines() if l.startswith("main.py:11:") and "TFD019" in l)
    assert "a gym action" in line and "[*]" in line, line
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert "action = q_value.max(1)[1][0].item()\n" in (root / "main.py").read_text(encoding="utf-8")
    after = run_script(str(observer), cwd=root)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "[1, 1.0, true, {}]"


def test_the_file_alone_does_not_show_what_the_function_returns(tmp_path: Path) -> None:
    root, _ = _project(tmp_path)
    out = run_cli("check", "main.py", "--no-cache", cwd=root).stdout.decode()
    line = next(l for l in out.splitlines() if l.startswith("main.py:11:") and "TFD019" in l)
    assert "[*]" not in line and "unsafe" in line, line


LOCAL = '''from wrappers import wrap


class Other(object):
    def __init__(self, env):
        self.env = env

    def step(self, action):
        return self.env.step(action)


class Local(gym.Wrapper):
    pass


def make_local():
    return Local(gym.make("PongNoFrameskip-v4"))
'''


@pytest.mark.parametrize("made, shown", [
    ("wrap(object())", True),  # a wrapper of something that is no environment: still a gym.Wrapper
    ("Local(gym.make('PongNoFrameskip-v4'))", True),  # a class of the file deriving from gym's
    ("make_local()", True),  # a function of the file returning one
    ("Other(gym.make('PongNoFrameskip-v4'))", False),  # a class of the file that derives from no gym class
])
def test_a_class_of_the_file_counts_only_where_it_derives_from_gym(tmp_path: Path, made: str, shown: bool) -> None:
    main = MAIN.replace('wrap(gym.make("PongNoFrameskip-v4"))', made).replace("from wrappers import wrap\n", LOCAL)
    root, _ = _project(tmp_path, main)
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    line = next(l for l in out.splitlines() if "TFD019" in l and "data[0]" in l)
    assert ("[*]" in line) is shown, line
