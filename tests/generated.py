"""Small runnable legacy scripts for the differential generator (issue 21).

An example is data: a tuple of ``(kind, flag)`` pieces, ``flag`` the user's guard spelling
(``args.cuda`` or ``use_cuda``). :func:`build_script` turns it into one runnable script whose
flag comes from ``--no-cuda``. The hypothesis strategy (:func:`examples`) and the benchmark's
seeded drawer (:func:`draw_example`) pick from the same pieces.

Positive pieces are patterns the tool should fix; traps are code that looks like them but is not
(the tool must leave them or rewrite them without changing behaviour).
"""

from __future__ import annotations

import difflib
import random

from differential import compare, devices_seen, rewrite, run_sources

HEADER = '''import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
args.cuda = not args.no_cuda
use_cuda = args.cuda
__inputs__ = {}
'''

PIECES = {
    # -- positives ---------------------------------------------------------------------------
    "tensor_move": '''
t{i} = torch.arange(4.0)
if {flag}:
    t{i} = t{i}.cuda()
print("t{i}", t{i}.device, t{i}.shape)
''',
    "module_move": '''
m{i} = nn.Linear(3, 2)
if {flag}:
    m{i}.cuda()
print("m{i}", next(m{i}.parameters()).device)
''',
    "module_assign_move": '''
n{i} = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
if {flag}:
    n{i} = n{i}.cuda()
''',
    "layer_list": '''
class Stack{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(3, 3) for _ in range(2)]

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


__inputs__["Stack{i}"] = (torch.ones(2, 3),)
''',
    "factory_in_forward": '''
class Noise{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x) + torch.ones(x.size(0), 3).cuda()


__inputs__["Noise{i}"] = (torch.ones(2, 3),)
''',
    "loss_data": '''
crit{i} = nn.MSELoss()
loss{i} = crit{i}(torch.ones(3), torch.zeros(3))
print("loss{i}", loss{i}.data[0])
''',
    "variable": '''
v{i} = Variable(torch.ones(2), requires_grad=True)
print("v{i}", v{i}.requires_grad, v{i}.sum().item())
''',
    "torch_load": '''
torch.save(nn.Linear(2, 2).state_dict(), "sd{i}.pt")
sd{i} = torch.load("sd{i}.pt")
print("sd{i}", sorted(sd{i}))
''',
    "size_average": '''
l{i} = nn.MSELoss(size_average=False)(torch.ones(3), torch.zeros(3))
print("l{i}", l{i}.item())
''',
    "flag_ifexp": '''
x{i} = torch.ones(2)
y{i} = x{i}.cuda() if {flag} else x{i}
print("y{i}", y{i}.device, y{i} is x{i})
''',
    "tensor_alias": '''
T{i} = torch.cuda.FloatTensor if {flag} else torch.FloatTensor
a{i} = T{i}(3, 1).fill_(1.0)
b{i} = T{i}(np.ones(2))
c{i} = torch.arange(3).type(T{i})
print("alias{i}", a{i}.device, b{i}.dtype, c{i}.dtype, isinstance(a{i}, torch.cuda.FloatTensor))
''',
    "flag_parameter": '''
def run{i}(use_gpu):
    q = torch.zeros(2)
    if use_gpu:
        q = q.cuda()
    return q


q{i} = run{i}({flag})
print("q{i}", q{i}.device)
''',
    "flag_in_main": '''
def main{i}():
    opts = parser.parse_args()
    opts.cuda = not opts.no_cuda
    net = nn.Linear(2, 2)
    if opts.cuda:
        net.cuda()
    torch.save(nn.Linear(2, 2).state_dict(), "m{i}.pt")
    return net, torch.load("m{i}.pt")


net{i}, sdm{i} = main{i}()
print("sdm{i}", sorted(sdm{i}))
''',
    # -- traps --------------------------------------------------------------------------------
    "trap_flag_reassigned": '''
use_gpu_{i} = use_cuda
r{i} = torch.arange(3.0)
if use_gpu_{i}:
    r{i} = r{i}.cuda()
use_gpu_{i} = not use_gpu_{i}
print("r{i}", r{i}.device, use_gpu_{i})
''',
    "trap_guard_else": '''
e{i} = torch.arange(3.0)
if {flag}:
    e{i} = e{i}.cuda()
else:
    e{i} = e{i} * 2
print("e{i}", e{i}.device)
''',
    "trap_on_gpu_flag_off": '''
c{i} = torch.ones(2).cuda(0) if torch.cuda.is_available() else torch.ones(2)
if {flag}:
    c{i} = c{i}.cuda()
print("c{i}", c{i}.device)
del c{i}
''',
    "trap_gpu_index": '''
gpu_{i} = 0 if {flag} else -1
w{i} = nn.Linear(2, 2)
if gpu_{i} >= 0:
    w{i} = w{i}.cuda(gpu_{i})
print("w{i}", next(w{i}.parameters()).device)
del w{i}
''',
    "trap_own_cuda": '''
class Storage{i}:
    def __init__(self):
        self.x = torch.zeros(2)

    def cuda(self):
        self.x = self.x.cuda()


s{i} = Storage{i}()
if {flag}:
    s{i}.cuda()
print("s{i}", type(s{i}).__name__, s{i}.x.device)
''',
    "trap_loss_vector": '''
def first{i}(loss):
    return loss.data[0]


print("first{i}", first{i}(torch.arange(3.0)))
''',
    "trap_shadowed_variable": '''
def shadow{i}():
    Variable = lambda t, **kw: t * 2
    return Variable(torch.ones(2))


print("shadow{i}", shadow{i}())
''',
    "trap_load_positional": '''
torch.save(torch.ones(2), "p{i}.pt")
print("p{i}", torch.load("p{i}.pt", "cpu"))
''',
    "trap_guarded_dataparallel": '''
dp{i} = nn.Linear(2, 2)
if {flag}:
    dp{i} = nn.DataParallel(dp{i}).cuda()
print("dp{i}", sorted(dp{i}.state_dict()))
''',
}
POSITIVES = tuple(k for k in PIECES if not k.startswith("trap_"))
TRAPS = tuple(k for k in PIECES if k.startswith("trap_"))
FLAGS = ("args.cuda", "use_cuda")

KNOWN_ISSUE_21: dict[str, str] = {}
"""Trap kinds the tool gets wrong today (issue 21): excluded from the property test with
``exclude_known``, held by strict-xfail tests. Remove an entry when its fix lands."""

LEGS = (("cpu", ()), ("cpu", ("--no-cuda",)), ("gpu", ()), ("gpu", ("--no-cuda",)))
"""(leg, argv): the flag True and False, on a CPU machine and on one with a "GPU" (meta)."""


def kinds(exclude_known: bool = True) -> tuple[str, ...]:
    return tuple(k for k in PIECES if not (exclude_known and k in KNOWN_ISSUE_21))


def build_script(example) -> str:
    parts = [HEADER]
    for i, (kind, flag) in enumerate(example):
        parts.append(PIECES[kind].format(i=i, flag=flag))
    return "\n".join(parts)


def examples(exclude_known: bool = True):
    """The hypothesis strategy: 1 to 5 pieces."""
    from hypothesis import strategies as st

    piece = st.tuples(st.sampled_from(kinds(exclude_known)), st.sampled_from(FLAGS))
    return st.lists(piece, min_size=1, max_size=5).map(tuple)


def draw_example(rng: random.Random, exclude_known: bool = False):
    pool = kinds(exclude_known)
    return tuple((rng.choice(pool), rng.choice(FLAGS)) for _ in range(rng.randint(1, 5)))


def check_examples(batch) -> list[dict]:
    """Apply the tool to every example and execute all of them in one worker.

    One result per example: ``compiled``, ``idempotent``, ``differences`` (leg -> list) and
    ``flag_off_devices`` (devices seen with ``--no-cuda`` on the "GPU" machine, after)."""
    results, jobs, owners = [], [], []
    for index, example in enumerate(batch):
        before = build_script(example)
        result = {"example": example, "source": before, "compiled": False, "idempotent": False,
                  "differences": {}, "flag_off_devices": set()}
        results.append(result)
        try:
            output = transform(before)
            after = output.text
            compile(after, "<after>", "exec")
        except Exception as exc:  # noqa: BLE001 - reported as not compiled
            result["error"] = f"{type(exc).__name__}: {exc}"
            continue
        result["compiled"] = True
        result["after"] = after
        result["idempotent"] = rewrite(after) == after
        result["report"] = report_mismatches(before, after, output.findings)
        for leg, argv in LEGS:
            for source in (before, after):
                jobs.append({"source": source, "leg": leg, "argv": list(argv)})
                owners.append((index, f"{leg}{' '.join(('',) + argv)}"))
    records = run_sources(jobs) if jobs else []
    for k in range(0, len(records), 2):
        index, leg = owners[k]
        before, after = records[k], records[k + 1]
        diffs = compare(before, after)
        if diffs:
            results[index]["differences"][leg] = diffs
        if leg == "gpu --no-cuda":
            results[index]["flag_off_devices"] = devices_seen(before) | devices_seen(after)
    return results


def problems(result: dict) -> list[str]:
    """What is wrong with one checked example ([] when the rewrite is proven on it)."""
    out = []
    if not result["compiled"]:
        out.append(f"does not compile: {result.get('error')}")
        return out
    if not result["idempotent"]:
        out.append("second run changes the output")
    for leg, diffs in result["differences"].items():
        out.extend(f"[{leg}] {d}" for d in diffs)
    out.extend(result.get("report", ()))
    if result["flag_off_devices"] - {"cpu"}:
        out.append(f"--no-cuda but tensors on {sorted(result['flag_off_devices'] - {'cpu'})}")
    return out


def transform(text: str):
    from torchfix_device.codemods.catalog import all_codemods
    from torchfix_device.engine import transform_source

    return transform_source(text, all_codemods(), filename="example.py")


def changed_lines(before: str, after: str) -> set[int]:
    """Lines of ``before`` (1-based) that ``after`` replaces or deletes, indentation aside (a
    body put under ``with torch.no_grad():`` is not a change of its lines)."""
    matcher = difflib.SequenceMatcher(
        None, [line.strip() for line in before.splitlines()], [line.strip() for line in after.splitlines()], autojunk=False
    )
    return {line + 1 for tag, i1, i2, _, _ in matcher.get_opcodes() if tag in ("replace", "delete") for line in range(i1, i2)}


def report_mismatches(before: str, after: str, findings) -> list[str]:
    """Where the report and the written text disagree: a fix counted on a line the output left
    as it was, or a site reported for review on a line the output changed (no fix counted
    there). Issue 21 item 9: every fix a summary counts is in the output, and nothing else is.

    The first half holds for the generator's pieces, whose fixes change the line they are
    reported on; a fixture's fix may change another line of its statement (a keyword added on a
    line of its own, a loop put under ``with torch.no_grad():``), so the fixture-wide test
    checks the second half only (:func:`review_sites_changed`)."""
    changed = changed_lines(before, after)
    out = [f"report: {f.code} counted as fixed but line {f.line} is unchanged" for f in findings if f.fixed and f.line not in changed]
    return out + review_sites_changed(before, after, findings, changed)


def review_sites_changed(before: str, after: str, findings, changed: set[int] | None = None) -> list[str]:
    """Sites reported for review (not fixed) on a line the output changed, where no fix is
    counted on that line."""
    changed = changed_lines(before, after) if changed is None else changed
    fixed = {f.line for f in findings if f.fixed}
    return [f"report: {f.code} left for review but line {f.line} was changed" for f in findings
            if not f.fixed and f.line in changed and f.line not in fixed]
