"""A rewrite changes the code it fixes and not one byte more: line endings, BOM, encoding, file
mode; a file with nothing to fix is never written; writes are atomic and never clobber a newer
version of the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conftest import run_cli
from torchfix_device.options import RunOptions
from torchfix_device import engine
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.files.sources import TEMP_SUFFIX, WriteError, atomic_replace, read_source
from torchfix_device.run.job import process_file

LEGACY = (
    'import torch\nimport torch.nn.functional as F\n\nstate = torch.load("ckpt.pt")  # résumé\n'
    'print(F.mse_loss(state["pred"], state["target"]).data[0])\n'
)
FIXED = (
    'import torch\nimport torch.nn.functional as F\n\n'
    'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)  # résumé\n'
    'print(F.mse_loss(state["pred"], state["target"]).item())\n'
)
# Reported for manual review, never rewritten (no module device inside __init__).
REVIEW_ONLY = """\
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, path):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.table = torch.load(path)
"""
OLD_NS = 1_000_000_000  # an mtime far in the past: any write would move it


def apply(*paths: Path, cwd: Path | None = None) -> str:
    out = run_cli("apply", *map(str, paths), cwd=cwd)
    stderr = out.stderr.decode()
    assert out.returncode == 0 and "Traceback" not in stderr, stderr
    return stderr


def temp_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX))


# -- line endings, BOM, encodings --------------------------------------------------------------
def test_lf_reference(tmp_path: Path) -> None:
    path = tmp_path / "lf.py"
    path.write_bytes(LEGACY.encode())
    apply(path)
    assert path.read_bytes() == FIXED.encode()


def test_crlf_line_endings_survive(tmp_path: Path) -> None:
    path = tmp_path / "crlf.py"
    path.write_bytes(LEGACY.replace("\n", "\r\n").encode())
    apply(path)
    assert path.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_mixed_line_endings_keep_each_line_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "mixed.py"
    path.write_bytes(b'import torch\r\nx = 1\nstate = torch.load("a")\r\ny = 2  \t\n\x0c\nz = 3')
    apply(path)
    assert path.read_bytes() == (
        b'import torch\r\n\r\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\r\n'
        b'x = 1\nstate = torch.load("a", map_location=device)\r\ny = 2  \t\n\x0c\nz = 3'
    )


# Classic Mac OS ended lines with a bare \r (CPython still reads it as a line break), and files
# edited on several systems mix the three endings. libcst counts only \n as the file's final
# newline: a final \r was dropped when the last line was rewritten (issue 22, item 3).
ENDINGS = {
    "classic_mac": (
        b'import torch\rstate = torch.load("a")\r',
        b'import torch\r\rdevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\r'
        b'state = torch.load("a", map_location=device)\r',
    ),
    "lf_then_final_cr": (
        b'import torch\nstate = torch.load("a")\r',
        b'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        b'state = torch.load("a", map_location=device)\r',
    ),
    "final_blank_cr_line": (
        b'import torch\nstate = torch.load("a")\n\r',
        b'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        b'state = torch.load("a", map_location=device)\n\r',
    ),
    "two_final_crs": (
        b'import torch\rx = 1\nstate = torch.load("a")\r\r',
        b'import torch\r\rdevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\r'
        b'x = 1\nstate = torch.load("a", map_location=device)\r\r',
    ),
    "all_three_mixed": (
        b'import torch\r\nx = 1\rstate = torch.load("a")\r\ny = 2\n\r\nz = torch.load("b")\r',
        b'import torch\r\n\r\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\r\n'
        b'x = 1\rstate = torch.load("a", map_location=device)\r\ny = 2\n\r\n'
        b'z = torch.load("b", map_location=device)\r',
    ),
    "cr_blank_lines_inside": (
        b'import torch\r\rx = 1\n\r\r\nstate = torch.load("a")\n\r\n\r',
        b'import torch\r\rdevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\r\r'
        b'x = 1\n\r\r\nstate = torch.load("a", map_location=device)\n\r\n\r',
    ),
}


def test_classic_mac_and_mixed_line_endings_survive_to_the_last_byte(tmp_path: Path) -> None:
    for name, (before, after) in ENDINGS.items():
        compile(before, name, "exec")
        compile(after, name, "exec")
        (tmp_path / f"{name}.py").write_bytes(before)
    apply(tmp_path)
    for name, (_, after) in ENDINGS.items():
        assert (tmp_path / f"{name}.py").read_bytes() == after, name
    apply(tmp_path)  # a second run changes nothing
    for name, (_, after) in ENDINGS.items():
        assert (tmp_path / f"{name}.py").read_bytes() == after, name


def test_page_breaks_survive_in_lines_the_fix_does_not_touch(tmp_path: Path) -> None:
    """libcst drops a form feed that starts a line of code; the lines we do not change are kept
    as read, and a file with nothing to fix is not written at all (see the test below)."""
    path = tmp_path / "pages.py"
    path.write_bytes(b'import torch\n\x0cx = 1\n\x0c\nstate = torch.load("a")\n\x0cdef f():\n    return 2\n')
    apply(path)
    assert path.read_bytes() == (
        b'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        b'\x0cx = 1\n\x0c\nstate = torch.load("a", map_location=device)\n\x0cdef f():\n    return 2\n'
    )


@pytest.mark.parametrize("tail", [b"\x0c\n\x0c\n", b"\n\x0c\n", b"\x0c\n\x0c  \n\n", b"\x0c\n   ", b"\n\x0c", b"\r\n\x0c\r\n"])
def test_a_file_ending_in_form_feed_lines_is_fixed_and_keeps_them(tmp_path: Path, tail: bytes) -> None:
    """Issue 33, item 18: a valid file ending in lines of form feeds and blanks was refused
    ("libcst cannot reproduce this file byte for byte ... please report this bug"): libcst's
    round trip changes the number of such lines. They are set aside and put back."""
    path = tmp_path / "paged.py"
    body = b'import torch\nstate = torch.load("a")\n'
    path.write_bytes(body + tail)
    out = run_cli("apply", "paged.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert b"please report" not in out.stderr
    assert path.read_bytes() == (
        b'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        b'state = torch.load("a", map_location=device)\n' + tail
    )
    assert run_cli("apply", "paged.py", cwd=tmp_path).returncode == 0
    assert path.read_bytes().endswith(tail) and path.read_bytes().count(b"map_location") == 1


def test_missing_final_newline_stays_missing(tmp_path: Path) -> None:
    path = tmp_path / "no_newline.py"
    path.write_bytes(LEGACY.rstrip("\n").encode())
    apply(path)
    assert path.read_bytes() == FIXED.rstrip("\n").encode()


def test_utf8_bom_survives(tmp_path: Path) -> None:
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + LEGACY.encode())
    apply(path)
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()


def test_utf8_bom_and_crlf_together(tmp_path: Path) -> None:
    path = tmp_path / "bom_crlf.py"
    path.write_bytes(b"\xef\xbb\xbf" + LEGACY.replace("\n", "\r\n").encode())
    apply(path)
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.replace("\n", "\r\n").encode()


def test_bom_diff_keeps_the_bom_on_both_sides(tmp_path: Path) -> None:
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + LEGACY.encode())
    diff = run_cli("apply", "--diff", "bom.py", cwd=tmp_path).stdout
    assert diff.startswith(b"--- a/bom.py\n+++ b/bom.py\n@@ -1,5 +1,7 @@\n \xef\xbb\xbfimport torch\n")
    assert diff.count(b"\xef\xbb\xbf") == 1  # unchanged context line: once, not removed and re-added


LATIN1_COOKIE = "# -*- coding: latin-1 -*-\n"
LATIN1_BODY = 'import torch\n\n# modèle entraîné à Zürich\nstate = torch.load("modèle.pt")\n'
LATIN1_FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    '# modèle entraîné à Zürich\nstate = torch.load("modèle.pt", map_location=device)\n'
)


def test_latin1_coding_cookie_survives(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    original = (LATIN1_COOKIE + LATIN1_BODY).encode("latin-1")
    path.write_bytes(original)
    with pytest.raises(UnicodeDecodeError):
        original.decode("utf-8")  # the test means something: this is not UTF-8

    diff = run_cli("apply", "--diff", "latin.py", cwd=tmp_path).stdout
    assert '+state = torch.load("modèle.pt", map_location=device)\n'.encode("latin-1") in diff
    assert " # modèle entraîné à Zürich\n".encode("latin-1") in diff  # context lines, same bytes
    assert path.read_bytes() == original

    apply(path)
    assert path.read_bytes() == (LATIN1_COOKIE + LATIN1_FIXED).encode("latin-1")


def test_utf8_without_bom_stays_without_bom(tmp_path: Path) -> None:
    path = tmp_path / "utf8.py"
    path.write_bytes(LEGACY.encode())
    apply(path)
    assert not path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert "résumé".encode() in path.read_bytes()


# -- file metadata -----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0o755, 0o751, 0o640, 0o600])
def test_file_mode_survives(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "script.py"
    path.write_text("#!/usr/bin/env python\n" + LEGACY)
    path.chmod(mode)
    apply(path)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert path.read_text() == "#!/usr/bin/env python\n" + FIXED


@pytest.mark.parametrize("command", ["apply", "check"])
@pytest.mark.parametrize("content", [b"import torch\r\nx = torch.zeros(3)  \n\x0cy = 1", REVIEW_ONLY.encode()])
def test_file_without_a_fix_is_never_written(tmp_path: Path, command: str, content: bytes) -> None:
    path = tmp_path / "clean.py"
    path.write_bytes(content)
    os.utime(path, ns=(OLD_NS, OLD_NS))
    inode = path.stat().st_ino
    run_cli(command, "clean.py", cwd=tmp_path)
    assert path.read_bytes() == content
    assert path.stat().st_mtime_ns == OLD_NS and path.stat().st_ino == inode


def test_apply_only_touches_the_files_it_changes(tmp_path: Path) -> None:
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "clean.py").write_text("import os\n")
    for p in tmp_path.iterdir():
        os.utime(p, ns=(OLD_NS, OLD_NS))
    apply(tmp_path)
    assert (tmp_path / "legacy.py").stat().st_mtime_ns != OLD_NS
    assert (tmp_path / "clean.py").stat().st_mtime_ns == OLD_NS


# -- atomic writes ---------------------------------------------------------------------------
def test_write_is_a_rename_and_leaves_no_temp_files(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(LEGACY)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "deep.py").write_text(LEGACY)
    inode = (tmp_path / "m0.py").stat().st_ino
    apply(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"m{i}.py" for i in range(5)] + ["pkg"]
    assert [p.name for p in (tmp_path / "pkg").iterdir()] == ["deep.py"]
    assert temp_files(tmp_path) == []
    assert (tmp_path / "m0.py").stat().st_ino != inode  # a new file renamed into place, not a truncate
    assert all((tmp_path / f"m{i}.py").read_text() == FIXED for i in range(5))


def test_atomic_replace_writes_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"old\n")
    path.chmod(0o754)
    atomic_replace(path, b"new\n", expected_old=b"old\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]


@pytest.mark.parametrize("moment", ["create", "fsync", "replace"])
def test_ctrl_c_during_atomic_replace_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str) -> None:
    """SIGINT at any point of the write (here: right after the temp file is created, after its
    data is synced, just before the rename) is held until the file is replaced, then raised."""
    import os
    import signal

    from torchfix_device.files import sources as fileio

    path = tmp_path / "m.py"
    path.write_bytes(b"old\n")
    real = {"create": fileio._create_temp, "fsync": os.fsync, "replace": os.replace}
    target = {"create": fileio, "fsync": os, "replace": os}[moment]
    name = {"create": "_create_temp", "fsync": "fsync", "replace": "replace"}[moment]
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(moment)
        signal.raise_signal(signal.SIGINT)  # Ctrl-C arrives here
        return real[moment](*args, **kwargs)

    monkeypatch.setattr(target, name, interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_replace(path, b"new\n", expected_old=b"old\n")
    assert calls == [moment]
    assert path.read_bytes() == b"new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_atomic_replace_never_overwrites_a_newer_version(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"newer\n")
    with pytest.raises(WriteError, match="changed on disk"):
        atomic_replace(path, b"rewrite\n", expected_old=b"older\n")
    assert path.read_bytes() == b"newer\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # the temp file is gone too


def test_atomic_replace_does_not_recreate_a_deleted_file(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    with pytest.raises(WriteError, match="deleted"):
        atomic_replace(path, b"rewrite\n", expected_old=b"old\n")
    assert list(tmp_path.iterdir()) == []


def test_atomic_replace_refuses_a_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"old\n")
    path.chmod(0o444)
    with pytest.raises(WriteError, match="^not writable: left unchanged$"):
        atomic_replace(path, b"new\n", expected_old=b"old\n")
    assert path.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]


def test_file_edited_during_the_run_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone saves the file between our read and our write: their version wins, we say so."""
    path = tmp_path / "m.py"
    path.write_text(LEGACY)
    users_version = LEGACY + "# edited in the editor meanwhile\n"
    real_transform = engine.transform_source

    def transform_while_user_saves(*args, **kwargs):
        output = real_transform(*args, **kwargs)
        path.write_text(users_version)
        return output

    monkeypatch.setattr(engine, "transform_source", transform_while_user_saves)
    result = process_file(path, all_codemods(), options=RunOptions(write=True))
    assert result.status == "failed"
    assert "changed on disk" in (result.error or "")
    assert path.read_text() == users_version
    assert temp_files(tmp_path) == []


def test_read_source_reports_the_encoding_it_used(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes((LATIN1_COOKIE + LATIN1_BODY).encode("latin-1"))
    source = read_source(path)
    assert source.encoding in ("iso-8859-1", "latin-1") and not source.bom
    assert source.encode(source.text) == path.read_bytes()
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + LEGACY.replace("\n", "\r\n").encode())
    source = read_source(bom)
    assert source.bom and source.encoding == "utf-8" and "\r\n" in source.text
    assert source.encode(source.text) == bom.read_bytes()
