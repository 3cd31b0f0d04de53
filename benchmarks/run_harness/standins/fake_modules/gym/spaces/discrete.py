from __future__ import annotations

import numpy as np


class Discrete:
    def __init__(self, n):
        self.n = int(n)
        self.shape = ()
        self.dtype = np.dtype(np.int64)
        self._rng = np.random.RandomState(0)

    def sample(self):
        return int(self._rng.randint(self.n))

    def contains(self, x):
        """gym 0.9's test: a Python int, or a NumPy integer scalar / 0-dim array."""
        if isinstance(x, int):
            as_int = x
        elif isinstance(x, (np.generic, np.ndarray)) and x.dtype.kind in np.typecodes["AllInteger"] and x.shape == ():
            as_int = int(x)
        else:
            return False
        return 0 <= as_int < self.n

    def __repr__(self):
        return f"Discrete({self.n})"
