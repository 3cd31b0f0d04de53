"""TFD020: Python 2 print statements, fixed on tokens so that a Python 2 file can be migrated.

A file CPython cannot parse only because of ``print x`` is given ``print(x)`` by the token pass
(like TFD016's ``async=``); its other bytes stay, the file is then migrated as usual, and both
halves of a fix (``print(`` and the closing parenthesis) are made together or not at all.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES, run_cli, run_script
from torchfix_device.cli.interactive import rewrite_with
from torchfix_device.codemods.catalog import all_codemods, lookup
from torchfix_device.codemods.print_statement import PrintStatement
from torchfix_device.engine import parse_error_message, transform_source
from torchfix_device.options import RunOptions

pytest.importorskip("torch")

HERE = FIXTURES / "print_statement"
TFD020 = lookup("TFD020")

LEGACY = """\
import torch
from torch.autograd import Variable

net = torch.nn.Linear(3, 1).cuda()
print net
for it in range(2):
    x = Variable(torch.ones(2, 3)).cuda()
    loss = net(x).sum()
    print 'iteration', it, 'loss', loss.data[0]
"""


def _run(text: str, tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    done = run_script(str(path), cwd=Path.cwd())
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_fixed_training_log_prints_what_python_2_printed(tmp_path: Path) -> None:
    """The fixture's `.out.py` is written by hand; the tool's output of `.in.py` runs and prints
    the same, in the form Python 2's print statement gave (values separated by one space)."""
    fixed = transform_source((HERE / "training_log.in.py").read_text(encoding="utf-8"), all_codemods()).text
    printed = _run(fixed, tmp_path, "fixed.py")
    assert printed == _run((HERE / "training_log.out.py").read_text(encoding="utf-8"), tmp_path, "by_hand.py")
    lines = printed.splitlines()
    assert lines[0].startswith("Linear(in_features=3, out_features=1")
    assert [line.split(" loss ")[0] for line in lines[1:3]] == ["iteration 0", "iteration 1"]
    assert lines[3:] == ["last one", "", "spaced (1, 2)", lines[6], ""] and lines[6].startswith("{'loss': ")


def test_a_python_2_script_is_then_migrated_as_usual_and_runs(tmp_path: Path) -> None:
    out = transform_source(LEGACY, all_codemods())
    assert "print(net)" in out.text and "print('iteration', it, 'loss', loss.item())" in out.text
    assert ".to(device)" in out.text and "Variable" not in out.text
    assert transform_source(out.text, all_codemods()).text == out.text  # a second run changes nothing
    printed = _run(out.text, tmp_path, "migrated.py").splitlines()
    assert printed[1].startswith("iteration 0 loss ") and printed[2].startswith("iteration 1 loss ")
    codes = sorted(f.code for f in out.findings)
    assert codes.count("TFD020") == 2  # one finding per statement, not one per parenthesis


def test_findings_keep_their_columns_in_the_file_as_it_was() -> None:
    text = "import torch\nx = torch.ones(1)\nprint  x.cuda(), x.cuda()\n"
    out = transform_source(text, all_codemods())
    assert out.text == 'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nx = torch.ones(1)\nprint(x.to(device), x.to(device))\n'
    line = text.splitlines()[2]
    columns = sorted((f.code, f.column) for f in out.findings if f.line == 3)
    assert columns == [("TFD001", line.index("x.cuda") + 1), ("TFD001", line.rindex("x.cuda") + 1), ("TFD020", 1)]


@pytest.mark.parametrize("text, fixed", [
    ("print\n", "print()\n"),
    ("print x\n", "print(x)\n"),
    ("print   x ,  y\n", "print(x ,  y)\n"),
    ("if x: print 'a'; print\n", "if x: print('a'); print()\n"),
    ("print {\n  'a': 1,\n}  # done\n", "print({\n  'a': 1,\n})  # done\n"),
    ("print '%d' % n, f(a, b)[0]\n", "print('%d' % n, f(a, b)[0])\n"),
    ("print -x\n", "print(-x)\n"),
    ("print x if y else z\n", "print(x if y else z)\n"),
    ("for i in r:\n\tprint i\r\n", "for i in r:\n\tprint(i)\r\n"),
    ("print x,\n", 'print(x, end=" ")\n'),
    ("print (a), b\n", "print((a), b)\n"),
    ("print >>sys.stderr, 'bad', x\n", "print('bad', x, file=sys.stderr)\n"),
    ("print >> f, x,\n", 'print(x, end=" ", file=f)\n'),
    ("print >>f\n", "print(file=f)\n"),
])
def test_each_form_of_the_statement(text: str, fixed: str) -> None:
    from torchfix_device.syntax.token_fixes import apply_fixes

    fixes = list(PrintStatement.token_fixes("x = 1\n" + text))
    assert apply_fixes("x = 1\n" + text, fixes) == "x = 1\n" + fixed
    main = [f for f in fixes if not f.follows]
    statements = text.count("print")
    assert len(main) == statements and len(fixes) == 2 * statements - text.count("print\n") - (text == "print >>f\n")
    assert main[0].safe == ("," not in text.rstrip()[-1:] and "(a)" not in text)


@pytest.mark.parametrize("text", [
    "print(x)\n", "print (x)\n", "print (a, b)\n", "print = log\n", "print.x = 1\n", "f(print)\n",
    "print >>f,\n", "x = [print]\n", "print[0]\n", "# print x\n", "s = 'print x'\n",
    "lambda: print\n",
])
def test_what_is_not_a_print_statement_is_never_touched(text: str) -> None:
    assert list(PrintStatement.token_fixes(text)) == []


def test_print_split_before_its_first_comma_is_refused_naming_the_line() -> None:
    text = "import sys, torch\nprint 'ok'\nprint >>(sys.\n  stderr), 'bad'\nexec 'x = 1'\n"
    with pytest.raises(cst.ParserSyntaxError) as raised:
        transform_source(text, all_codemods())
    message = parse_error_message(raised.value, text)
    assert message.startswith("line 3:") or message.startswith("line 5:"), message


def test_noqa_select_ignore_and_unsafe_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "log.py").write_text("import torch\nprint torch.ones(1).cuda()\n")
    (tmp_path / "quiet.py").write_text("import torch\nprint torch.ones(1).cuda()  # noqa: TFD020\n")
    (tmp_path / "soft.py").write_text("import torch\nprint torch.ones(1).cuda(),\n")
    check = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    out, err = check.stdout.decode(), check.stderr.decode()
    assert "log.py:2:1: TFD020 [*] `print torch . ones ( 1 ) . cuda ( )` is a Python 2 statement" in out
    assert "quiet.py:2" not in out and "TFD020 would fix it, suppressed by `# noqa` here" in err
    assert "soft.py:2:1" not in out and "TFD020 would fix it with --unsafe-fixes" in err
    ignored = run_cli("check", "--no-cache", "--ignore", "TFD020", "log.py", cwd=tmp_path)
    assert "TFD020" not in ignored.stdout.decode() and "failed: log.py:2:" in ignored.stderr.decode()
    applied = run_cli("apply", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "3 files scanned, 2 changed, 1 failed; fixes: TFD001 ×2, TFD020 ×2" in applied.stderr.decode()
    assert (tmp_path / "log.py").read_text().endswith("print(torch.ones(1).to(device))\n")
    assert (tmp_path / "soft.py").read_text().endswith('print(torch.ones(1).to(device), end=" ")\n')
    assert (tmp_path / "quiet.py").read_text() == "import torch\nprint torch.ones(1).cuda()  # noqa: TFD020\n"


def test_interactive_review_makes_both_halves_or_neither() -> None:
    text = "import torch\nprint 'a'\nprint torch.load('m.pth')\n"
    fixes = [f for f in transform_source(text, all_codemods()).findings if f.fixed]
    key = {(f.code, f.line): (f.code, f.line, f.column) for f in fixes}
    only_load = rewrite_with(text, all_codemods(), fixes, {key[("TFD005", 3)]}, filename="log.py")
    assert only_load.endswith("print('a')\nprint(torch.load('m.pth', map_location=device))\n")
    only_print = rewrite_with(text, all_codemods(), fixes, {key[("TFD020", 2)], key[("TFD020", 3)]}, filename="log.py")
    assert only_print == "import torch\nprint('a')\nprint(torch.load('m.pth'))\n"


def test_a_file_that_parses_is_never_given_to_the_token_pass() -> None:
    text = (HERE / "print_function.noop.py").read_text(encoding="utf-8")
    out = transform_source(text, [TFD020], options=RunOptions(unsafe_fixes=True))
    assert out.text == text and out.findings == []


def test_another_file_is_read_as_it_means_through_every_token_fix() -> None:
    """The run-level facts read a Python 2 file (or one with ``async=``) through the token fixes
    of TFD020 and TFD016, safe or not, each line keeping its number; what still does not parse,
    or needs no fix, gives nothing new."""
    import ast

    from torchfix_device.syntax.legacy import python_tree, readable

    text = "import train\nprint 'go',\nx = train.f(1).cuda(async=True)\nprint >>f, x\nprint\n"
    fixed = readable(text)
    assert fixed == "import train\nprint('go', end=\" \")\nx = train.f(1).cuda(non_blocking=True)\nprint(x, file=f)\nprint()\n"
    tree = python_tree(text)
    assert tree is not None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "f"]
    assert [c.lineno for c in calls] == [3]
    latin = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\nprint name\n".encode("latin-1")
    tree = python_tree(latin)
    assert tree is not None and ast.literal_eval(tree.body[0].value) == "caf\xe9"
    assert python_tree(b"\xef\xbb\xbfprint 1\n") is not None  # a BOM
    assert readable("x = 1\n") is None and python_tree("x = 1\n") is not None
    assert python_tree("print 'a'\nexec code\n") is None  # Python 2 the token fixes do not cover
    assert python_tree(b"# coding: no-such-codec\nprint 1\n") is None
