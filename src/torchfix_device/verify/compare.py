"""Are the CPU numbers of the original and of the rewrite the same?

Both CPU legs save their outputs and their model's ``state_dict`` (see ``harness``); the numbers
are the same when every output has the same shape and ``torch.allclose`` values (compared in
float64, NaN equal to NaN), and the two ``state_dict`` have the same keys and close values.
Dtypes may differ (``loss.data[0]`` summed into a tensor, ``loss.item()`` into a float).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

RTOL = 1e-5
ATOL = 1e-6
SHOWN_KEYS = 3


@dataclass
class Comparison:
    equal: bool
    differences: list[str] = field(default_factory=list)


def _close(a, b) -> tuple[bool, str]:
    import torch

    if a.shape != b.shape:
        return False, f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    wide = torch.complex128 if (a.is_complex() or b.is_complex()) else torch.float64
    a64, b64 = a.to(wide), b.to(wide)
    if torch.allclose(a64, b64, rtol=RTOL, atol=ATOL, equal_nan=True):
        return True, ""
    if a.numel() == 0:
        return False, "differ"
    delta = (a64 - b64).abs().nan_to_num(nan=float("inf")).max().item()
    return False, f"max |diff| {delta:.3g}"


def _keys(keys: list[str]) -> str:
    shown = ", ".join(keys[:SHOWN_KEYS])
    return shown + (f", ... {len(keys) - SHOWN_KEYS} more" if len(keys) > SHOWN_KEYS else "")


def compare_saved(original: Path, rewrite: Path) -> Comparison:
    """Compare two ``--outputs`` files of the harness."""
    import torch

    before = torch.load(original, weights_only=True)
    after = torch.load(rewrite, weights_only=True)
    differences: list[str] = []
    outs_a, outs_b = before["outputs"], after["outputs"]
    if len(outs_a) != len(outs_b):
        differences.append(f"outputs: {len(outs_a)} tensors vs {len(outs_b)}")
    for index, (a, b) in enumerate(zip(outs_a, outs_b)):
        same, why = _close(a, b)
        if not same:
            differences.append(f"output {index}: {why}")
    state_a, state_b = before["state_dict"], after["state_dict"]
    added = [k for k in state_b if k not in state_a]
    removed = [k for k in state_a if k not in state_b]
    if added or removed:
        change = f"state_dict: {len(state_a)} → {len(state_b)} tensors"
        if added:
            change += f" (+{len(added)}: {_keys(added)})"
        if removed:
            change += f" (-{len(removed)}: {_keys(removed)})"
        differences.append(change)
    for key in state_a:
        if key in state_b:
            same, why = _close(state_a[key], state_b[key])
            if not same:
                differences.append(f"state_dict[{key!r}]: {why}")
    return Comparison(equal=not differences, differences=differences)


def explained_by_registration(original: Path, rewrite: Path) -> bool:
    """Whether the rewrite's outputs are the original's once the layers the original kept in
    plain lists or dicts are in the model's own mode (``as_registered``, saved by the user
    harness): then the outputs differ only because ``eval()`` now reaches those layers."""
    import torch

    before = torch.load(original, weights_only=True)
    after = torch.load(rewrite, weights_only=True)
    expected, got = before.get("as_registered"), after["outputs"]
    if expected is None or len(expected) != len(got) or not got:
        return False
    return all(_close(a, b)[0] for a, b in zip(expected, got))
