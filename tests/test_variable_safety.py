"""TFD009's safe rewrites, executed: each fixture's ``.in.py`` and ``.out.py`` run on CPU with
torch 2.x and what a user observes (values, dtype, ``requires_grad``, the branch taken) compared."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).parent / "fixtures" / "variable_wrapper"


def _load(name: str) -> dict:
    namespace: dict = {"__name__": f"fixture_{name.replace('.', '_')}"}
    path = FIXTURES / name
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace


def _pair(stem: str) -> tuple[dict, dict]:
    return _load(f"{stem}.in.py"), _load(f"{stem}.out.py")


def _same_tensor(a, b) -> None:
    assert type(a) is type(b)
    assert a.dtype == b.dtype
    assert a.requires_grad == b.requires_grad
    assert torch.equal(a.detach(), b.detach())


@pytest.mark.parametrize("stem", ["isinstance", "isinstance_adds_torch"])
def test_isinstance_variable_is_isinstance_tensor(stem: str) -> None:
    before, after = _pair(stem)
    function = "as_tensor" if stem == "isinstance" else "is_tensor"
    leaf = torch.randn(3, requires_grad=True)
    for value in (torch.randn(3), leaf, leaf * 2, torch.nn.Parameter(torch.ones(2)), [1.0, 2.0], 3, None):
        if function == "as_tensor" and value is None:
            continue
        old, new = before[function](value), after[function](value)
        if isinstance(old, torch.Tensor):
            _same_tensor(old, new)
            assert (old is value) == (new is value)  # the same branch: the tensor itself returned
        else:
            assert old == new


def test_type_equals_variable_was_always_false_and_is_fixed() -> None:
    before, after = _pair("type_compare")
    h = torch.randn(2, 3, requires_grad=True) * 2
    # Before: `type(h) == Variable` is False on torch >= 0.4, so a tensor goes down the branch
    # meant for tuples, iterating it down to 0-d tensors, which fails: the rewrite fixes it.
    with pytest.raises(TypeError, match="0-d tensor"):
        before["repackage"](torch.randn(2, 3))
    new = after["repackage"](h)
    assert isinstance(new, torch.Tensor) and not new.requires_grad
    assert torch.equal(new, h.detach())
    # A tuple of tensors: the tuple branch after the rewrite, each element detached.
    pair = after["repackage"]((h, h + 1))
    assert isinstance(pair, tuple) and len(pair) == 2
    assert all(isinstance(t, torch.Tensor) and not t.requires_grad for t in pair)
    assert torch.equal(pair[1], (h + 1).detach())
    # Something that is not a tensor goes through neither tensor branch, before and after.
    assert before["repackage"](()) == after["repackage"](()) == ()


def test_variable_of_data_is_detach() -> None:
    before, after = _pair("data_detach")
    h = torch.randn(4, requires_grad=True) * 3
    old, new = before["repackage"](h), after["repackage"](h)
    _same_tensor(old, new)
    assert not new.requires_grad and new.is_leaf
    assert old.data_ptr() == new.data_ptr() == h.data_ptr()  # both share h's storage
    # No evidence that it is a tensor: ``.data.detach()``, the same for a tensor and for any
    # object with a ``.data`` tensor (a PackedSequence has no ``.detach()``).
    packed = torch.nn.utils.rnn.pack_sequence([torch.randn(3, 2, requires_grad=True), torch.randn(2, 2)])
    for value in (h, packed):
        old, new = before["repackage_anything"](value), after["repackage_anything"](value)
        _same_tensor(old, new)
        assert not new.requires_grad and new.data_ptr() == old.data_ptr()

    model = torch.nn.Linear(2, 1)
    (w_old, frozen_old), (w_new, frozen_new) = before["weights"](model), after["weights"](model)
    _same_tensor(w_old, w_new)
    assert w_new.dtype == torch.float32 and w_new.requires_grad and w_new.is_leaf
    _same_tensor(frozen_old, frozen_new)
    assert frozen_new.data_ptr() == model.weight.data_ptr()
    (w_new * 2).sum().backward()
    assert torch.equal(w_new.grad, torch.full((2,), 2.0))


def test_float_list_becomes_torch_tensor() -> None:
    before, after = _pair("float_list")
    for name in ("w", "v", "u"):
        _same_tensor(before[name], after[name])
        assert after[name].is_leaf and after[name].requires_grad


def test_float_list_follows_the_default_dtype() -> None:
    """``torch.Tensor([1.0])`` and ``torch.tensor([1.0])`` both take the default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        before, after = _pair("float_list")
        _same_tensor(before["w"], after["w"])
        assert after["w"].dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)


def test_tuple_self_assignment_removed() -> None:
    before, after = _pair("tuple_self_assignment.unsafe")
    model = torch.nn.Linear(3, 2)
    data, target = torch.randn(5, 3), torch.randint(0, 2, (5,))
    (out_old, t_old), (out_new, t_new) = before["step"](model, data, target), after["step"](model, data, target)
    _same_tensor(out_old, out_new)
    _same_tensor(t_old, t_new)
