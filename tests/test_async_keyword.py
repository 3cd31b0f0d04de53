"""Issue 20 idiom 4: files Python 3 cannot parse only because of ``async=`` keyword arguments.

TFD016's fix is made on tokens before parsing (the token pass): the bytes of the file stay as
they were apart from the renamed keyword, the file is then migrated as usual, and the rule is
controlled like any other (``--select``/``--ignore``, ``# noqa``, ``--unsafe-fixes``). Whatever
is not a call's ``async=`` keyword is never touched, and a file that still does not parse is
refused with the line and what to do.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES, run_cli
from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods, lookup
from torchfix_device.codemods.async_keyword_argument import AsyncKeywordArgument
from torchfix_device.engine import parse_error_message, transform_source, transform_unfiltered
from torchfix_device.cli.interactive import rewrite_with
from torchfix_device.run.job import process_file

HERE = FIXTURES / "async_keyword_argument"
TFD016 = lookup("TFD016")

LOOP = """\
import torch


def train(loader, model):
    for inputs, targets in loader:
        inputs, targets = targets.cuda(async=True), inputs.cuda()
        model.load_state_dict(torch.load("best.pth"))
"""
LOOP_FIXED = """\
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(loader, model):
    for inputs, targets in loader:
        inputs, targets = targets.to(device, non_blocking=True), inputs.to(device)
        model.load_state_dict(torch.load("best.pth", map_location=device))
"""

# `async` that is not a call's keyword argument: never renamed, and the file (not Python 3)
# is refused as it was, naming the line.
NOT_A_KEYWORD = {
    "parameter": ("import torch\n\n\ndef cuda(self, async=False):\n    return self\n", 4),
    "assignment": ("import torch\nasync = True\nx = torch.ones(1).cuda()\n", 2),
    "attribute": ("import torch\nif opts.async:\n    x = torch.ones(1).cuda()\n", 2),
    "lambda": ("import torch\nf = map(lambda async=1: async, [torch.ones(1).cuda()])\n", 2),
    "class keyword": ("import torch\nclass C(Base, async=True):\n    pass\nx = torch.ones(1).cuda()\n", 2),
    "dict key": ("import torch\nd = dict(a=1)\nd[async] = torch.ones(1).cuda()\n", 3),
}


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- the token pass keeps every other byte -----------------------------------------------------
@pytest.mark.parametrize("variant", ["crlf", "crlf+bom", "latin-1 cookie"])
def test_the_token_pass_keeps_every_other_byte(tmp_path: Path, variant: str) -> None:
    source, expected = (HERE / "crlf.in.py").read_bytes(), (HERE / "crlf.out.py").read_bytes()
    assert b"\r\n" in source and b"\t" in source and "é".encode() in source
    if variant == "crlf+bom":
        source, expected = b"\xef\xbb\xbf" + source, b"\xef\xbb\xbf" + expected
    elif variant == "latin-1 cookie":
        cookie = b"# -*- coding: latin-1 -*-\r\n"
        source = cookie + source.decode("utf-8").encode("latin-1")
        expected = cookie + expected.decode("utf-8").encode("latin-1")
    path = _write(tmp_path, "legacy.py", source)
    result = process_file(path, [TFD016], options=RunOptions(write=True))
    assert result.status == "changed", result.error
    assert path.read_bytes() == expected
    assert [(f.line, f.code, f.fixed) for f in result.findings] == [(5 + (variant == "latin-1 cookie"), "TFD016", True)]
    again = process_file(path, [TFD016], options=RunOptions(write=True))  # a second run changes nothing
    assert again.status == "unchanged" and path.read_bytes() == expected


def test_a_file_with_async_keywords_is_migrated_as_usual_and_a_second_run_is_a_no_op() -> None:
    out = transform_source(LOOP, all_codemods())
    assert out.text == LOOP_FIXED
    assert transform_source(out.text, all_codemods()).text == out.text
    # stage 1 changes nothing here either
    assert transform_unfiltered(LOOP, all_codemods()).text == LOOP_FIXED


def test_findings_keep_their_columns_in_the_file_as_it_was() -> None:
    """``non_blocking`` is 7 characters longer than ``async``: a finding after it on the same
    line is reported where it is in the user's file."""
    out = transform_source(LOOP, all_codemods())
    line = LOOP.splitlines()[5]
    where = {f.code: (f.line, f.column) for f in out.findings if f.line == 6}
    assert where["TFD016"] == (6, line.index("async") + 1)
    assert sorted(f.column for f in out.findings if f.code == "TFD001") == [line.index("targets.cuda") + 1, line.index("inputs.cuda") + 1]


@pytest.mark.parametrize("name", sorted(NOT_A_KEYWORD))
def test_async_that_is_not_a_keyword_argument_is_never_renamed(name: str) -> None:
    text, line = NOT_A_KEYWORD[name]
    assert list(AsyncKeywordArgument.token_fixes(text)) == []
    with pytest.raises(cst.ParserSyntaxError) as raised:
        transform_source(text, all_codemods(), options=RunOptions(unsafe_fixes=True))
    message = parse_error_message(raised.value, text)
    assert message.startswith(f"line {line}:") and "`async`" in message and "reserved word since Python 3.7" in message


def test_a_file_that_parses_is_never_given_to_the_token_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = AsyncKeywordArgument.token_fixes.__func__

    def counting(cls, text):
        calls.append(text)
        return real(cls, text)

    monkeypatch.setattr(AsyncKeywordArgument, "token_fixes", classmethod(counting))
    valid = (HERE / "valid_async.noop.py").read_text(encoding="utf-8")
    assert transform_source(valid, all_codemods()).text.count("async") == valid.count("async")
    assert calls == []
    transform_source(LOOP, all_codemods())
    assert calls == [LOOP]


def test_only_the_keyword_in_a_calls_argument_list_is_renamed() -> None:
    text = (
        "import torch\n"
        "x = f(lambda a: a, async=True)\n"  # after a lambda's body: a keyword again
        "y = g([async_ for async_ in z], h(async=1), async=2)\n"
        "s = 'x.cuda(async=True)'  # x.cuda(async=True)\n"
        "w = t.cuda(\n    # async=True\n    async=True)\n"
    )
    fixes = [(f.line, f.column) for f in AsyncKeywordArgument.token_fixes(text)]
    assert fixes == [(2, 20), (3, 35), (3, 45), (7, 5)]


# -- the rule is controlled like any other -----------------------------------------------------
def test_select_ignore_noqa_unsafe_check_summary_and_diff(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text(LOOP)
    (tmp_path / "noqa.py").write_text(LOOP.replace("inputs.cuda()\n", "inputs.cuda()  # noqa: TFD016\n"))
    (tmp_path / "other_noqa.py").write_text(LOOP.replace("inputs.cuda()\n", "inputs.cuda()  # noqa: TFD001\n"))
    (tmp_path / "send.py").write_text("import torch\nx = torch.ones(1).cuda()\nqueue.send(x, async=True)\n")

    check = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    out, err = check.stdout.decode(), check.stderr.decode()
    assert check.returncode == 1
    assert "loop.py:6:40: TFD016 [*] `.cuda(async=True)`: `async` is a reserved word since Python 3.7" in out
    assert "other_noqa.py:6:40: TFD016" in out and "other_noqa.py:6:53: TFD001" not in out
    assert "noqa.py:6:40: TFD016" not in out.replace("other_noqa.py", "")
    assert (
        "failed: noqa.py:6:40: syntax error: `async=` at line 6: `async` is a reserved word since Python 3.7 "
        "(PyTorch 0.4 renamed the argument `non_blocking=`): rename it, then run torchfix-device again "
        "(TFD016 would fix it, suppressed by `# noqa` here)"
    ) in err
    assert "failed: send.py:3:15: syntax error: `async=` at line 3" in err and "(TFD016 would fix it with --unsafe-fixes)" in err
    assert "4 files scanned, 2 would change, 2 failed; fixes: TFD001 ×2, TFD005 ×2, TFD016 ×2; suppressed by noqa: 2" in err

    unsafe = run_cli("check", "--no-cache", "--unsafe-fixes", "send.py", cwd=tmp_path)
    assert "send.py:3:15: TFD016 [*] `async=True`: `async` is a reserved word since Python 3.7" in unsafe.stdout.decode()
    assert "fixes: TFD001 ×1, TFD016 ×1" in unsafe.stderr.decode()

    ignored = run_cli("check", "--no-cache", "--ignore", "TFD016", "loop.py", cwd=tmp_path)
    assert ignored.stdout == b"" and "failed: loop.py:6:40: syntax error: `async=` at line 6" in ignored.stderr.decode()

    diff = run_cli("apply", "--diff", "--no-cache", "--select", "async-keyword-argument", "loop.py", cwd=tmp_path)
    changed = [line for line in diff.stdout.decode().splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == [
        "-        inputs, targets = targets.cuda(async=True), inputs.cuda()",
        "+        inputs, targets = targets.cuda(non_blocking=True), inputs.cuda()",
    ]

    applied = run_cli("apply", "--no-cache", ".", cwd=tmp_path)
    assert (tmp_path / "loop.py").read_text() == LOOP_FIXED
    assert "fixes: TFD001 ×2, TFD005 ×2, TFD016 ×2" in applied.stderr.decode()
    assert (tmp_path / "noqa.py").read_text() == LOOP.replace("inputs.cuda()\n", "inputs.cuda()  # noqa: TFD016\n")
    second = run_cli("apply", "--no-cache", "loop.py", "other_noqa.py", cwd=tmp_path)
    assert second.returncode == 0 and "0 changed" in second.stderr.decode()


def test_interactive_review_makes_the_token_fix_with_any_accepted_fix() -> None:
    """No other fix can be made in a file that does not parse: accepting one makes the
    rename too; accepting only the rename makes only it."""
    fixes = [f for f in transform_source(LOOP, all_codemods()).findings if f.fixed]
    key = {f.code: (f.code, f.line, f.column) for f in fixes}
    only_load = rewrite_with(LOOP, all_codemods(), fixes, {key["TFD005"]}, filename="loop.py")
    assert "non_blocking=True), inputs.cuda()" in only_load and "map_location=device" in only_load
    only_rename = rewrite_with(LOOP, all_codemods(), fixes, {key["TFD016"]}, filename="loop.py")
    assert only_rename == LOOP.replace("async=", "non_blocking=")


# -- other Python 2 and legacy syntax: the line and what to do -----------------------------------
PYTHON2 = {  # construct: (file, the line named)
    "print statement": ('import torch\nx = 1\nprint "loss", x\n', 3),
    "exec statement": ('import torch\nexec "x = 1"\n', 2),
    "`except X, e:`": ("import torch\ntry:\n    x = 1\nexcept IOError, e:\n    pass\n", 4),
    "backtick repr": ("import torch\nname = `torch`\n", 2),
    "octal literal without `0o`": ("import os, torch\nos.chmod('f', 0777)\n", 2),
    "`ur''` string": ("import torch\ns = ur'caf\\xe9'\n", 2),
    "`<>` operator": ("import torch\nif 1 <> 2:\n    pass\n", 2),
    "`raise E, value`": ("import torch\nraise ValueError, 'bad'\n", 2),
    "long integer literal": ("import torch\nn = 10L\n", 2),
    "tuple parameter": ("import torch\ndef f(a, (b, c)):\n    return a\n", 2),
    "tabs and spaces mixed in the indentation": ("import torch\nif True:\n        x = 1\n\ty = 2\n", 4),
}
NOT_PYTHON2 = [
    "import torch\ndef train(model:\n    return 1\n",
    "import torch\nx = = 1\n",
    "import torch\nprint(x y)\n",
    "import torch\nfor x in range(3)\n    pass\n",
    "import torch\nexcept_count, e = 1, 2\nf(a b)\n",
]


@pytest.mark.parametrize("construct", sorted(PYTHON2))
def test_python2_constructs_get_the_line_and_a_converter(construct: str) -> None:
    text, line = PYTHON2[construct]
    with pytest.raises(cst.ParserSyntaxError) as raised:  # TFD020 would fix the print statement
        transform_source(text, [c for c in all_codemods() if c.code != "TFD020"])
    message = parse_error_message(raised.value, text)
    assert message.startswith(f"line {line}:") and f"looks like Python 2 ({construct} at line {line}" in message, message
    assert "then run torchfix-device again" in message and "Python 3 says: " in message
    if construct.startswith("tabs"):
        assert "indent with spaces only" in message
    else:
        assert "convert it to Python 3 first, e.g. with 2to3" in message


@pytest.mark.parametrize("text", NOT_PYTHON2)
def test_a_plain_syntax_error_is_not_called_python_2(text: str) -> None:
    with pytest.raises(cst.ParserSyntaxError) as raised:
        transform_source(text, all_codemods())
    message = parse_error_message(raised.value, text)
    assert message.startswith("line ") and ": syntax error: " in message
    assert "Python 2" not in message and "async" not in message


def test_a_python2_line_after_async_keywords_is_the_one_named(tmp_path: Path) -> None:
    """The token pass fixes what it can; the Python 2 line left is the one the message names."""
    text = LOOP + '        exec "done = True"\n'
    with pytest.raises(cst.ParserSyntaxError) as raised:
        transform_source(text, all_codemods())
    message = parse_error_message(raised.value, text)
    assert message.startswith("line 8:9: syntax error: looks like Python 2 (exec statement at line 8)"), message
