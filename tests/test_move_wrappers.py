"""TFD001's moving lambdas (``Variable = lambda *args, **kwargs: autograd.Variable(*args,
**kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)``): which calls are safe to
inline, and what stays when one call is held back. The fixtures of ``tests/fixtures/cuda_call``
(``move_wrapper*``) show the rewrites; these tests hold the tiers and the partial cases."""

from __future__ import annotations

import textwrap

from torchfix_device.codemods.catalog import lookup
from torchfix_device.engine import transform_source
from torchfix_device.options import RunOptions

TFD001 = [lookup("TFD001")]

USER_FLAG = textwrap.dedent("""\
    import argparse
    import torch
    from torch.autograd import Variable as V

    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    use_cuda = args.cuda
    wrap = lambda *a, **k: V(*a, **k).cuda() if use_cuda else V(*a, **k)
    as_array = lambda *a, **k: torch.as_tensor(*a, **k).cuda() if use_cuda else torch.as_tensor(*a, **k)


    def step(batch):
        return wrap(batch)


    x = wrap(torch.zeros(2))
    y = as_array([1.0, 2.0])
""")


def _run(source: str, unsafe: bool = False):  # noqa: ANN202
    return transform_source(source, TFD001, filename="script.py", options=RunOptions(unsafe_fixes=unsafe))


def _calls(output, name: str) -> dict[int, tuple[bool, bool]]:  # noqa: ANN001
    """Line → (fixed, held back) of the findings on calls of ``name``."""
    return {f.line: (f.fixed, f.held_back) for f in output.findings if f.message.startswith(f"`{name}(...)`")}


def test_a_user_flag_makes_a_call_safe_only_for_variable_of_a_value_shown_on_the_cpu() -> None:
    safe = _run(USER_FLAG)
    # `wrap(torch.zeros(2))`: Variable of a CPU factory; `wrap(batch)`: a parameter, anywhere;
    # `as_array([...])`: not Variable, so its argument's place says nothing of its result's
    assert _calls(safe, "wrap") == {14: (False, True), 17: (True, False)}
    assert _calls(safe, "as_array") == {18: (False, True)}
    assert "x = V(torch.zeros(2)).to(device)\n" in safe.text
    assert "return wrap(batch)\n" in safe.text and "wrap = lambda" in safe.text  # a call is left: it stays
    assert "as_array = lambda *a, **k: torch.as_tensor(*a, **k).to(device) if use_cuda" in safe.text

    unsafe = _run(USER_FLAG, unsafe=True)
    assert "wrap = lambda" not in unsafe.text and "as_array = lambda" not in unsafe.text
    assert "return V(batch).to(device)\n" in unsafe.text
    assert "y = torch.as_tensor([1.0, 2.0]).to(device)\n" in unsafe.text
    assert 'device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")\n' in unsafe.text


def test_a_call_held_back_by_noqa_keeps_the_lambda_and_its_guarded_move() -> None:
    source = textwrap.dedent("""\
        import torch
        import torch.autograd as autograd

        USE_CUDA = torch.cuda.is_available()
        Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)
        a = Variable(torch.ones(1))
        b = Variable(torch.ones(2))  # noqa: TFD001
    """)
    output = _run(source)
    assert "a = autograd.Variable(torch.ones(1)).to(device)\n" in output.text
    assert "b = Variable(torch.ones(2))  # noqa: TFD001\n" in output.text
    assert "Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).to(device) if USE_CUDA else" in output.text
    assert _run(output.text).text == output.text  # a second run changes nothing


def test_a_wrapper_bound_twice_or_read_as_a_value_is_no_wrapper() -> None:
    for extra in ("Variable = None\n", "f = Variable\n"):
        source = textwrap.dedent("""\
            import torch
            import torch.autograd as autograd

            USE_CUDA = torch.cuda.is_available()
            Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)
            a = Variable(torch.ones(1))
        """) + extra
        output = _run(source)
        assert "a = Variable(torch.ones(1))\n" in output.text
        assert ".to(device) if USE_CUDA else autograd.Variable(*args, **kwargs)" in output.text
