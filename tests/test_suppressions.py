"""Suppressions through the console script: ``# noqa: TFD001``, bare ``# noqa``,
``# torchfix-device: skip-file``, and ``check --show-unused-suppressions``.

A suppressed finding is neither reported nor rewritten, while the other lines of the same file
are fixed."""

from __future__ import annotations

import io
import shutil
import tokenize
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli

MIXED = """\
import torch

model = torch.load("m.pt").cuda()  # noqa: TFD001
x = torch.zeros(3).cuda()
y = torch.ones(3).cuda()  # noqa
z = torch.ones(3).cuda()  # noqa: E501
w = torch.ones(3).cuda()  # type: ignore  # NOQA:TFD005,TFD001
s = "# noqa"; v = torch.ones(3).cuda()
"""


def _lines(out) -> list[str]:
    return out.stdout.decode().splitlines()


def test_suppressed_line_is_neither_reported_nor_rewritten(tmp_path: Path) -> None:
    (tmp_path / "mixed.py").write_text(MIXED)
    check = run_cli("check", "mixed.py", cwd=tmp_path)
    assert check.returncode == 1
    reported = {(line.split(":")[1], line.split()[1]) for line in _lines(check)}
    # line 3: TFD001 suppressed, TFD005 not; 5 and 7: suppressed; 6: another tool's code;
    # 8: "# noqa" inside a string is no comment
    assert reported == {("3", "TFD005"), ("4", "TFD001"), ("6", "TFD001"), ("8", "TFD001")}
    assert "suppressed by noqa: 3" in check.stderr.decode()

    applied = run_cli("apply", "mixed.py", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr.decode()
    new = (tmp_path / "mixed.py").read_text().splitlines()
    old = MIXED.splitlines()
    assert new[:4] == ["import torch", "", 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', ""]
    body = new[4:]
    assert body[0] == 'model = torch.load("m.pt", map_location=device).cuda()  # noqa: TFD001'
    assert body[1] == "x = torch.zeros(3).to(device)"
    assert body[2] == old[4] and body[4] == old[6]  # suppressed lines byte for byte
    assert body[3] == "z = torch.ones(3).to(device)  # noqa: E501"
    assert body[5] == 's = "# noqa"; v = torch.ones(3).to(device)'
    # a second run has nothing left to do and still reports nothing for the suppressed lines
    again = run_cli("check", "mixed.py", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == b""


def test_noqa_at_the_end_of_a_multiline_statement_covers_it(tmp_path: Path) -> None:
    source = "import torch\n\nstate = torch.load(\n    'ckpt.pt',\n)  # noqa: TFD005\n"
    (tmp_path / "m.py").write_text(source)
    out = run_cli("apply", "m.py", cwd=tmp_path)
    assert out.returncode == 0
    assert (tmp_path / "m.py").read_text() == source


def test_skip_file_leaves_the_file_byte_identical(tmp_path: Path) -> None:
    source = b"# torchfix-device: skip-file\r\nimport torch\r\nx = torch.load('a').cuda()\r\n"
    (tmp_path / "skip.py").write_bytes(source)
    (tmp_path / "other.py").write_text("import torch\nx = torch.load('a')\n")
    check = run_cli("check", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in _lines(check)] == ["other.py"]
    assert "1 skipped (1 skip-file)" in check.stderr.decode()
    applied = run_cli("apply", ".", cwd=tmp_path)
    assert applied.returncode == 0
    assert (tmp_path / "skip.py").read_bytes() == source
    assert "map_location=device" in (tmp_path / "other.py").read_text()


def test_skip_file_inside_a_string_does_not_skip(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("import torch\nDOC = '# torchfix-device: skip-file'\nx = torch.load('a')\n")
    assert [line.split()[1] for line in _lines(run_cli("check", "s.py", cwd=tmp_path))] == ["TFD005"]


def test_show_unused_suppressions(tmp_path: Path) -> None:
    (tmp_path / "u.py").write_text(
        "import torch\n"
        "x = torch.zeros(3).cuda()  # noqa: TFD001\n"          # used
        "y = torch.zeros(3)  # noqa: TFD005\n"                 # unused
        "z = torch.zeros(3)  # noqa: TFD999, E501\n"           # unknown code; E501 is not ours
        "q = torch.zeros(3)  # noqa\n"                         # bare: flake8's too, never listed
    )
    (tmp_path / "useless_skip.py").write_text("# torchfix-device: skip-file\nimport os\n")
    (tmp_path / "useful_skip.py").write_text("# torchfix-device: skip-file\nimport torch\nx = torch.load('a')\n")
    plain = run_cli("check", ".", cwd=tmp_path)
    assert plain.returncode == 0 and plain.stdout == b""
    out = run_cli("check", "--show-unused-suppressions", ".", cwd=tmp_path)
    assert out.returncode == 1
    assert _lines(out) == [
        "u.py:3:21: unused suppression `noqa: TFD005`: no TFD005 finding on this line",
        "u.py:4:21: unused suppression `noqa: TFD999`: unknown code TFD999",
        "useless_skip.py:1:1: unused suppression `torchfix-device: skip-file`: nothing in this file to skip",
    ]
    # with only another codemod selected, TFD005 cannot be judged
    narrowed = run_cli("check", "--show-unused-suppressions", "--select", "TFD001", "u.py", cwd=tmp_path)
    assert [line.split("`")[1] for line in _lines(narrowed)] == ["noqa: TFD999"]


def _appendable_lines(source: str) -> set[int]:
    """Lines a trailing comment can be added to (ended by a NEWLINE or NL token: not inside a
    string, not continued by a backslash)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0] for t in tokens if t.type in (tokenize.NEWLINE, tokenize.NL)}


def _with_noqa(source: str, lines: set[int]) -> str:
    out = []
    for number, line in enumerate(source.splitlines(keepends=True), 1):
        if number in lines:
            body = line.rstrip("\r\n")
            line = body + "  # noqa" + line[len(body):]
        out.append(line)
    return "".join(out)


def test_every_codemod_declines_every_suppressed_fix(tmp_path: Path) -> None:
    """Each ``.in.py`` fixture, with ``# noqa`` on every line that has a finding, comes out of
    ``apply`` byte-identical and gives no finding: no codemod rewrites a suppressed place."""
    originals = tmp_path / "originals"
    originals.mkdir()
    for fixture in sorted(FIXTURES.glob("*/*.in.py")):
        shutil.copy(fixture, originals / f"{fixture.parent.name}__{fixture.name[:-6]}.py")
    check = run_cli("check", "--unsafe-fixes", ".", cwd=originals)
    finding_lines: dict[str, set[int]] = {}
    for line in _lines(check):
        name, number = line.split(":")[:2]
        finding_lines.setdefault(name, set()).add(int(number))
    suppressed = tmp_path / "suppressed"
    suppressed.mkdir()
    for name, lines in finding_lines.items():
        source = (originals / name).read_text()
        if lines <= _appendable_lines(source):
            (suppressed / name).write_text(_with_noqa(source, lines))
    covered = sorted(p.name for p in suppressed.iterdir())
    assert len(covered) >= 0.8 * len(finding_lines), f"only {len(covered)} of {len(finding_lines)} fixtures usable"
    assert {name.split("__")[0] for name in covered} >= {p.name for p in FIXTURES.iterdir() if p.is_dir() and any(p.glob("*.in.py"))}
    before = {p.name: p.read_bytes() for p in suppressed.iterdir()}
    # a suppressed token fix (TFD016's `async=`, TFD020's print statement) leaves its file
    # unparseable: refused, saying so
    refused = sorted(name for name in covered if name.startswith(("async_keyword_argument__", "print_statement__")))
    assert refused
    out = run_cli("apply", "--unsafe-fixes", ".", cwd=suppressed)
    assert out.returncode == (1 if refused else 0), out.stderr.decode()
    assert _refused_for_noqa(out) == refused, out.stderr.decode()
    changed = [name for name, data in before.items() if (suppressed / name).read_bytes() != data]
    assert changed == []
    recheck = run_cli("check", "--unsafe-fixes", ".", cwd=suppressed)
    assert recheck.stdout == b"" and recheck.returncode == (1 if refused else 0)
    assert _refused_for_noqa(recheck) == refused


def _refused_for_noqa(out) -> list[str]:
    """The files a run refused, each of them only because a `# noqa` kept the syntax that a
    token fix would have made parseable."""
    failed = [line for line in out.stderr.decode().splitlines() if line.startswith("failed: ")]
    assert all("would fix it, suppressed by `# noqa` here" in line for line in failed), failed
    return sorted(line.split()[1].split(":")[0] for line in failed)


def test_a_suppressed_use_keeps_the_rewrites_it_depends_on_consistent(tmp_path: Path) -> None:
    """Rewrites that are only right together stay together: the ``from torch.cuda.amp``
    import moves only if every call moves; a guard on a user flag is dropped everywhere or
    nowhere."""
    amp = (
        "from torch.cuda.amp import autocast\n\n"
        "def f(m, x):\n"
        "    with autocast():  # noqa: TFD011\n"
        "        a = m(x)\n"
        "    with autocast():\n"
        "        b = m(x)\n"
        "    return a, b\n"
    )
    guards = (
        "import torch\n\n"
        "def train(model, x, args):\n"
        "    if args.cuda:\n"
        "        model.cuda()  # noqa: TFD001, TFD002\n"
        "    if args.cuda:\n"
        "        x = x.cuda()\n"
        "    return model(x)\n"
    )
    (tmp_path / "amp.py").write_text(amp)
    (tmp_path / "guards.py").write_text(guards)
    out = run_cli("apply", ".", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert (tmp_path / "amp.py").read_text() == amp  # the other call is left for manual review
    assert "manual review: amp.py:6:10 TFD011" in out.stderr.decode()
    rewritten = (tmp_path / "guards.py").read_text()
    assert "        model.cuda()  # noqa: TFD001, TFD002\n" in rewritten
    assert rewritten.count("if args.cuda:") == 2 and "x = x.to(device)" in rewritten


def test_only_a_noqa_that_can_suppress_a_code_makes_positions_matter() -> None:
    from torchfix_device.syntax.suppressions import parse_suppressions

    foreign = parse_suppressions("import os  # noqa: F401\nx = 1  # noqa: E501, W291\n")
    assert foreign.noqa and not foreign.may_suppress("TFD001")
    ours = parse_suppressions("x = 1  # noqa: TFD003\n")
    assert ours.may_suppress("TFD003") and not ours.may_suppress("TFD001")
    assert parse_suppressions("x = 1  # noqa\n").may_suppress("TFD001")


def test_another_tools_noqa_costs_no_position_analysis(monkeypatch) -> None:
    """``# noqa: F401`` cannot suppress a TFD finding: a file holding one is analysed exactly
    like the same file without it (no positions of rewritten trees just to read the comment's
    line), and gets the same findings and rewrite."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from torchfix_device.codemods.catalog import all_codemods
    from torchfix_device.engine import transform_unfiltered

    code = (
        "import os  # noqa: F401\nimport torch\n\nloss_fn = torch.nn.MSELoss(size_average=False)\n"
        "loss = loss_fn(torch.ones(2), torch.zeros(2))\nprint(loss.data[0])  # noqa: E501\n"
    )
    resolved: list[str] = []
    real = MetadataWrapper.resolve

    def spy(self, provider):
        if provider is PositionProvider:
            resolved.append(self.module.code.replace("  # noqa: F401", "").replace("  # noqa: E501", ""))
        return real(self, provider)

    monkeypatch.setattr(MetadataWrapper, "resolve", spy)
    with_noqa = transform_unfiltered(code, all_codemods())
    seen_with_noqa, resolved[:] = list(resolved), []
    without = transform_unfiltered(code.replace("  # noqa: F401", "").replace("  # noqa: E501", ""), all_codemods())
    assert seen_with_noqa == resolved
    assert with_noqa.findings == without.findings and len(with_noqa.findings) == 2
    assert with_noqa.text.replace("  # noqa: F401", "").replace("  # noqa: E501", "") == without.text


def test_the_cheap_noqa_test_passes_every_file_whose_comments_can_suppress_a_finding() -> None:
    """``may_hold_our_noqa`` lets the engine skip tokenizing files whose ``noqa`` comments all
    belong to other tools; it must never say no where a comment can suppress one of ours."""
    from torchfix_device.syntax.suppressions import may_hold_our_noqa, parse_suppressions

    cases = [
        MIXED,
        "import os  # noqa: F401\n",
        "x = 1  # NoQA\n",
        "x = 1  # noqa:\nF401 = 2\n",  # a colon with no codes is a bare noqa
        "x = 1  # noqa:E501,tfd003\n",
        "x = '# noqa: F401'  # noqa\n",
        "x = 1  # noqa: E501\r\ny = 2  # noqa\r\n",
        "x = (1,\n     2)  # noqa: TFD001\n",
        "s = '''\n# noqa\n'''\n",  # only inside a string: may say yes, the tokenizer then finds none
        "import os\n",
    ]
    for path in sorted(FIXTURES.rglob("*.py")):
        cases.append(path.read_text(encoding="utf-8"))
    codes = [f"TFD{n:03d}" for n in range(1, 16)]
    for text in cases:
        can = any(parse_suppressions(text).may_suppress(code) for code in codes)
        assert may_hold_our_noqa(text) or not can, text
    assert not may_hold_our_noqa("import os  # noqa: F401\nx = 1  # noqa: E501, W291\n")
    assert may_hold_our_noqa("x = 1  # noqa:\nF401 = 2\n") and may_hold_our_noqa("x = 1  # NoQA\n")


ALIAS_SOURCE = (
    "import torch\n"
    "cuda = torch.cuda.is_available()\n"
    "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
    "a = Tensor(2, 3){first}\n"
    "b = Tensor(4){second}\n"
    "print(a.shape, b.shape)\n"
)


@pytest.mark.parametrize(("first", "second", "reported"), [
    ("  # noqa: TFD008", "  # noqa: TFD008", False),  # every read suppressed: nothing held back, silent
    ("  # noqa: TFD008", "", True),  # `b`'s fix is held back by `a`'s noqa: said on the alias line
])
def test_an_alias_kept_by_a_suppressed_read_is_reported_only_when_it_holds_back_a_fix(tmp_path: Path, first, second, reported) -> None:
    source = ALIAS_SOURCE.format(first=first, second=second)
    (tmp_path / "m.py").write_text(source)
    out = run_cli("check", "--unsafe-fixes", "m.py", cwd=tmp_path)
    lines = out.stdout.decode().splitlines()
    on_alias = [line for line in lines if line.startswith("m.py:3:")]
    assert bool(on_alias) == reported, lines
    if reported:
        assert "stays because one of its reads is suppressed" in on_alias[0]
    assert not any(line.startswith(("m.py:4:", "m.py:5:")) for line in lines), lines
    assert run_cli("apply", "--unsafe-fixes", "m.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "m.py").read_text() == source
