"""``gym.core`` of gym 0.9/0.10: ``Env`` and the wrappers, old and new method names both."""

from __future__ import annotations


class Env:
    observation_space = None
    action_space = None
    reward_range = (-float("inf"), float("inf"))
    metadata = {"render.modes": []}
    spec = None

    @property
    def unwrapped(self):
        return self

    def render(self, mode="human", **kwargs):
        return None

    def close(self):
        return None

    def seed(self, seed=None):
        return [seed]

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()
        return False


class Wrapper(Env):
    def __init__(self, env=None):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.reward_range = getattr(env, "reward_range", self.reward_range)
        self.metadata = getattr(env, "metadata", self.metadata)
        self.spec = getattr(env, "spec", None)

    def __getattr__(self, name):
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def step(self, action):
        if type(self)._step is not Wrapper._step:
            return self._step(action)
        return self.env.step(action)

    def reset(self, **kwargs):
        if type(self)._reset is not Wrapper._reset:
            return self._reset(**kwargs)
        return self.env.reset(**kwargs)

    def _step(self, action):
        return self.env.step(action)

    def _reset(self, **kwargs):
        return self.env.reset(**kwargs)

    def render(self, mode="human", **kwargs):
        return self.env.render(mode, **kwargs)

    def close(self):
        return self.env.close()

    def seed(self, seed=None):
        return self.env.seed(seed)


class ObservationWrapper(Wrapper):
    def reset(self, **kwargs):
        return self.observation(self.env.reset(**kwargs))

    def step(self, action):
        observation, reward, done, info = self.env.step(action)
        return self.observation(observation), reward, done, info

    def observation(self, observation):
        return self._observation(observation)

    def _observation(self, observation):
        return observation


class RewardWrapper(Wrapper):
    def step(self, action):
        observation, reward, done, info = self.env.step(action)
        return observation, self.reward(reward), done, info

    def reward(self, reward):
        return self._reward(reward)

    def _reward(self, reward):
        return reward


class ActionWrapper(Wrapper):
    def step(self, action):
        return self.env.step(self.action(action))

    def action(self, action):
        return self._action(action)

    def _action(self, action):
        return action
