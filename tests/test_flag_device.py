"""Issue 20 idioms 1 and 2, issue 21 item 1: the device comes from the user's own flag.

Every rewrite here is executed before and after (``tests/differential.py``): on a CPU machine
and on one where CUDA is available (``meta`` playing the GPU), each with the flag on and off
(``--no-cuda``). All executions of the file run in one worker process, started once.
"""

from __future__ import annotations

import textwrap
from functools import lru_cache

import pytest

from differential import compare, devices_seen, rewrite, run_sources
from generated import report_mismatches

from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source

pytestmark = pytest.mark.xdist_group("flag-device-runs")  # one batch of executions, run once (see pyproject.toml)

LEGS = (("cpu", ()), ("cpu", ("--no-cuda",)), ("gpu", ()), ("gpu", ("--no-cuda",)))

HEADER = '''
import argparse

import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
args.cuda = not args.no_cuda
'''

SOURCES = {
    # guards on the flag around values made on the CPU: they go, the moves take the flag's device
    "guards_go": HEADER + '''
model = nn.Linear(3, 2)
crit = nn.MSELoss()
t = torch.arange(3.0)
if args.cuda:
    model.cuda()
    crit.cuda()
    t = t.cuda()
u = torch.ones(3)
v = u.cuda() if args.cuda else u
out = model(t + v)
print(out.device, v is u)
''',
    # the flag is bound in main(); the load follows it
    "flag_in_main": HEADER + '''
def main():
    opt = parser.parse_args()
    opt.use_gpu = not opt.no_cuda
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    if opt.use_gpu:
        net = net.cuda()
    torch.save(nn.Linear(2, 2).state_dict(), "weights.pt")
    return net, torch.load("weights.pt")


net, state = main()
print(next(net.parameters()).device)
''',
    # a parameter flag
    "flag_parameter": HEADER + '''
def prepare(use_gpu):
    buffer = torch.zeros(2)
    if use_gpu:
        buffer = buffer.cuda()
    return buffer


kept = prepare(args.cuda)
print(kept.device)
''',
    # guards that must stay: a flag changed after the move, an else, a value on the GPU with the
    # flag off, a GPU index
    "guards_stay": HEADER + '''
use_gpu_1 = args.cuda
r = torch.arange(3.0)
if use_gpu_1:
    r = r.cuda()
use_gpu_1 = not use_gpu_1
e = torch.arange(3.0)
if args.cuda:
    e = e.cuda()
else:
    e = e * 2
c = torch.ones(2).cuda(0) if torch.cuda.is_available() else torch.ones(2)
if args.cuda:
    c = c.cuda()
print(r.device, e.device, c.device)
del c
gpu_2 = 0 if args.cuda else -1
w = nn.Linear(2, 2)
if gpu_2 >= 0:
    w = w.cuda(gpu_2)
print(next(w.parameters()).device)
del w
''',
    # unguarded moves after the flag is final follow it: with --no-cuda the script, which mixed
    # devices before (a device error), now runs on the CPU
    "unguarded_follows": HEADER + '''
model = nn.Linear(2, 2)
if args.cuda:
    model.cuda()
x = torch.ones(1, 2).cuda()
y = model(x)
''',
    # the checkpoint loads where the flag says (issue 21 #1)
    "load_follows": HEADER + '''
torch.save({"w": torch.ones(2)}, "ckpt.pt")
ckpt = torch.load("ckpt.pt")
''',
    # tensor-type aliases: sizes, NumPy data (memory shared as the legacy constructor did on the
    # CPU), lists, .type(), isinstance, requires_grad
    "aliases": HEADER + '''
Tensor = torch.cuda.FloatTensor if args.cuda else torch.FloatTensor
LongTensor = torch.cuda.LongTensor if args.cuda else torch.LongTensor
n = 3
ones = Tensor(n, 1).fill_(1.0)
shaped = Tensor(ones.shape[0], *(2,)).fill_(0.5)
arr = np.arange(4, dtype=np.float32)
shared = Tensor(arr)
arr[0] = 7.0
noise = Tensor(np.random.normal(0, 1, (2, 2)))
ids = LongTensor(np.random.randint(0, 5, n))
listed = Tensor([1.0, 2.0])
count = LongTensor(n).fill_(4)
converted = torch.arange(3).type(Tensor)
grad = Tensor(2, 2).fill_(1.0).requires_grad_()
print(isinstance(ones.data, torch.cuda.FloatTensor), isinstance(ids, torch.cuda.FloatTensor))
''',
    # .cuda(t.get_device()) follows t
    "get_device": HEADER + '''
anchor = torch.ones(2)
if args.cuda:
    anchor = anchor.cuda()
moved = torch.zeros(2).cuda(anchor.get_device()) if anchor.is_cuda else torch.zeros(2)
''',
    # the imports are not contiguous: the flag is final before `import torch`, and a function
    # imports torch itself; each binding goes after the import that binds `torch`
    "imports_apart": '''
import sys
sys.path.append("..")
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
args.cuda = not args.no_cuda
import torch
import torch.nn as nn

model = nn.Linear(2, 2)
if args.cuda:
    model.cuda()
torch.save({"w": torch.ones(2)}, "ckpt.pt")
ckpt = torch.load("ckpt.pt")


def prepare(use_gpu):
    import torch
    buffer = torch.zeros(2)
    if use_gpu:
        buffer = buffer.cuda()
    return buffer


kept = prepare(args.cuda)
''',
    # the user's own device from the flag is the one every site of that flag takes
    "users_binding": HEADER + '''
def run(x, use_cuda):
    device = torch.device("cuda" if use_cuda else "cpu")
    if use_cuda:
        x = x.cuda()
    torch.save({"w": torch.ones(2)}, "own.pt")
    return x, torch.load("own.pt")


kept, own = run(torch.ones(2), args.cuda and torch.cuda.is_available())
''',
    # found by the 10,000-example differential run (seed 20261125): a guard on a reassigned alias
    # of the flag stays, its move takes the default device, and the loads must not take that one
    "load_beside_default_device": HEADER + '''
use_cuda = args.cuda
torch.save(nn.Linear(2, 2).state_dict(), "early.pt")
early = torch.load("early.pt")

use_gpu_2 = use_cuda
r2 = torch.arange(3.0)
if use_gpu_2:
    r2 = r2.cuda()
use_gpu_2 = not use_gpu_2

torch.save(nn.Linear(2, 2).state_dict(), "late.pt")
late = torch.load("late.pt")
print(r2.device, sorted(early), sorted(late))
''',
}


@lru_cache(maxsize=1)
def _runs() -> dict[str, dict]:
    """Every source, rewritten, executed on every leg (one worker)."""
    jobs, owners, afters = [], [], {}
    for name, source in SOURCES.items():
        before = textwrap.dedent(source)
        after = rewrite(before)
        afters[name] = after
        for leg, argv in LEGS:
            for text in (before, after):
                jobs.append({"source": text, "leg": leg, "argv": list(argv)})
                owners.append((name, f"{leg}{' '.join(('',) + argv)}"))
    records = run_sources(jobs)
    found: dict[str, dict] = {name: {"after": afters[name], "legs": {}} for name in SOURCES}
    for k in range(0, len(records), 2):
        name, leg = owners[k]
        found[name]["legs"][leg] = (records[k], records[k + 1])
    return found


def _differences(name: str) -> dict[str, list[str]]:
    legs = _runs()[name]["legs"]
    for before, after in legs.values():
        assert before["error"] is None or before["device_error"], (name, before["error"], before["message"])
    return {leg: compare(before, after) for leg, (before, after) in legs.items() if compare(before, after)}


@pytest.mark.parametrize("name", ["guards_go", "flag_in_main", "flag_parameter", "guards_stay", "load_follows", "aliases", "get_device",
                                  "imports_apart", "users_binding", "load_beside_default_device"])
def test_rewrite_keeps_behaviour_with_the_flag_on_and_off(name: str) -> None:
    assert _differences(name) == {}
    legs = _runs()[name]["legs"]
    assert len(legs) == 4
    assert devices_seen(legs["gpu --no-cuda"][1]) <= {"cpu"}, "--no-cuda must keep everything on the CPU"


def test_guards_on_the_flag_go_where_values_are_on_the_cpu() -> None:
    after = _runs()["guards_go"]["after"]
    assert 'device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")' in after
    assert "if args.cuda:" not in after and "model.to(device)" in after and "v = u.to(device)" in after
    on_gpu = _runs()["guards_go"]["legs"]["gpu"][1]
    assert on_gpu["tensors"]["t"]["device"] == "meta" and on_gpu["modules"]["model"]["state"]["weight"]["device"] == "meta"


def test_guards_that_must_stay_stay() -> None:
    after = _runs()["guards_stay"]["after"]
    assert after.count("if use_gpu_1:") == 1 and after.count("if args.cuda:") == 2 and "if gpu_2 >= 0:" in after
    # the index moves, its guard (on the machine) stays; `gpu_2`, ordered against 0 by its guard,
    # moves to its own index and keeps the guard that chooses it
    assert 'c = torch.ones(2).to(torch.device("cuda", 0)) if torch.cuda.is_available() else torch.ones(2)' in after
    assert 'if gpu_2 >= 0:\n    w = w.to(torch.device("cuda", gpu_2))' in after


def test_flag_in_main_and_parameter_get_a_local_binding() -> None:
    main = _runs()["flag_in_main"]["after"]
    assert '    device = torch.device("cuda" if opt.use_gpu and torch.cuda.is_available() else "cpu")' in main
    assert 'torch.load("weights.pt", map_location=device)' in main and "if opt.use_gpu:" not in main
    prepare = _runs()["flag_parameter"]["after"]
    assert '    device = torch.device("cuda" if use_gpu and torch.cuda.is_available() else "cpu")' in prepare
    assert "if use_gpu:" not in prepare


def test_unguarded_move_after_the_flag_follows_it() -> None:
    """Before, ``--no-cuda`` on a GPU machine put ``x`` on the GPU and the model on the CPU (a
    device error); after, both stay on the CPU. With the flag on, nothing changes."""
    legs = _runs()["unguarded_follows"]["legs"]
    before, after = legs["gpu --no-cuda"]
    assert before["device_error"] and after["error"] is None
    assert devices_seen(after) == {"cpu"}
    assert all(compare(*legs[leg]) == [] for leg in ("cpu", "cpu --no-cuda", "gpu"))


def test_load_lands_where_the_flag_says() -> None:
    legs = _runs()["load_follows"]["legs"]
    assert 'torch.load("ckpt.pt", map_location=device)' in _runs()["load_follows"]["after"]
    assert {t["device"] for t in legs["gpu --no-cuda"][1]["loaded"].values()} == {"cpu"}
    assert {t["device"] for t in legs["gpu"][1]["loaded"].values()} == {"meta"}


def test_a_load_never_takes_the_default_device_where_a_flag_decides() -> None:
    """The guard on ``use_gpu_2`` stays and its move takes ``torch.cuda.is_available()``'s
    device; a ``torch.load`` of the same file took that line too (an earlier pass had inserted
    it) and loaded onto the GPU with ``--no-cuda``."""
    run = _runs()["load_beside_default_device"]
    assert "if use_gpu_2:" in run["after"] and "map_location=torch_device" not in run["after"]
    assert {t["device"] for t in run["legs"]["gpu --no-cuda"][1]["loaded"].values()} == {"cpu"}


def test_a_load_reported_for_review_is_left_as_it_was() -> None:
    """The report and the text agree: the load before the flag is final is reported for review
    and left unchanged; the one after it is fixed with the flag's device. (The scan of the tree
    an earlier codemod had rewritten lost the kept guard, read the flag as final, and rewrote
    the load it had reported.)"""
    source = textwrap.dedent(SOURCES["load_beside_default_device"])
    output = transform_source(source, all_codemods(), filename="x.py")
    assert 'early = torch.load("early.pt")\n' in output.text
    assert 'late = torch.load("late.pt", map_location=device)' in output.text
    loads = sorted((f.line, f.fixed) for f in output.findings if f.code == "TFD005")
    assert [fixed for _, fixed in loads] == [False, True]
    assert source.splitlines()[loads[0][0] - 1] == 'early = torch.load("early.pt")'
    assert report_mismatches(source, output.text, output.findings) == []


def test_aliases_are_rewritten_and_compared_on_values() -> None:
    after = _runs()["aliases"]["after"]
    assert "Tensor =" not in after and "torch.cuda.FloatTensor" not in after and "torch.cuda.LongTensor" not in after
    before, rewritten = _runs()["aliases"]["legs"]["cpu --no-cuda"]
    compared = [n for n in ("ones", "shaped", "shared", "noise", "ids", "listed", "count", "converted", "grad")
                if "values" in before["tensors"][n]]
    assert len(compared) == 9 and before["tensors"]["shared"]["values"][0] == 7.0
    assert before["tensors"]["grad"]["requires_grad"] and rewritten["tensors"]["grad"]["requires_grad"]
    assert before["stdout"] == rewritten["stdout"] == "False False\n"
    assert _runs()["aliases"]["legs"]["gpu"][1]["stdout"] == "True False\n"


def test_get_device_becomes_the_tensors_device() -> None:
    after = _runs()["get_device"]["after"]
    assert "torch.zeros(2).to(anchor.device)" in after
    assert _runs()["get_device"]["legs"]["gpu"][1]["tensors"]["moved"]["device"] == "meta"


def test_flag_bindings_go_after_the_import_of_torch() -> None:
    """``import sys`` / ``sys.path.append(..)`` / the flag / ``import torch``: the module's
    binding follows ``import torch`` (before it, the file raised NameError), a function's
    follows its own ``import torch`` (before it, UnboundLocalError); a later codemod (TFD005)
    reads the binding TFD001 left as the flag's device, not the default one."""
    after = _runs()["imports_apart"]["after"]
    binding = 'device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")\n'
    assert "import torch\n" + binding in after
    local = '    device = torch.device("cuda" if use_gpu and torch.cuda.is_available() else "cpu")\n'
    assert "    import torch\n" + local in after
    assert 'torch.load("ckpt.pt", map_location=device)' in after and "torch_device" not in after
    for leg, (before, rewritten) in _runs()["imports_apart"]["legs"].items():
        assert before["error"] is None and rewritten["error"] is None, (leg, rewritten["message"])
    assert {t["device"] for t in _runs()["imports_apart"]["legs"]["gpu --no-cuda"][1]["loaded"].values()} == {"cpu"}


def test_the_users_own_flag_device_is_taken() -> None:
    """``device = torch.device("cuda" if use_cuda else "cpu")`` written by the user serves the
    sites that follow ``use_cuda``: no second binding beside it."""
    after = _runs()["users_binding"]["after"]
    assert "x = x.to(device)" in after and 'torch.load("own.pt", map_location=device)' in after
    assert after.count("torch.device(") == 1


def test_check_and_apply_name_the_same_device() -> None:
    """The findings (read on the original file, one codemod at a time) and the rewrite (all of
    them in turn) name the same binding: a function's flag is its own, not the module's."""
    source = HEADER + textwrap.dedent('''
    def main():
        opts = parser.parse_args()
        opts.gpu = not opts.no_cuda
        x = torch.zeros(3)
        if opts.gpu:
            x = x.cuda()
        return torch.load("p.pt")


    model = nn.Linear(2, 2)
    if args.cuda:
        model.cuda()
    ''')
    output = transform_source(source, all_codemods())
    load = next(f for f in output.findings if f.code == "TFD005")
    name = load.message.rsplit("map_location=", 1)[1].rstrip("`")
    assert f'return torch.load("p.pt", map_location={name})' in output.text
    assert f'    {name} = torch.device("cuda" if opts.gpu and torch.cuda.is_available() else "cpu")' in output.text
    assert 'device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")\n' in output.text


# -- which flag, from which statement on, or why none (the analysis alone, nothing executed) -----
def _flags(source: str) -> dict[str, tuple[str | None, str | None]]:
    """Scope name → (the device's test, the reason it cannot be used), for every scope with a flag."""
    import libcst as cst

    from torchfix_device.devices.flag_device import FlagAnalysis

    module = cst.parse_module(textwrap.dedent(source))
    found = FlagAnalysis(module, lambda node: False)
    return {
        (flag.scope.name.value if isinstance(flag.scope, cst.FunctionDef) else "<module>"): (flag.condition, flag.reason)
        for flag in found.by_scope.values()
    }


@pytest.mark.parametrize("source, expected", [
    pytest.param('''
        args = parser.parse_args()
        args.cuda = not args.no_cuda and torch.cuda.is_available()
        if args.cuda:
            model.cuda()
        ''', {"<module>": ("args.cuda", None)}, id="final"),
    pytest.param('''
        use_cuda = torch.cuda.is_available()
        if use_cuda:
            model.cuda()
        use_cuda = False
        ''', {"<module>": ("use_cuda", None)}, id="final-after-the-last-assignment"),
    pytest.param('''
        args = parser.parse_args()
        def setup():
            args.cuda = False
        if args.cuda:
            model.cuda()
        ''', {"<module>": ("args.cuda", "`args.cuda` is changed in `setup()`")}, id="changed-in-a-function"),
    pytest.param('''
        if ready:
            use_gpu = True
        if use_gpu:
            model.cuda()
        ''', {"<module>": ("use_gpu", "`use_gpu` is not bound on every path before it is tested")}, id="conditional"),
    pytest.param('''
        from config import cfg
        if cfg.CUDA:
            model.cuda()
        ''', {"<module>": ("cfg.CUDA", "`cfg` is imported: other modules may change `cfg.CUDA`")}, id="imported"),
    pytest.param('''
        opt = Config()
        def train():
            opt.parse(kwargs)
            if opt.use_gpu:
                model.cuda()
        ''', {"<module>": ("opt.use_gpu", "`opt.use_gpu` is changed in `train()`")}, id="method-call-elsewhere"),
    pytest.param('''
        args = parser.parse_args()
        if args.cuda:
            model.cuda()
        if use_gpu:
            x = x.cuda()
        use_gpu = True
        ''', {"<module>": ("args.cuda", "the guards here test different flags (`args.cuda`, `use_gpu`)")}, id="two-flags"),
    pytest.param('''
        args = parser.parse_args()
        if args.gpu >= 0:
            model = model.cuda(args.gpu)
        ''', {}, id="gpu-index"),
    pytest.param('''
        args = parser.parse_args()
        if args.multi_gpu:
            model = nn.DataParallel(model).cuda()
        ''', {}, id="not-a-device-flag"),
    pytest.param('''
        def main():
            opt = parser.parse_args()
            for k, v in kwargs.items():
                setattr(opt, k, v)
            if opt.use_gpu:
                model.cuda()
        def helper(x, use_cuda):
            return x.cuda() if use_cuda else x
        ''', {"main": ("opt.use_gpu", None), "helper": ("use_cuda", None)}, id="local-and-parameter"),
    pytest.param('''
        args = parser.parse_args()
        use_cuda = args.cuda
        if args.cuda > 0:
            model.cuda()
        ''', {"<module>": ("args.cuda > 0", None)}, id="compared"),
    pytest.param('''
        args = parser.parse_args()
        use_cuda = args.cuda
        if use_cuda:
            model.cuda()
        if args.cuda:
            x = x.cuda()
        ''', {"<module>": ("args.cuda", None)}, id="alias"),
    pytest.param('''
        args = parser.parse_args()
        use_cuda = args.cuda
        args.cuda = False
        if use_cuda:
            model.cuda()
        if args.cuda:
            x = x.cuda()
        ''', {"<module>": ("args.cuda", "`args.cuda` changes after `use_cuda = args.cuda`")}, id="alias-of-a-changing-flag"),
])
def test_which_flag_and_why_not(source: str, expected: dict) -> None:
    assert _flags(source) == expected


def test_the_binding_follows_the_flag_into_the_main_block_and_skips_early_functions() -> None:
    import libcst as cst

    from torchfix_device.devices.flag_device import FlagAnalysis

    module = cst.parse_module(textwrap.dedent('''
        def parse():
            return torch.load("defaults.pt")

        def train():
            return torch.load("ckpt.pt")

        if __name__ == "__main__":
            args = parse()
            if args.cuda:
                model.cuda()
            train()
        '''))
    flag = FlagAnalysis(module, lambda node: False).by_scope[id(module)]
    assert flag.usable and isinstance(flag.block, cst.If) and flag.after == 0
    parse, train = (cst.ensure_type(f, cst.FunctionDef).body.body[0] for f in module.body[:2])
    assert id(parse) in flag.before  # parse() runs before the flag exists: its load cannot follow it
    assert id(train) not in flag.before
