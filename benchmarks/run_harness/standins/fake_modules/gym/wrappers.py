"""``gym.wrappers.Monitor`` of gym 0.9: records nothing here."""

from .core import Wrapper


class Monitor(Wrapper):
    def __init__(self, env, directory=None, *args, **kwargs):
        super().__init__(env)
