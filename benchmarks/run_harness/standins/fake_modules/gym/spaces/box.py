from __future__ import annotations

import numpy as np


class Box:
    def __init__(self, low, high, shape=None, dtype=np.float32):
        if shape is None:
            low = np.asarray(low)
            shape = low.shape
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.low = np.broadcast_to(np.asarray(low, dtype=self.dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=self.dtype), self.shape).copy()
        self._rng = np.random.RandomState(0)

    def sample(self):
        if self.dtype == np.uint8:
            return self._rng.randint(0, 256, self.shape).astype(np.uint8)
        low = np.where(np.isfinite(self.low), self.low, -1.0)
        high = np.where(np.isfinite(self.high), self.high, 1.0)
        return self._rng.uniform(low, high, self.shape).astype(self.dtype)

    def contains(self, x):
        return np.shape(x) == self.shape

    def __repr__(self):
        return f"Box{self.shape}"
