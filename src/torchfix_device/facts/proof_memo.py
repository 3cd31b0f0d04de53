"""Memoised greatest-fixpoint proofs for TFD009's evidence.

"Is this binding (or attribute) grad-free?" is proved assuming it is while its own value is
checked (a loop ``h = h * 2``, an attribute set from itself). Without memory, each read of the
same attribute is proved again from scratch: a file with a few classes writing the same
attribute names (``self.grid``, ``self.height``) took minutes. What may be remembered:

- a negative answer, unless the depth limit cut the proof short (assuming more can only make a
  value look grad-free, so a value found missing evidence stays so);
- a positive answer whose proof leaned on no assumption made outside it (only on its own key
  or on keys it opened itself);
- a positive answer that leaned on an outer assumption, once the proof that made that
  assumption is itself proved positive leaning on nothing further out: every key proved
  positive on the way then holds together (a set of assumptions each of which is proved from
  the others is part of the greatest fixpoint). Until then it is *pending*: asked again inside
  that outer proof, it is an assumption like an open key (leaning where it leaned), and it is
  dropped when that outer proof fails (then it is proved again next time). Without this, the
  same attribute of five classes (``self.batchgrid = Variable(self.batchgrid)`` in each, every
  class's value read in another's) was proved along every order of the classes, at every read.
"""

from __future__ import annotations

from typing import Callable, Hashable

NO_HIT = 1 << 30


class ProofMemo:
    def _proof_state(self) -> tuple[dict, dict, list, list, list, dict]:
        state = self.__dict__.get("_proof")
        if state is None:
            state = self.__dict__.setdefault("_proof", ({}, {}, [], [0], [], {}))
        return state

    def prove(self, key: Hashable, compute: Callable[[], str | None]) -> str | None:
        """``compute()``'s answer for ``key``, assuming ``key`` grad-free while it runs."""
        memo, open_at, lowest, cutoffs, pending, leaning = self._proof_state()
        if key in memo:
            return memo[key]
        assumed = open_at.get(key, leaning.get(key))
        if assumed is not None:  # an assumption: note how far down the stack this proof now leans
            if lowest:
                lowest[-1] = min(lowest[-1], assumed)
            return None
        depth = len(lowest)
        open_at[key] = depth
        lowest.append(NO_HIT)
        pending.append([])
        cut_before = cutoffs[0]
        try:
            found = compute()
        finally:
            del open_at[key]
            leaned = lowest.pop()
            held = pending.pop()
        if found is not None:
            if cutoffs[0] == cut_before:
                memo[key] = found
            for inner in held:  # proved from an assumption that failed
                del leaning[inner]
        elif leaned >= depth:
            memo[key] = None
            for inner in held:  # proved from assumptions that now all hold
                del leaning[inner]
                memo[inner] = None
        else:  # holds if the assumption it leaned on does
            held.append(key)
            for inner in held:
                leaning[inner] = leaned
            pending[-1].extend(held)
        if lowest and leaned < depth:
            lowest[-1] = min(lowest[-1], leaned)
        return found

    def proof_cut_short(self) -> None:
        """Record that a depth limit ended a proof (its negatives are not remembered)."""
        self._proof_state()[3][0] += 1
