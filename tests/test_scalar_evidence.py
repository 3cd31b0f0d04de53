"""Issue 20 idioms 3 and 6: `.data[0]`, `.data.numpy()[0]` and accumulated `.data` on values that
are scalars by evidence, executed before and after.

"Before" runs twice: on PyTorch 2.x as it is (where a 0-dim tensor's `x.data[0]`,
`x.data.numpy()[0]` and `total[0]` raise), and with 0-dim results read as PyTorch 0.3 read
its 1-element results (:func:`torch03`: `t[0]` gives the Python number, `t.numpy()` a
1-element array), which is what the legacy code meant. "After" runs on PyTorch 2.x. The tests
compare what a user sees: the value, its type, and the text printed.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from contextlib import contextmanager, redirect_stdout

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods  # noqa: E402
from torchfix_device.engine import transform_source  # noqa: E402

TFD006 = [c for c in all_codemods() if c.code == "TFD006"]


def _rewrite(source: str, unsafe: bool = False):
    return transform_source(source, TFD006, filename="x.py", options=RunOptions(unsafe_fixes=unsafe))


@contextmanager
def torch03():
    """0-dim tensors read as PyTorch 0.3 read its 1-element results: ``t[i]`` on a 0-dim or 1-d
    tensor that does not require grad (``loss.data[0]``, a sum of ``.data``) gives the Python
    number, and ``t.numpy()`` of a 0-dim one gives a 1-element array (so ``[0]`` gives a numpy
    float32), and ``t.tolist()`` of a 0-dim one a 1-element list."""
    getitem, numpy, tolist = torch.Tensor.__getitem__, torch.Tensor.numpy, torch.Tensor.tolist

    def legacy_getitem(self, index):
        if type(index) is int and self.dim() <= 1 and not self.requires_grad:
            return getitem(self.reshape(-1), index).item()  # a 1-d tensor's element was a number
        return getitem(self, index)

    def legacy_numpy(self, *args, **kwargs):
        out = numpy(self, *args, **kwargs)
        return out.reshape(1) if self.dim() == 0 else out

    def legacy_tolist(self):
        out = tolist(self)
        return [out] if self.dim() == 0 else out

    torch.Tensor.__getitem__, torch.Tensor.numpy, torch.Tensor.tolist = legacy_getitem, legacy_numpy, legacy_tolist
    try:
        yield
    finally:
        torch.Tensor.__getitem__, torch.Tensor.numpy, torch.Tensor.tolist = getitem, numpy, tolist


def _run(source: str, legacy: bool = False):
    """(``result``, printed text) of running ``source``, or ``("raised", ExcType)``."""
    namespace = {"__name__": "program"}
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            if legacy:
                with torch03():
                    exec(compile(source, "program.py", "exec"), namespace)
            else:
                exec(compile(source, "program.py", "exec"), namespace)
    except Exception as exc:  # the exception type is what a user observes
        return "raised", type(exc).__name__
    return namespace.get("result"), out.getvalue()


SETUP = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.randn(4, 3)
    pred = torch.rand(4)
    target = torch.rand(4)
    w = torch.randn(3, requires_grad=True)
    """
)

# -- idiom 3: `.data[0]` on a scalar shown by the code -------------------------------------------
ZERO_DIM_PROGRAMS = {
    "torch_reductions": "result = [(torch.max(x) - torch.min(x)).data[0], (-torch.mean(x)).data[0], torch.sum(x).data[0]]\n",
    "dot_and_elementwise": "result = [torch.dot(x[0], x[1]).data[0], F.mse_loss(pred, target).exp().data[0]]\n",
    "shape_numbers": (
        "n, c = x.size()\nloss = F.mse_loss(pred, target) * x.size(0) / (n * c * x.shape[1])\nresult = loss.data[0]\n"
    ),
    "moved_criterion": "criterion = nn.MSELoss()\ncriterion = criterion.cpu()\nresult = criterion(pred, target).data[0]\n",
    "moved_constructor": 'bce = nn.BCELoss().to("cpu")\nresult = bce(pred, target).data[0]\n',
    "bound_functional": "loss_fn = F.smooth_l1_loss\nresult = loss_fn(pred, target).data[0]\n",
    "project_function": textwrap.dedent(
        """
        def norm(t, alpha):
            return (t.view(-1) ** alpha).sum()


        result = norm(x, 2).data[0]
        """
    ),
    "own_method": textwrap.dedent(
        """
        class Inversion:
            def total_variation(self, t):
                return torch.mean(torch.abs(t[:, 1:] - t[:, :-1]))

            def step(self, t):
                loss = F.mse_loss(pred, target) + 0.1 * self.total_variation(t)
                return [loss.data[0], self.total_variation(t).exp().data[0]]


        result = Inversion().step(x)
        """
    ),
}


@pytest.mark.parametrize("case", sorted(ZERO_DIM_PROGRAMS))
def test_zero_dim_evidence_rewrites_to_the_number_the_legacy_code_read(case: str) -> None:
    source = SETUP + ZERO_DIM_PROGRAMS[case]
    out = _rewrite(source)
    assert ".data[0]" not in out.text and ".item()" in out.text, out.text
    assert _run(source) == ("raised", "IndexError")  # PyTorch 2.x: 0-dim
    legacy, _ = _run(source, legacy=True)
    after, _ = _run(out.text)
    values = legacy if isinstance(legacy, list) else [legacy]
    assert len(values) >= 1 and all(type(v) is float for v in values)
    assert after == legacy  # the same Python floats, to the last bit


def test_an_item_of_a_row_picked_by_a_range_index_is_0_dim() -> None:
    """IBM seq2seq's ``TopKDecoder``: ``order`` is 2-dim (``view(b, k)`` of two sizes, then
    ``topk``), ``order[b_idx, :]`` a row (``b_idx`` from ``range``), its items 0-dim: ``k_idx.data[0]``
    raises since 0.4 and becomes ``k_idx.item()``, the index 0.3 read."""
    source = SETUP + textwrap.dedent(
        """
        def backtrack(scores, b, k):
            s, order = scores.view(b, k).topk(k)
            table = [[10 * r + c for c in range(k)] for r in range(b)]
            for b_idx in range(b):
                table[b_idx] = [table[b_idx][k_idx.data[0]] for k_idx in order[b_idx, :]]
            return table


        result = backtrack(torch.randn(12), 3, 4)
        """
    )
    out = _rewrite(source)
    assert "for k_idx in order[b_idx, :]]" in out.text and "table[b_idx][k_idx.item()]" in out.text, out.text
    assert _run(source) == ("raised", "IndexError")
    legacy, after = _run(source, legacy=True), _run(out.text)
    assert after == legacy and sorted(legacy[0][0]) == [0, 1, 2, 3]


def test_backward_at_module_level_and_through_arithmetic_shows_one_element() -> None:
    """``.backward()`` on a name at module level (a notebook, a script), and on a name built
    from another by arithmetic (``loss = raw_loss + reg``): the value may be a 1-element vector,
    whose ``.data[0]`` works on 2.x and gives a 0-dim tensor of the same number."""
    source = SETUP + textwrap.dedent(
        """
        def opaque(t):
            return (t * w).sum(1, keepdim=True)[:1].sum(0)


        raw_loss = opaque(x)
        loss = raw_loss + 0.01 * w.pow(2).sum()
        loss.backward()
        single = (x[0] * w).sum(0, keepdim=True)
        single.backward()
        score = w.view(1, 3) @ w.view(3, 1)
        score.backward()
        result = [raw_loss.data[0], single.data[0], score.data[0][0]]
        """
    )
    out = _rewrite(source)
    assert out.text.count(".item()") == 3 and ".data[0]" not in out.text, out.text
    today, _ = _run(source)
    legacy, _ = _run(source, legacy=True)
    after, _ = _run(out.text)
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in today)  # works today: 0-dim tensors
    assert all(type(v) is float for v in legacy + after)
    assert after == legacy == [float(v) for v in today]


# -- `.data.numpy()[0]` ---------------------------------------------------------------------------
NUMPY_FORMS = ["loss.data.numpy()[0]", "loss.data.cpu().numpy()[0]", "loss.cpu().data.numpy()[0]"]


@pytest.mark.parametrize("form", NUMPY_FORMS)
def test_numpy_index_of_a_zero_dim_loss_becomes_item(form: str) -> None:
    """Before: a numpy float32 in 0.3, ``IndexError`` on 2.x. After: the Python float of the
    same value. Formatted with a spec it prints the same; ``str`` shows more digits (float64's
    shortest repr of the float32 value), which only a crash showed on 2.x."""
    source = SETUP + f"loss = -torch.mean(x)\nresult = {form}\nprint('{{0:.2f}} %.4f'.format(result) % result)\n"
    out = _rewrite(source)
    assert "numpy()[0]" not in out.text and "result = loss.item()" in out.text, out.text
    assert _run(source) == ("raised", "IndexError")
    (legacy, legacy_text), (after, after_text) = _run(source, legacy=True), _run(out.text)
    assert type(legacy) is np.float32 and type(after) is float
    assert float(legacy) == after and legacy_text == after_text != ""
    assert str(legacy) != str(after)  # what changes, where a program prints the bare value


FORMATTED = textwrap.dedent(
    """
    class_loss = -(x[:1] * w).sum(1)
    class_loss.backward()
    print("Loss", "{0:.2f}".format(class_loss.data.numpy()[0]), "{}".format(class_loss.data.cpu().numpy()[0]))
    print("Loss %.4f %e %g after %d" % (class_loss.data.numpy()[0], class_loss.data.numpy()[0], class_loss.data.numpy()[0], 1))
    print(f"Loss {class_loss.data.numpy()[0]:.3f} {class_loss.data.numpy()[0]}")
    """
)


def test_numpy_index_of_one_element_only_formatted_prints_the_same() -> None:
    """Shown to have one element by ``.backward()`` only, the value may be a 1-element vector,
    on which ``.numpy()[0]`` works today: rewritten (safe) only where it is formatted, which
    gives the same text for a numpy float32 and the Python float of it."""
    source = SETUP + FORMATTED
    out = _rewrite(source)
    assert "numpy()[0]" not in out.text, out.text
    today, legacy, after = _run(source), _run(source, legacy=True), _run(out.text)
    assert today[1] != "" and today[1] == legacy[1] == after[1]


def test_numpy_index_of_one_element_printed_bare_is_an_unsafe_fix() -> None:
    source = SETUP + "single = (x[0] * w).sum(0, keepdim=True)\nsingle.backward()\nprint(single.data.numpy()[0])\n"
    assert _rewrite(source).text == source
    out = _rewrite(source, unsafe=True)
    assert "print(single.item())" in out.text
    (_, today), (_, after) = _run(source), _run(out.text)
    assert np.float32(today) == np.float32(after) and today != after  # the same number, shown with more digits


def test_numpy_number_used_further_is_left_for_review() -> None:
    source = SETUP + "loss = torch.mean(x)\nresult = loss.data.cpu().numpy()[0].mean()\n"
    out = _rewrite(source, unsafe=True)
    assert out.text == source
    assert [f.fixed for f in out.findings] == [False] and "`.mean`" in out.findings[0].message
    assert _run(source, legacy=True)[0] == pytest.approx(_run(source.replace(".data.cpu().numpy()[0].mean()", ".item()"))[0])
    assert _run(source.replace(".data.cpu().numpy()[0]", ".item()")) == ("raised", "AttributeError")  # why


# -- idiom 6: accumulated scalars -----------------------------------------------------------------
ACCUMULATED = textwrap.dedent(
    """
    import math

    criterion = nn.CrossEntropyLoss()
    batches = [(torch.randn(5, 7), torch.randint(0, 7, (5,))) for _ in range(12)]
    model = nn.Linear(7, 7)


    def evaluate():
        total_loss = 0
        for data, targets in batches:
            total_loss += len(data) * criterion(model(data), targets).data
        return total_loss[0] / len(batches)


    def train(log_interval=4):
        total_loss, shown = 0, []
        for batch, (data, targets) in enumerate(batches):
            raw_loss = criterion(model(data), targets)
            loss = raw_loss + 0.01 * model.weight.pow(2).sum()
            loss.backward()
            total_loss = total_loss + raw_loss.data
            if batch % log_interval == 0 and batch > 0:
                cur_loss = total_loss[0] / log_interval
                print("loss {:5.2f} | ppl {:8.2f}".format(cur_loss, math.exp(cur_loss)))
                shown.append(cur_loss)
                total_loss = 0
        return shown


    result = [evaluate(), *train()]
    print("%.4f" % result[0])
    """
)


def test_accumulated_scalar_sums_item_and_reads_the_sum() -> None:
    """Before: ``total`` a float32 tensor, ``total[0]`` its number (0.3), ``IndexError`` on 2.x
    (0-dim). After: a Python float summed in double precision: the same printed text, the same
    numbers up to float32 rounding."""
    source = SETUP + ACCUMULATED
    out = _rewrite(source)
    assert ".data" not in out.text.split("criterion = nn.CrossEntropyLoss()")[1] and "[0] /" not in out.text, out.text
    assert out.text.count(".item()") == 2
    assert _run(source) == ("raised", "IndexError")
    (legacy, legacy_text), (after, after_text) = _run(source, legacy=True), _run(out.text)
    assert len(legacy) == 3 and all(type(v) is float for v in legacy + after)
    assert after == pytest.approx(legacy, rel=1e-6) and legacy_text == after_text != ""
    fixes = [f for f in out.findings if f.fixed]
    assert len(fixes) == 2  # one fix per accumulated name, over both of its statements


@pytest.mark.parametrize("noqa_on", ["total_loss += len(data)", "return total_loss[0]"])
def test_noqa_on_either_statement_keeps_both(noqa_on: str) -> None:
    source = SETUP + ACCUMULATED
    lines = source.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if noqa_on in line)
    lines[at] = lines[at].rstrip("\n") + "  # noqa: TFD006\n"
    held = "".join(lines)
    out = _rewrite(held)
    evaluate = out.text.split("def evaluate():")[1].split("def train")[0]
    assert ".data" in evaluate and "total_loss[0]" in evaluate and ".item()" not in evaluate
    assert "total_loss + raw_loss.item()" in out.text  # the other name's fix is its own


def test_accumulated_value_not_shown_scalar_is_an_unsafe_fix() -> None:
    """A criterion given as a parameter may return a vector: then ``total[0]`` (its first
    element's sum) works today and ``.item()`` raises, so the fix waits for --unsafe-fixes."""
    body = textwrap.dedent(
        """
        def evaluate(criterion, batches):
            total = 0
            for p, t in batches:
                total += len(p) * criterion(p, t).data
            return total[0] / len(batches)


        """
    )
    source = SETUP + body
    assert _rewrite(source).text == source
    out = _rewrite(source, unsafe=True)
    assert "total += len(p) * criterion(p, t).item()" in out.text and "return total / len" in out.text
    scalar = "result = evaluate(F.mse_loss, [(pred, target)] * 3)\n"
    legacy, after = _run(source + scalar, legacy=True), _run(out.text + scalar)
    assert type(legacy[0]) is type(after[0]) is float and after[0] == pytest.approx(legacy[0], rel=1e-6)
    vector = "result = evaluate(lambda p, t: (p - t) ** 2, [(pred, target)] * 3)\n"
    today = _run(source + vector)[0]
    assert isinstance(today, torch.Tensor) and today.dim() == 0  # works today: the first elements' sum
    assert _run(out.text + vector) == ("raised", "RuntimeError")  # why the fix is unsafe


def test_accumulated_tensor_used_otherwise_is_left_for_review() -> None:
    source = SETUP + textwrap.dedent(
        """
        total = 0
        for _ in range(3):
            total += F.mse_loss(pred, target).data
        kept = total.clone()
        result = total[0]
        """
    )
    out = _rewrite(source, unsafe=True)
    assert out.text == source
    assert [f.fixed for f in out.findings] == [False] and "kept = total.clone()" in out.findings[0].message
    assert _run(source, legacy=True)[0] == pytest.approx(3 * _mse_of_setup(), rel=1e-6)


def _mse_of_setup() -> float:
    torch.manual_seed(0)
    torch.randn(4, 3)
    pred, target = torch.rand(4), torch.rand(4)
    return torch.nn.functional.mse_loss(pred, target).item()


# -- traps: what issue 21 item 7 keeps unchanged stays unchanged ------------------------------------
TRAPS = {
    "huber_none_by_position": 'result = nn.HuberLoss("none")(pred, target).data[0]\n',
    "functional_huber_none": 'result = F.huber_loss(pred, target, "none").data.numpy()[0]\n',
    "rows_of_numpy": "result = x.data.numpy()[0]\n",
    "vector_named_loss_with_backward_of_ones": "loss = x.sum(1)\nloss.backward(torch.ones(4)) if loss.requires_grad else None\nresult = loss.data[0]\n",
    "reassigned_after_reduction": "loss = x.sum()\nloss = x.sum(1)\nresult = loss.data[0]\n",
}


@pytest.mark.parametrize("case", sorted(TRAPS))
def test_non_scalars_stay(case: str) -> None:
    source = SETUP + TRAPS[case]
    out = _rewrite(source, unsafe=True)
    assert out.text == source
    today = _run(source)
    assert not (isinstance(today[0], str) and today[0] == "raised")  # real indexing, working today
    naive = source.replace(".data.numpy()[0]", ".item()").replace(".data[0]", ".item()")
    assert _run(naive)[0] == "raised"  # what a rewrite without evidence would have done


def test_every_site_is_decided_as_the_findings_say() -> None:
    """A site whose evidence is another site's ``.data[0]`` (``num_correct += correct.data[0]``)
    is decided the same on the original (whose findings the run reports) and on the tree a
    later pass sees, where that site reads ``correct.item()``: a line changes exactly where a
    finding says it is fixed."""
    source = SETUP + textwrap.dedent(
        """
        def accuracy(batches):
            running_acc = 0.0
            for pred, label in batches:
                num_correct = torch.sum(pred == label)
                running_acc += num_correct.data[0]
            num_correct = 0.0
            for pred, label in batches:
                correct = torch.sum(pred == label)
                num_correct += correct.data[0]
            return running_acc, num_correct


        result = accuracy([(torch.tensor([1, 2]), torch.tensor([1, 3]))] * 2)
        """
    )
    out = _rewrite(source)
    changed = {i + 1 for i, (a, b) in enumerate(zip(source.splitlines(), out.text.splitlines())) if a != b}
    fixed = {f.line for f in out.findings if f.fixed}
    assert changed == fixed == {source.splitlines().index("        running_acc += num_correct.data[0]") + 1,
                                source.splitlines().index("        num_correct += correct.data[0]") + 1}
    assert _run(out.text)[0] == _run(source, legacy=True)[0] == (2, 2)


PASSED = textwrap.dedent(
    """
    def validate(batches, criterion):
        return [criterion(p, t).data[0] for p, t in batches]


    def main():
        criterion = nn.MSELoss()
        return validate([(pred, target)] * 2, criterion)


    """
)


def test_loss_passed_to_a_parameter_by_every_call_is_an_unsafe_fix() -> None:
    """Every call in the file passes a loss: the rewrite gives the number the legacy code read.
    A call from elsewhere may pass a per-element loss, whose ``.data[0]`` works today and whose
    ``.item()`` raises: so the fix waits for --unsafe-fixes."""
    source = SETUP + PASSED + "result = main()\n"
    assert _rewrite(source).text == source
    out = _rewrite(source, unsafe=True)
    assert "criterion(p, t).item()" in out.text
    assert _run(source) == ("raised", "IndexError")
    legacy, after = _run(source, legacy=True)[0], _run(out.text)[0]
    assert len(after) == 2 and after == legacy and all(type(v) is float for v in after)
    elsewhere = "result = validate([(pred, target)], nn.MSELoss(reduction='none'))\n"
    today = _run(SETUP + PASSED + elsewhere)[0]
    assert isinstance(today[0], torch.Tensor)  # the first element, working today
    assert _run(out.text.replace("result = main()\n", elsewhere)) == ("raised", "RuntimeError")


def test_a_checkpoint_whose_saves_disagree_shows_nothing_of_what_it_loads() -> None:
    """``loss_data_index/checkpoint_other_names``: one save stores ``criterion`` where the load
    unpacks it, another a loss keeping every element; the loaded value is not shown to be a loss
    with a scalar reduction, so the accumulated ``.data`` waits for --unsafe-fixes, while the same
    file with one kind of save is fixed (``checkpoint_loss``)."""
    folder = Path(__file__).parent / "fixtures" / "loss_data_index"
    source = (folder / "checkpoint_other_names.unsafe.in.py").read_text(encoding="utf-8")
    assert _rewrite(source).text == source
    one_save = source.replace("            torch.save([model, scores], f)", "            torch.save([model, criterion], f)")
    assert "criterion(model(data), targets).item()" in _rewrite(one_save).text


def test_what_a_returned_function_gives_is_read_as_the_numbers_of_0_3() -> None:
    """``loss_data_index/closure_returned``, executed: ``main`` reads the 0-dim values that the
    functions ``trainer`` and ``make_step`` return give; the original raises on PyTorch 2.x, and
    the rewrite gives the numbers PyTorch 0.3 gave (read with :func:`torch03`)."""
    folder = Path(__file__).parent / "fixtures" / "loss_data_index"
    call = "\ntorch.manual_seed(0)\nresult = main()\n"
    before = (folder / "closure_returned.in.py").read_text(encoding="utf-8") + call
    after = (folder / "closure_returned.out.py").read_text(encoding="utf-8") + call
    assert _run(before) == ("raised", "IndexError")
    legacy, new = _run(before, legacy=True)[0], _run(after)[0]
    assert all(type(n) is float for n in new)
    assert new == pytest.approx([float(n) for n in legacy], rel=1e-6)


def test_a_part_of_what_an_instance_returns_is_read_as_the_number_of_0_3() -> None:
    """``loss_data_index/instance_call_parts``, executed: ``kld`` of ``mu, kld = model(x)`` is
    0-dim (its class's forward may return None for it, where both spellings raise alike); the
    original raises on PyTorch 2.x, the rewrite gives PyTorch 0.3's number, and ``mu.data[0]``,
    a row, is what it was."""
    folder = Path(__file__).parent / "fixtures" / "loss_data_index"
    call = "\ntorch.manual_seed(0)\nresult = main()\n"
    before = (folder / "instance_call_parts.in.py").read_text(encoding="utf-8") + call
    after = (folder / "instance_call_parts.out.py").read_text(encoding="utf-8") + call
    assert _run(before) == ("raised", "IndexError")
    (legacy_row, legacy_kld), (row, kld) = _run(before, legacy=True)[0], _run(after)[0]
    assert type(kld) is float and kld == pytest.approx(float(legacy_kld), rel=1e-6)
    assert torch.equal(row, legacy_row) and row.dim() == 1
    none_given = after.replace("mu, kld = model(x)", "mu, kld = model(x, z=1)")
    assert _run(none_given) == ("raised", "AttributeError") == _run(before.replace("mu, kld = model(x)", "mu, kld = model(x, z=1)"))


# -- `.data.tolist()[0]` and a sum rebound to its number --------------------------------------------
@pytest.mark.parametrize("form", ["loss.data.tolist()[0]", "loss.data.cpu().tolist()[0]"])
def test_tolist_index_of_a_zero_dim_loss_becomes_item(form: str) -> None:
    """Before: the Python float in 0.3 (a 1-element list's item), ``TypeError`` on 2.x (the
    number itself is not subscriptable). After: the same Python float."""
    source = SETUP + f"loss = F.mse_loss(pred, target)\nresult = [{form}]\nprint(result)\n"
    out = _rewrite(source)
    assert "tolist()" not in out.text and "result = [loss.item()]" in out.text, out.text
    assert _run(source) == ("raised", "TypeError")
    legacy, after = _run(source, legacy=True), _run(out.text)
    assert type(after[0][0]) is float and legacy == after and after[1] != ""


def test_tolist_index_of_one_element_is_an_unsafe_fix() -> None:
    """Shown one element by ``.backward()`` only: a (1, 1) tensor's ``.tolist()[0]`` is a list."""
    source = SETUP + "single = (x[:1] * w).sum(1, keepdim=True)\nsingle.backward()\nresult = single.data.tolist()[0]\n"
    assert _rewrite(source).text == source
    out = _rewrite(source, unsafe=True)
    assert "result = single.item()" in out.text
    assert type(_run(source)[0]) is list and type(_run(out.text)[0]) is float  # what the unsafe fix changes


REBOUND = textwrap.dedent(
    """
    criterion = nn.CrossEntropyLoss()
    batches = [(torch.randn(5, 7), torch.randint(0, 7, (5,))) for _ in range(6)]
    model = nn.Linear(7, 7)
    total_loss = 0
    for data, targets in batches:
        total_loss += data.size(0) * criterion(model(data), targets).data

    total_loss = total_loss[0] / len(batches)
    print("Test perplexity : %5.2f" % (torch.tensor(total_loss).exp()))
    result = total_loss
    """
)


def test_accumulated_sum_rebound_to_its_number_reads_the_same() -> None:
    """``total = total[0] / n`` after the loop: the same number under the name, before (0.3) and
    after the fix; the read after it, reached by that rebinding alone, prints the same."""
    source = SETUP + REBOUND
    out = _rewrite(source)
    assert "total_loss = total_loss / len(batches)" in out.text and ".item()" in out.text, out.text
    assert _run(source) == ("raised", "IndexError")
    (legacy, legacy_text), (after, after_text) = _run(source, legacy=True), _run(out.text)
    assert type(legacy) is float and type(after) is float
    assert after == pytest.approx(legacy, rel=1e-6) and legacy_text == after_text != ""
