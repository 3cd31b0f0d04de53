"""``gym.spaces``: ``Box`` and ``Discrete`` (also as ``gym.spaces.box.Box``...)."""

from .box import Box
from .discrete import Discrete

__all__ = ["Box", "Discrete"]
