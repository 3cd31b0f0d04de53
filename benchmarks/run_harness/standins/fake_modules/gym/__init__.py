"""A tiny fake ``gym`` for the run harness (not the real package: no physics, no Atari).

The scripts of 2017-2018 were written against gym 0.9/0.10: ``reset()`` returns the observation,
``step(a)`` returns ``(observation, reward, done, info)``. Today's gym/gymnasium changed both,
which would break every script for reasons unrelated to torch. This package keeps that old
API with the right spaces for the environments the manifest's scripts make:

* ``CartPole-v0/v1``: ``Box(4,)`` float64, ``Discrete(2)``, the attributes ``x_threshold`` and
  ``theta_threshold_radians`` that some scripts read to shape rewards;
* ``MountainCar-v0``: ``Box(2,)``, ``Discrete(3)``; ``Pendulum-v0``: ``Box(3,)``, ``Box(1,)``;
* Atari ids (``...NoFrameskip-v4``, ``...Deterministic-v4``, ``Pong-v0``...): ``Box(210, 160, 3)``
  uint8, ``Discrete(6)``, ``unwrapped.ale.lives()`` and ``get_action_meanings()``.

Observations are random (seeded), rewards are 1.0, and an episode ends after 10 to 30 steps.
"""

from __future__ import annotations

import numpy as np

from . import spaces
from .core import ActionWrapper, Env, ObservationWrapper, RewardWrapper, Wrapper

__version__ = "0.9.6-run-harness"
logger = None


class _ALE:
    def __init__(self):
        self._lives = 5

    def lives(self):
        return self._lives


class FakeEnv(Env):
    def __init__(self, env_id, observation_space, action_space, extra=None):
        self.observation_space = observation_space
        self.action_space = action_space
        self.spec = _Spec(env_id)
        self._rng = np.random.RandomState(0)
        self._t = 0
        self._length = 20
        self.reward_range = (-np.inf, np.inf)
        self.metadata = {"render.modes": []}
        for key, value in (extra or {}).items():
            setattr(self, key, value)

    def _observe(self):
        space = self.observation_space
        if isinstance(space, spaces.Box) and space.dtype == np.uint8:
            return self._rng.randint(0, 256, space.shape).astype(np.uint8)
        return self._rng.uniform(-0.05, 0.05, space.shape).astype(space.dtype)

    def reset(self, **kwargs):
        self._t = 0
        self._length = int(self._rng.randint(10, 31))
        return self._observe()

    def step(self, action):
        # as gym 0.9's classic-control and Atari environments did: the action must be a Python
        # int or a NumPy integer scalar (a 0-dim torch tensor is neither)
        assert self.action_space.contains(action), "%r (%s) invalid" % (action, type(action))
        self._t += 1
        done = self._t >= self._length
        return self._observe(), 1.0, done, {}

    def seed(self, seed=None):
        self._rng = np.random.RandomState(seed if seed is not None else 0)
        return [seed]


class _Spec:
    def __init__(self, env_id):
        self.id = env_id
        self.timestep_limit = 200
        self.max_episode_steps = 200
        self.reward_threshold = None


def make(env_id, **kwargs):
    if env_id.startswith("CartPole"):
        return FakeEnv(env_id, spaces.Box(-np.inf, np.inf, (4,), np.float64), spaces.Discrete(2),
                       {"x_threshold": 2.4, "theta_threshold_radians": 12 * 2 * np.pi / 360})
    if env_id.startswith("MountainCar"):
        return FakeEnv(env_id, spaces.Box(np.array([-1.2, -0.07]), np.array([0.6, 0.07]), dtype=np.float64), spaces.Discrete(3))
    if env_id.startswith("Pendulum"):
        return FakeEnv(env_id, spaces.Box(-8.0, 8.0, (3,), np.float64), spaces.Box(-2.0, 2.0, (1,), np.float64))
    if env_id.startswith("Acrobot"):
        return FakeEnv(env_id, spaces.Box(-10.0, 10.0, (6,), np.float64), spaces.Discrete(3))
    if "NoFrameskip" in env_id or "Deterministic" in env_id or env_id.split("-")[0] in ATARI:
        env = FakeEnv(env_id, spaces.Box(0, 255, (210, 160, 3), np.uint8), spaces.Discrete(6))
        env.ale = _ALE()
        env.get_action_meanings = lambda: ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]
        return env
    raise error.Error(f"the run harness's fake gym has no environment {env_id!r}")


ATARI = {"Pong", "Breakout", "SpaceInvaders", "Seaquest", "Qbert", "BeamRider", "Enduro"}


class error:  # noqa: N801 - gym.error.Error
    class Error(Exception):
        pass
