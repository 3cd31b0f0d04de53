"""Score torchfix-device on a development corpus of real legacy PyTorch repos (issue 20).

The corpus is rebuilt from local bare clones (``fetch`` mirrors under ``--mirror-root``): each
repo of ``benchmarks/real_corpus/repos.csv`` of the chosen ``--tier`` (``dev`` by default; the
``heldout`` tier only when named: it is scored once, at the end, by someone else) is extracted at
its chosen commit (``git archive``, only ``*.py`` and ``*.ipynb``), then ``python -m
torchfix_device`` runs ``check``, ``apply`` (safe) and ``apply --unsafe-fixes`` on fresh copies
(PYTHONPATH picks the tree under test).

Each labelled site of ``benchmarks/real_corpus/manifest.csv`` (``repo,commit,path,line,idiom,
expected,note``) is then scored against the output:

* ``fix`` sites count as fixed when their line was changed and the legacy token of the idiom
  (``.cuda(``, ``Variable(``, ``.data[0]``, ...) no longer appears in the text that replaced it;
  three idioms have their own checker: ``8 host boundary`` (every ``.numpy()`` /
  ``np.array(`` / ``np.asarray(`` left on the line takes a value moved to the CPU),
  ``9 0-dim numbers`` (the line gained ``.item()`` or an ``int(``/``float(`` conversion) and
  ``10 legacy autograd Function`` (``def forward(self`` became a ``ctx`` signature under
  ``@staticmethod``; ``F()(x)`` became ``F.apply(x)``; a line that builds or calls a kept
  instance, left as it was, where its note names the class, ``instance of `F```, and the
  output gives ``F`` a ``__call__`` that runs ``F.apply(self, *args)``: reported apart);
* ``keep`` sites count as kept when their line is unchanged (re-indentation counts as a change;
  the report says which changed keep sites only moved under a rewrite around them).

``other`` sites (needs outside the tool's rewrites: removed APIs and the like; in a notebook, a
row whose note says ``notebook (other)``) are reported on a line of their own and kept out of the
headline, which is: fix sites fixed / all fix sites of the idioms the tool is meant to handle,
per tier, and keep sites changed. Also reported per idiom and per repo.

Lines of a notebook are lines of its *view*: the code cells joined in order, each preceded by
one line ``# %% cell N`` (N counts every cell from 1, as the tool's messages do).

Also reported: every output that fails to ``compile()`` (and whether the input already failed),
and crashes (exit status other than 0/1, tracebacks, "internal error" lines). ``--root-run``
also runs ``apply`` (safe) once over one folder holding all repos of the tier side by side and
lists the files whose bytes differ from the per-repo runs.

    python benchmarks/real_repos.py                      # scores main's code via PYTHONPATH
    python benchmarks/real_repos.py --validate --tier all  # checks the labels; runs no tool
    python benchmarks/real_repos.py --views /tmp/views   # only write the labelling views
"""

from __future__ import annotations

import argparse
import csv
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tokenize
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MANIFEST = HERE / "real_corpus" / "manifest.csv"
DEFAULT_REPOS = HERE / "real_corpus" / "repos.csv"

IDIOMS = {
    "1 device from guard": r"\.cuda\(|is_cuda|get_device\(",
    "2 tensor-type aliases": r"torch\.cuda\.\w*Tensor\b",
    "3 .data[0] scalars": r"\.data\[0\]|\.numpy\(\)\[0\]",
    "4 async= keyword": r"\basync\s*=",
    "5 Variable/volatile": r"\bVariable\b|\bvolatile\b",
    "6 accumulated scalars": r"\.data\b|\[0\]",
    "7 notebooks": None,
    "8 host boundary": None,
    "9 0-dim numbers": None,
    "10 legacy autograd Function": None,
    "cuda moves": r"\.cuda\(",
    "dropped moves": None,
    "layer lists": None,
    "factories without device": None,
    "torch.load map_location": None,
    "loss args": r"\bsize_average\s*=(?!=)|\breduce\s*=(?!=)",
    "other": None,
}
"""Idiom name → regex of the legacy token that must be gone from a fixed line (None: any change,
or the idiom's own checker in :data:`CHECKERS`). For loss args the keyword: a name that holds the
legacy value (``size_average=size_average`` → ``reduction="sum" if size_average is not None and
not size_average else "mean"``) may stay in the fix."""

OTHER = "other"
"""Needs outside the tool's rewrites (removed APIs and the like): reported, never in the headline."""

VALIDATE_TOKENS = {
    "2 tensor-type aliases": r"torch\.cuda\.\w*Tensor\b|\btorch\.cuda if\b|set_default_tensor_type\(|\.type\(type\("
                             r"|\.\w+\.\w*Tensor\(",
    "5 Variable/volatile": r"\bVariable\b|\bvolatile\b|\bVar\(",
    "8 host boundary": r"\.numpy\(|\b(?:np|numpy)\.(?:array|asarray)\(",
    "torch.load map_location": r"\bload\(",
}
"""``--validate``: the legacy token a fix row's line must show; where an idiom has none here,
its :data:`IDIOMS` regex, else none (the line must only be code). Wider than :data:`IDIOMS`
where the labelling instructions name other spellings: the ``self.tt = torch.cuda if cuda else
torch`` alias and its uses, ``.type(type(x.data))``, ``Variable as Var``."""

NOTEBOOK_TOKEN = re.compile(
    r"\.cuda\(|\bVariable\(|volatile|\.data\[0\]|torch\.cuda\.\w*Tensor\b|\basync\s*=|size_average"
)

NOTEBOOK_OTHER = re.compile(r"\bnotebook \(other\)")
NOTEBOOK_UNDERLYING = re.compile(r"\(idiom (8|9|10)\b(?![/\d])")
"""A notebook row (idiom ``7 notebooks``) names its underlying idiom in its note: ``notebook
(other): ...`` makes it an ``other`` site; ``(idiom 8)``/``(idiom 9)``/``(idiom 10)`` has it
scored by that idiom's checker too (the notebook tokens of the line must be gone as well)."""

CHECKPOINT_FOLDER = ".ipynb_checkpoints"
"""Jupyter's auto-saved copies: not user code (the tool skips these folders, as ruff does);
the manifest holds no rows under them."""


def is_other(row: dict[str, str]) -> bool:
    """Whether a site is a need outside the tool's rewrites (kept out of the headline)."""
    if row["idiom"] == OTHER:
        return True
    return row["idiom"] == "7 notebooks" and bool(NOTEBOOK_OTHER.search(row.get("note") or ""))


# ----------------------------------------------------------------------------- idiom checkers
#
# A small scanner over one line of Python (the replacement text of a site): it finds the receiver
# of ``.numpy()`` (the primary chain before it) and the first argument of ``np.array(``, splits a
# chain into its top-level ``.name(...)`` links, and follows where the value lives along the
# chain. Strings are skipped while matching brackets. Good enough for single lines of real code;
# anything it cannot read counts as not moved (the site stays missed).

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_IDENT = re.compile(r"[A-Za-z_0-9]")


def _skip_string_back(text: str, end: int) -> int:
    """``text[end]`` is a closing quote: the index of its opening quote (or ``end``)."""
    quote = text[end]
    i = end - 1
    while i >= 0:
        if text[i] == quote and (i == 0 or text[i - 1] != "\\"):
            return i
        i -= 1
    return end


def _skip_string_forward(text: str, start: int) -> int:
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i
        i += 1
    return len(text) - 1


def _match_back(text: str, close: int) -> int:
    """Index of the bracket opening the one that closes at ``close`` (-1: none)."""
    depth = 0
    i = close
    while i >= 0:
        ch = text[i]
        if ch in "'\"":
            i = _skip_string_back(text, i) - 1
            continue
        if ch in _CLOSE:
            depth += 1
        elif ch in _OPEN:
            depth -= 1
            if depth == 0:
                return i
        i -= 1
    return -1


def _match_forward(text: str, open_: int) -> int:
    """Index of the bracket closing the one that opens at ``open_`` (len(text): unclosed)."""
    depth = 0
    i = open_
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            i = _skip_string_forward(text, i) + 1
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def receiver_before(text: str, dot: int) -> str:
    """The primary chain that ends right before ``text[dot]`` (a ``.``): ``a.b(c)[0]`` in
    ``f(a.b(c)[0].numpy())``."""
    pos = dot
    while pos > 0:
        prev = text[pos - 1]
        if prev in _CLOSE:
            start = _match_back(text, pos - 1)
            if start < 0:
                break
            pos = start
            continue
        if _IDENT.match(prev):
            while pos > 0 and _IDENT.match(text[pos - 1]):
                pos -= 1
            if pos > 0 and text[pos - 1] == ".":
                pos -= 1
                continue
            break
        if prev in "'\"":
            start = _skip_string_back(text, pos - 1)
            if start == pos - 1:
                break
            pos = start
            continue
        break
    return text[pos:dot]


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """``text`` split on ``sep`` outside brackets and strings."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            i = _skip_string_forward(text, i) + 1
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return parts


def chain_links(expr: str) -> list[tuple[str, str | None]]:
    """The top-level links of a primary chain: ``x.data.cpu().numpy()`` →
    ``[("x", None), ("data", None), ("cpu", ""), ("numpy", "")]`` (name, call arguments or None;
    a subscript is a link named ``[``)."""
    links: list[tuple[str, str | None]] = []
    i = 0
    expr = expr.strip()
    while i < len(expr):
        ch = expr[i]
        if ch == ".":
            i += 1
            continue
        if _IDENT.match(ch):
            j = i
            while j < len(expr) and _IDENT.match(expr[j]):
                j += 1
            name = expr[i:j]
            if j < len(expr) and expr[j] == "(":
                end = _match_forward(expr, j)
                links.append((name, expr[j + 1:end]))
                i = end + 1
            else:
                links.append((name, None))
                i = j
            continue
        if ch in _OPEN:
            end = _match_forward(expr, i)
            links.append(("[" if ch == "[" else ch, expr[i + 1:end]))
            i = end + 1
            continue
        if ch in "'\"":
            i = _skip_string_forward(expr, i) + 1
            links.append(("str", None))
            continue
        i += 1
    return links


_CPU_ARG = re.compile(r"""^\s*(?:device\s*=\s*)?(?:torch\.device\(\s*)?['"]cpu['"]""")
_MOVES_AWAY = {"cuda", "to"}
_STAYS_ON_HOST = {"item", "tolist"}


def chain_place(expr: str) -> str:
    """Where the value of a primary chain lives, as far as its own links say: ``"cpu"`` (a
    ``.cpu()`` / ``.to("cpu")`` not undone later), ``"host"`` (a Python value or a numpy array of
    a CPU tensor: ``.item()``, ``.tolist()``, ``.numpy(force=True)``, ``.cpu().numpy()``, a
    number) or ``"unknown"``."""
    stripped = expr.strip()
    if re.fullmatch(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", stripped):
        return "host"
    place = "unknown"
    for name, args in chain_links(stripped):
        if args is None or name in ("[", "(", "{"):
            continue
        if (name == "cpu" and not args.strip()) or (name == "to" and _CPU_ARG.match(args)):
            place = "cpu"
        elif name in _MOVES_AWAY:
            place = "unknown"
        elif name in _STAYS_ON_HOST and not args.strip():
            place = "host"
        elif name == "numpy":
            place = "host" if place in ("cpu", "host") or re.search(r"\bforce\s*=\s*True\b", args) else "unknown"
    return place


_HOST_CALL = re.compile(r"\.numpy\(|\b(?:np|numpy)\.(?:array|asarray)\(")
_HOST_GAIN = re.compile(r"\.cpu\(\)|\.item\(\)|\.tolist\(\)|\.to\(\s*['\"]cpu['\"]|\bforce\s*=\s*True\b")


def _value_on_host(expr: str) -> bool:
    """An argument of ``np.array(...)``: a value moved to the CPU (a list or tuple display: each
    element is; a comprehension: its element expression is)."""
    expr = expr.strip()
    if expr.startswith(("[", "(")) and _match_forward(expr, 0) == len(expr) - 1:
        inner = expr[1:-1]
        head = split_top_level(inner, " for ")[0]
        elements = [e for e in split_top_level(head) if e.strip()]
        if expr[0] == "(" and len(elements) == 1 and not inner.rstrip().endswith(","):
            return _value_on_host(elements[0])
        return bool(elements) and all(_value_on_host(e) for e in elements)
    return chain_place(expr) in ("cpu", "host")


def host_boundary_fixed(before_line: str, new_text: str) -> bool:
    """Idiom 8: every ``.numpy()`` / ``np.array(`` / ``np.asarray(`` of the new text takes a
    value moved to the CPU. A site with none of them on its line (a tensor handed to a plotting
    call) is fixed when the new text gained a ``.cpu()`` / ``.item()`` / ``.tolist()``."""
    calls = list(_HOST_CALL.finditer(new_text))
    if not _HOST_CALL.search(before_line) and not calls:
        return len(_HOST_GAIN.findall(new_text)) > len(_HOST_GAIN.findall(before_line))
    for match in calls:
        if match.group(0) == ".numpy(":
            end = _match_forward(new_text, match.end() - 1)
            if re.search(r"\bforce\s*=\s*True\b", new_text[match.end():end]):
                continue
            if chain_place(receiver_before(new_text, match.start())) != "cpu":
                return False
        else:
            end = _match_forward(new_text, match.end() - 1)
            args = split_top_level(new_text[match.end():end])
            if not args or not _value_on_host(args[0]):
                return False
    return True


_NUMBER_CONVERSION = re.compile(r"\.item\(\)|(?<![\w.])(?:int|float)\(")


def zero_dim_fixed(before_line: str, new_text: str) -> bool:
    """Idiom 9: the line gained a ``.item()`` or an ``int(`` / ``float(`` conversion."""
    return len(_NUMBER_CONVERSION.findall(new_text)) > len(_NUMBER_CONVERSION.findall(before_line))


_LEGACY_DEF = re.compile(r"\bdef (forward|backward)\(\s*self\b")
_INSTANCE_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\([^()]*(?:\([^()]*\)[^()]*)*\)\(")


def autograd_function_fixed(before_line: str, new_text: str, region: str | None = None) -> bool:
    """Idiom 10: a ``def forward(self`` / ``def backward(self`` line became ``def forward(ctx``
    under ``@staticmethod`` (looked for in the changed ``region``, which holds the inserted
    decorator); a call ``F()(x)`` / ``F(a)(x)`` became ``F.apply(x)``; any other labelled line
    (a legacy Function instance built in ``__init__``, its call in ``forward``) is fixed when it
    now goes through ``.apply``."""
    legacy_def = _LEGACY_DEF.search(before_line)
    if legacy_def:
        name = legacy_def.group(1)
        around = region if region is not None else new_text
        return bool(re.search(rf"\bdef {name}\(\s*ctx\b", new_text)) and "@staticmethod" in around
    call = _INSTANCE_CALL.search(before_line)
    if call:
        func = call.group(1)
        return f"{func}.apply(" in new_text and not re.search(
            rf"\b{re.escape(func)}\([^()]*(?:\([^()]*\)[^()]*)*\)\(", new_text
        )
    return bool(re.search(r"\.apply\b", new_text))


_KEPT_INSTANCE = re.compile(r"\binstance of `(\w+)`")


def instance_call_kept(repo_output: Path, note: str, memo: dict) -> bool:
    """Idiom 10, a line left as it was: the row's note names the legacy Function class whose
    instance the line builds or calls (``instance of `Detect```), and the output of the repo
    gives that class a ``__call__`` that runs ``Detect.apply(self, *args)`` (the fix that keeps a
    stateful instance: its call, unchanged, then runs the new-style Function)."""
    found = _KEPT_INSTANCE.search(note or "")
    if found is None:
        return False
    key = (repo_output, found.group(1))
    if key not in memo:
        pattern = re.compile(rf"def __call__\(self, \*args\):\s*\n\s*return {found.group(1)}\.apply\(self, \*args\)")
        memo[key] = any(pattern.search(view_of(path) or "") for path in sorted(repo_output.rglob("*.py")))
    return memo[key]


CHECKERS = {
    "8 host boundary": host_boundary_fixed,
    "9 0-dim numbers": zero_dim_fixed,
    "10 legacy autograd Function": autograd_function_fixed,
}
"""Idiom → checker(before_line, new_text[, region]) → fixed (the line is known to have changed)."""

MANIFEST_COLUMNS = ["repo", "commit", "path", "line", "idiom", "expected", "note"]


# ----------------------------------------------------------------------------- corpus


def repo_dir_name(repo: str) -> str:
    return repo.replace("/", "+")


def mirror_git_dir(mirror_root: Path, repo: str) -> Path:
    """The git directory of a repo's mirror: ``<owner>+<name>/repo`` (bare) or its ``.git``."""
    base = mirror_root / repo_dir_name(repo) / "repo"
    return base / ".git" if (base / ".git").is_dir() else base


MISSING_BLOBS: dict[str, list[str]] = {}
"""repo → paths whose blob the mirror lacks at the commit (left out of the extraction)."""


def extract(mirror_root: Path, repo: str, commit: str, dest: Path) -> int:
    """Write the ``*.py`` / ``*.ipynb`` files of ``repo`` at ``commit`` under ``dest``. A file
    whose blob the mirror lacks is left out (and listed in :data:`MISSING_BLOBS`)."""
    git_dir = mirror_git_dir(mirror_root, repo)
    if not git_dir.is_dir():
        raise SystemExit(f"no mirror for {repo} at {git_dir}: bring it with the fetch tool first")
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit],
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8", errors="surrogateescape")
    entries = []
    for entry in filter(None, listing.split("\0")):
        meta, _, name = entry.partition("\t")
        _mode, kind, oid = meta.split()
        if kind == "blob" and name.endswith((".py", ".ipynb")):
            entries.append((oid, name))
    if not entries:
        return 0
    check = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-check=%(objectname) %(objecttype)"],
        input="".join(f"{oid}\n" for oid, _ in entries).encode(),
        check=True,
        capture_output=True,
    ).stdout.decode().splitlines()
    wanted = [name for (oid, name), line in zip(entries, check) if not line.endswith("missing")]
    missing = [name for (oid, name), line in zip(entries, check) if line.endswith("missing")]
    if missing:
        MISSING_BLOBS[repo] = missing
    if not wanted:
        return 0
    tar_bytes = subprocess.run(
        ["git", "--literal-pathspecs", "--git-dir", str(git_dir), "archive", "--format=tar", commit, "--", *wanted],
        check=True,
        capture_output=True,
    ).stdout
    count = 0
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith((".py", ".ipynb")):
                tar.extract(member, dest, filter="data")
                count += 1
    return count


def notebook_view(text: str) -> str | None:
    """The code cells of a notebook joined as one text (``# %% cell N`` before each)."""
    try:
        nb = json.loads(text)
    except json.JSONDecodeError:
        return None
    if "cells" in nb:
        cells = nb["cells"]
        key = "source"
    else:  # nbformat 3
        cells = [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])]
        key = "input"
    out: list[str] = []
    for index, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get(key, "")
        if isinstance(source, list):
            source = "".join(source)
        out.append(f"# %% cell {index}\n")
        out.append(source if source.endswith("\n") or not source else source + "\n")
    return "".join(out)


def view_of(path: Path) -> str | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    text = raw.decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        return notebook_view(text)
    return text


def compile_error(path: Path) -> str | None:
    """Why the file (a notebook: its code cells, IPython lines blanked) does not compile."""
    text = view_of(path)
    if text is None:
        return "unreadable"
    if path.suffix == ".ipynb":
        text = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) or line.rstrip().endswith("?") else line
            for line in text.split("\n")
        )
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return str(exc)
    return None


# ----------------------------------------------------------------------------- tool runs


@dataclass
class Run:
    name: str
    returncode: int
    stdout: str
    stderr: str
    crash_lines: list[str] = field(default_factory=list)


CRASH_PATTERN = re.compile(r"internal error|Traceback \(most recent call last\)", re.IGNORECASE)


def run_tool(args: list[str], cwd: Path, env: dict[str, str], name: str) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "torchfix_device", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    run = Run(name, proc.returncode, proc.stdout, proc.stderr)
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        if CRASH_PATTERN.search(line):
            run.crash_lines.append(line.strip())
    if proc.returncode not in (0, 1):
        run.crash_lines.insert(0, f"exit status {proc.returncode}")
    return run


def tool_env(pythonpath: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    env.setdefault("NO_COLOR", "1")
    env["COLUMNS"] = "200"
    return env


# ----------------------------------------------------------------------------- scoring


def changed_regions(before: str, after: str, *, fine: bool = False) -> dict[int, str]:
    """Line number (1-based, in ``before``) → the text that replaced its region, for changed lines.

    ``fine``: within a region of several lines, each line is matched again with indentation
    aside, so that a line only re-indented (a loop put under ``with torch.no_grad():``) maps to
    itself and an edited line to its own replacement, not to the whole region's text (where an
    unfixed neighbour's legacy token would count against it). Which lines changed stays the
    coarse answer: a site is changed when its region is, re-indentation included."""
    a = before.splitlines()
    b = after.splitlines()
    result: dict[int, str] = {}
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("replace", "delete"):
            continue
        if not fine or tag == "delete" or (i2 - i1 == 1 and j2 - j1 == 1):
            replacement = "\n".join(b[j1:j2])
            for i in range(i1, i2):
                result[i + 1] = replacement
            continue
        inner = difflib.SequenceMatcher(None, [x.strip() for x in a[i1:i2]], [y.strip() for y in b[j1:j2]], autojunk=False)
        for itag, k1, k2, l1, l2 in inner.get_opcodes():
            if itag == "insert":
                continue
            for k in range(k1, k2):
                # equal: the line itself, re-indented; replace/delete: what took its place
                result[i1 + k + 1] = b[j1 + l1 + (k - k1)] if itag == "equal" else "\n".join(b[j1 + l1:j1 + l2])
    return result


CONTINUED = {"torch.load map_location": "map_location"}
"""Idioms whose fix may edit only a later line of the site's statement (the site is labelled on
the first line of a multi-line call: ``torch.load(\n    open(path)\n)`` gains ``map_location``
beside ``open(path)``), with the text the fix leaves there."""


def continued_region(idiom: str, before_lines: list[str], line_no: int, regions: dict[int, str]) -> str | None:
    """For a site whose own line is unchanged: the new text of the later lines of its statement,
    where one changed and shows :data:`CONTINUED`'s text for ``idiom``; None otherwise."""
    last = line_no
    try:
        for token in tokenize.generate_tokens(io.StringIO("\n".join(before_lines[line_no - 1:]) + "\n").readline):
            if token.type == tokenize.NEWLINE:
                last = line_no + token.start[0] - 1
                break
    except (tokenize.TokenError, SyntaxError):
        return None
    found = [regions[i] for i in range(line_no + 1, last + 1) if i in regions]
    text = "\n".join(dict.fromkeys(found))
    return text if found and CONTINUED[idiom] in text else None


def read_manifest(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(line for line in handle if not line.startswith("#"))]
    return rows


def score_site(row: dict[str, str], region: str | None, before_line: str, replacement: str | None = None) -> bool:
    """True when the site ended as the manifest expects. ``region``: what replaced the site's
    region (None: unchanged); ``replacement``: what replaced the line itself (the fine mapping
    of :func:`changed_regions`; default ``region``), where the legacy tokens must be gone."""
    changed = region is not None
    coarse = region
    region = region if replacement is None else replacement
    if row["expected"] == "keep":
        return not changed
    if not changed:
        return False
    idiom = row["idiom"]
    checker = CHECKERS.get(idiom)
    pattern = IDIOMS.get(idiom)
    if idiom == "7 notebooks":
        pattern = NOTEBOOK_TOKEN.pattern
        underlying = NOTEBOOK_UNDERLYING.search(row.get("note") or "")
        if underlying:
            checker = next(f for name, f in CHECKERS.items() if name.startswith(underlying.group(1) + " "))
    if checker is not None:
        ok = checker(before_line, region, coarse) if checker is autograd_function_fixed else checker(before_line, region)
        if not ok:
            return False
    if pattern is None:
        return True
    regex = re.compile(pattern)
    # only the tokens that were on the site's own line must be gone
    tokens = {m.group(0) for m in regex.finditer(before_line)}
    return not any(token in region for token in tokens)


# ----------------------------------------------------------------------------- human oracle


def git_show(git_dir: Path, commit: str, path: str) -> str | None:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True)
    return proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else None


def oracle_report(mirror_root: Path, repo: dict[str, str], workdir: Path, env: dict[str, str]) -> list[str]:
    """Compare ``apply --unsafe-fixes`` on the parent of the maintainers' port-to-0.4 commit with it.

    Shares are over lines of the parent's ``*.py`` files: "theirs we change too" = of the lines the
    maintainers changed, how many we change; "ours they made too" = of the lines we change, how
    many they changed. Line level only: whether both changed a line *the same way* is not checked.
    """
    git_dir = mirror_git_dir(mirror_root, repo["repo"])
    full = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", repo["oracle_commit"]], capture_output=True, text=True, check=True
    ).stdout.strip()
    parent = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", f"{full}^"], capture_output=True, text=True, check=True
    ).stdout.strip()
    before_root = workdir / "oracle" / repo_dir_name(repo["repo"])
    if before_root.exists():
        shutil.rmtree(before_root)
    extract(mirror_root, repo["repo"], parent, before_root / "before")
    shutil.copytree(before_root / "before", before_root / "ours")
    run = run_tool(["apply", "--no-cache", "--unsafe-fixes", "ours"], before_root, env, "oracle apply")
    changed = subprocess.run(
        ["git", "--git-dir", str(git_dir), "diff", "--name-only", parent, full, "--", "*.py"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    theirs_total = theirs_hit = ours_total = ours_hit = 0
    per_file: list[str] = []
    for path in sorted(p.relative_to(before_root / "before") for p in (before_root / "before").rglob("*.py")):
        before = (before_root / "before" / path).read_text(encoding="utf-8", errors="replace")
        ours_after = (before_root / "ours" / path).read_text(encoding="utf-8", errors="replace")
        theirs_after = git_show(git_dir, full, str(path)) if str(path) in changed else before
        if theirs_after is None:  # deleted by the maintainers
            continue
        ours = set(changed_regions(before, ours_after))
        theirs = set(changed_regions(before, theirs_after))
        if not ours and not theirs:
            continue
        theirs_total += len(theirs)
        theirs_hit += len(theirs & ours)
        ours_total += len(ours)
        ours_hit += len(ours & theirs)
        per_file.append(f"| `{path}` | {len(theirs)} | {len(ours)} | {len(theirs & ours)} |")
    share = lambda a, b: f"{100 * a / b:.0f}%" if b else "–"
    out = [
        f"### {repo['repo']}: maintainers' {full[:10]} ({repo['oracle_note']}) vs the tool on its parent {parent[:10]}",
        "",
        f"- their changed lines we change too: {theirs_hit} / {theirs_total} ({share(theirs_hit, theirs_total)})",
        f"- our changed lines they changed too: {ours_hit} / {ours_total} ({share(ours_hit, ours_total)})",
        f"- tool run: exit {run.returncode}" + (f", crash: {run.crash_lines}" if run.crash_lines else ""),
        "",
        "| file | lines they changed | lines we changed | both |",
        "|---|---:|---:|---:|",
        *per_file,
    ]
    return out


# ----------------------------------------------------------------------------- tiers, validation, root run

TIERS = ("dev", "heldout")


def read_repos(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def select_repos(repos: list[dict[str, str]], tier: str, only: list[str] | None) -> list[dict[str, str]]:
    """The repos of ``tier`` (``all``: every tier), narrowed to ``only``. A repo of another tier
    named in ``only`` is refused: the held-out tier is chosen only by naming it."""
    chosen = repos if tier == "all" else [r for r in repos if r["tier"] == tier]
    if only:
        known = {r["repo"]: r["tier"] for r in repos}
        unknown = [name for name in only if name not in known]
        if unknown:
            raise SystemExit(f"not in repos.csv: {', '.join(unknown)}")
        outside = [f"{name} (tier {known[name]})" for name in only if name not in {r["repo"] for r in chosen}]
        if outside:
            raise SystemExit(f"not in tier {tier}: {', '.join(outside)}; choose its tier with --tier")
        chosen = [r for r in chosen if r["repo"] in only]
    return chosen


def validate(repos: list[dict[str, str]], manifest: list[dict[str, str]], orig_root: Path) -> list[str]:
    """Problems of the manifest rows of ``repos`` (extracted under ``orig_root``): the file exists
    at the commit, the line exists, a fix row's line shows its idiom's legacy token where one is
    defined (else it is code: not blank, not a comment), a keep row has a note. Runs no tool."""
    problems: list[str] = []
    commits = {r["repo"]: r["commit"] for r in repos}
    seen: set[tuple[str, str, str, str]] = set()
    views: dict[str, list[str] | None] = {}
    for row in manifest:
        if row["repo"] not in commits:
            continue
        where = f"{row['repo']} {row['path']}:{row['line']} ({row['idiom']}, {row['expected']})"
        key = (row["repo"], row["path"], row["line"], row["idiom"])
        if key in seen:
            problems.append(f"{where}: duplicate row")
        seen.add(key)
        if row["commit"] != commits[row["repo"]]:
            problems.append(f"{where}: commit {row['commit'][:10]} is not repos.csv's {commits[row['repo']][:10]}")
        if row["idiom"] not in IDIOMS:
            problems.append(f"{where}: unknown idiom")
        if row["expected"] not in ("fix", "keep"):
            problems.append(f"{where}: expected is neither fix nor keep")
        if CHECKPOINT_FOLDER in Path(row["path"]).parts:
            problems.append(f"{where}: under {CHECKPOINT_FOLDER}/ (not user code)")
        if row["path"].endswith(".ipynb") and row["idiom"] != "7 notebooks":
            problems.append(f"{where}: a notebook site must carry the idiom '7 notebooks'")
        if row["expected"] == "keep" and not (row.get("note") or "").strip():
            problems.append(f"{where}: keep row without a note")
        rel = f"{repo_dir_name(row['repo'])}/{row['path']}"
        if rel not in views:
            path = orig_root / rel
            views[rel] = (view_of(path) or "").splitlines() if path.is_file() else None
        lines = views[rel]
        if lines is None:
            why = "its blob is missing from the mirror" if row["path"] in MISSING_BLOBS.get(row["repo"], []) else "no such file at the commit"
            problems.append(f"{where}: {why}")
            continue
        if not row["line"].isdigit() or not 1 <= int(row["line"]) <= len(lines):
            problems.append(f"{where}: no such line (the file has {len(lines)})")
            continue
        text = lines[int(row["line"]) - 1]
        if not text.strip():
            problems.append(f"{where}: blank line")
            continue
        if text.lstrip().startswith("#"):
            problems.append(f"{where}: a comment: `{text.strip()[:100]}`")
            continue
        if row["expected"] == "fix":
            pattern = VALIDATE_TOKENS.get(row["idiom"]) or IDIOMS.get(row["idiom"])
            if pattern and not re.search(pattern, text):
                problems.append(f"{where}: the line lacks the idiom's legacy token /{pattern}/: `{text.strip()[:120]}`")
    return problems


def root_run(orig_root: Path, per_repo_root: Path, workdir: Path, env: dict[str, str]) -> tuple[Run, list[str]]:
    """``apply`` (safe) once over the folder holding all the repos side by side; the files whose
    bytes differ from the per-repo runs' (``per_repo_root``)."""
    root = workdir / "root-run"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(orig_root, root)
    run = run_tool(["apply", "--no-cache", "."], root, env, "apply safe, one run over the folder of all repos")
    return run, tree_differences(orig_root, per_repo_root, root)


def tree_differences(orig_root: Path, per_repo_root: Path, one_root: Path) -> list[str]:
    """The files whose bytes differ between the per-repo runs' tree and the one run's tree (or
    that only one of them holds), each with which run changed it and the first differing line."""
    names = {p.relative_to(one_root) for p in one_root.rglob("*") if p.is_file()}
    names |= {p.relative_to(per_repo_root) for p in per_repo_root.rglob("*") if p.is_file()}
    differences: list[str] = []
    for rel in sorted(names):
        one, each = one_root / rel, per_repo_root / rel
        if not one.is_file() or not each.is_file():
            differences.append(f"- `{rel}`: only in the {'per-repo runs' if each.is_file() else 'one run over the folder'}")
            continue
        a, b = each.read_bytes(), one.read_bytes()
        if a == b:
            continue
        orig = (orig_root / rel).read_bytes() if (orig_root / rel).is_file() else None
        which = ("only the one run over the folder changed it" if orig == a else
                 "only the per-repo run changed it" if orig == b else "both changed it, differently")
        first = next((i for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1) if x != y), None)
        at = f"; first difference at line {first}" if first else ""
        differences.append(f"- `{rel}`: {which}{at}")
    return differences


# ----------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--repos", type=Path, default=DEFAULT_REPOS)
    parser.add_argument("--tier", choices=[*TIERS, "all"], default="dev",
                        help="which repos (default dev; the held-out tier is chosen only by naming it)")
    parser.add_argument("--workdir", type=Path, help="keep the corpus and outputs here (default: a temp folder)")
    parser.add_argument("--pythonpath", help="PYTHONPATH for the tool (default: inherited)")
    parser.add_argument("--views", type=Path, help="only write the labelling views here and stop")
    parser.add_argument("--validate", action="store_true",
                        help="only check the manifest rows of the tier against the extracted files (runs no tool)")
    parser.add_argument("--root-run", action="store_true",
                        help="also run apply (safe) once over the folder of all repos and compare with the per-repo runs")
    parser.add_argument("--only", action="append", help="only this repo (owner/name), repeatable")
    parser.add_argument("--markdown", type=Path, help="also write the report as Markdown here")
    parser.add_argument("--oracle", action="append", default=[],
                        help="also compare with this repo's own port-to-0.4 commit (owner/name), repeatable")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    all_repos = read_repos(args.repos)
    repos = select_repos(all_repos, args.tier, args.only)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="real-corpus-"))
    orig_root = workdir / "orig"
    if orig_root.exists():
        shutil.rmtree(orig_root)
    file_counts: dict[str, int] = {}
    for repo in repos:
        file_counts[repo["repo"]] = extract(
            args.mirror_root, repo["repo"], repo["commit"], orig_root / repo_dir_name(repo["repo"])
        )

    manifest = read_manifest(args.manifest)
    if args.validate:
        problems = validate(repos, manifest, orig_root)
        wanted = {r["repo"] for r in repos}
        checked = sum(row["repo"] in wanted for row in manifest)
        print(f"validated {checked} manifest rows of {len(repos)} repos (tier {args.tier}): {len(problems)} problems")
        for problem in problems:
            print(f"- {problem}")
        for name, missing in sorted(MISSING_BLOBS.items()):
            print(f"note: {name}: blobs missing from the mirror (left out): {', '.join(missing)}")
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        return 1 if problems else 0

    if args.views:
        for path in sorted(orig_root.rglob("*")):
            if path.is_file():
                target = args.views / path.relative_to(orig_root)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(view_of(path) or "", encoding="utf-8")
        print(f"views of {sum(file_counts.values())} files written under {args.views}")
        return 0

    env = tool_env(args.pythonpath)
    outputs: dict[str, Path] = {}
    runs: list[Run] = []
    for mode, extra in (("safe", []), ("unsafe", ["--unsafe-fixes"])):
        root = workdir / mode
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(orig_root, root)
        outputs[mode] = root
        for repo in repos:
            name = repo_dir_name(repo["repo"])
            runs.append(run_tool(["apply", "--no-cache", *extra, name], root, env, f"apply {mode} {repo['repo']}"))
    for repo in repos:
        name = repo_dir_name(repo["repo"])
        runs.append(run_tool(["check", "--no-cache", "--unsafe-fixes", name], orig_root, env, f"check {repo['repo']}"))
    root_result = root_run(orig_root, outputs["safe"], workdir, env) if args.root_run else None

    wanted = {r["repo"] for r in repos}
    manifest = [row for row in manifest if row["repo"] in wanted]
    report = build_report(args, repos, file_counts, manifest, orig_root, outputs, runs, root_result)
    by_name = {r["repo"]: r for r in repos}
    oracle_lines: list[str] = []
    for name in args.oracle:
        if name not in by_name:
            raise SystemExit(f"--oracle {name}: not among the repos of tier {args.tier}")
        if by_name[name]["oracle_commit"]:
            oracle_lines += ["", *oracle_report(args.mirror_root, by_name[name], workdir, env)]
    if oracle_lines:
        report += "\n## Human oracle (maintainers' port-to-0.4 commits)\n" + "\n".join(oracle_lines) + "\n"
    print(report)
    if args.markdown:
        args.markdown.write_text(report, encoding="utf-8")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _pct(ok: int, total: int, digits: int = 0) -> str:
    return f"{100 * ok / total:.{digits}f}%" if total else "–"


def build_report(args, repos, file_counts, manifest, orig_root, outputs, runs, root_result=None) -> str:
    lines: list[str] = []
    add = lines.append
    tier_of = {r["repo"]: r.get("tier", "dev") for r in repos}
    tiers = [t for t in TIERS if t in set(tier_of.values())]
    tool_rows = [r for r in manifest if not is_other(r)]
    add(f"Corpus (tier {args.tier}): {len(repos)} repos, {sum(file_counts.values())} files (*.py, *.ipynb), "
        f"{len(manifest)} labelled sites ({sum(r['expected'] == 'fix' for r in tool_rows)} fix sites of the tool's "
        f"idioms, {sum(r['expected'] == 'keep' for r in manifest)} keep, "
        f"{sum(r['expected'] == 'fix' and is_other(r) for r in manifest)} `other` fix sites outside the headline).")
    add("")
    add("| repo | tier | category | commit | files | labelled sites (fix / keep / other) |")
    add("|---|---|---|---|---:|---:|")
    for repo in repos:
        rows = [r for r in manifest if r["repo"] == repo["repo"]]
        add(f"| {repo['repo']} | {repo.get('tier', '')} | {repo.get('category', '')} | {repo['commit'][:10]} | "
            f"{file_counts[repo['repo']]} | {len(rows)} ({sum(r['expected'] == 'fix' and not is_other(r) for r in rows)} / "
            f"{sum(r['expected'] == 'keep' for r in rows)} / {sum(r['expected'] == 'fix' and is_other(r) for r in rows)}) |")
    for name, missing in sorted(MISSING_BLOBS.items()):
        add(f"\n{name}: blobs missing from the mirror, left out of the corpus: {', '.join(missing)}")

    regions_cache: dict[tuple[str, str], tuple[dict[int, str], dict[int, str]]] = {}
    before_cache: dict[str, list[str]] = {}

    def regions(mode: str, rel: str) -> tuple[dict[int, str], dict[int, str]]:
        """The coarse and the fine :func:`changed_regions` of one file."""
        key = (mode, rel)
        if key not in regions_cache:
            before = view_of(orig_root / rel) or ""
            after = view_of(outputs[mode] / rel) or ""
            regions_cache[key] = changed_regions(before, after), changed_regions(before, after, fine=True)
            before_cache[rel] = before.splitlines()
        return regions_cache[key]

    headline: dict[str, list[str]] = defaultdict(list)
    missing_rows: list[str] = []
    for mode in ("safe", "unsafe"):
        per: dict[str, Counter] = defaultdict(Counter)
        per_tier: dict[str, Counter] = defaultdict(Counter)
        per_repo: dict[str, Counter] = defaultdict(Counter)
        other = Counter()
        broken_keeps: list[str] = []
        kept_by_call, kept_memo = 0, {}
        missed: Counter = Counter()
        missed_rows: list[str] = []
        other_rows: list[str] = []
        for row in manifest:
            rel = f"{repo_dir_name(row['repo'])}/{row['path']}"
            if not (orig_root / rel).is_file():
                if mode == "safe":
                    missing_rows.append(f"{row['repo']} {row['path']}:{row['line']}")
                continue
            reg, fine = regions(mode, rel)
            line_no = int(row["line"])
            before_lines = before_cache[rel]
            before_line = before_lines[line_no - 1] if line_no <= len(before_lines) else ""
            region = reg.get(line_no)
            if region is None and row["idiom"] in CONTINUED:
                region = continued_region(row["idiom"], before_lines, line_no, reg)
            ok = score_site(row, region, before_line, fine.get(line_no) if region is reg.get(line_no) else region)
            if not ok and region is None and row["expected"] == "fix" and row["idiom"] == "10 legacy autograd Function":
                ok = instance_call_kept(outputs[mode] / repo_dir_name(row["repo"]), row.get("note") or "", kept_memo)
                kept_by_call += ok
            shown = (f"- {row['repo']} `{row['path']}:{line_no}` ({row['idiom']}): `{before_line.strip()[:120]}`"
                     + (f" → `{region.strip()[:120]}`" if region is not None else " (unchanged)"))
            if row["expected"] == "fix" and is_other(row):
                other["fix"] += 1
                other["fix_ok"] += ok
                other["notebook"] += row["idiom"] != OTHER
                per_repo[row["repo"]]["other"] += 1
                per_repo[row["repo"]]["other_ok"] += ok
                other_rows.append(shown + (f" — {row['note'][:120]}" if row.get("note") else ""))
                continue
            tier = tier_of[row["repo"]]
            for counter in (per[row["idiom"]], per_tier[tier], per_repo[row["repo"]]):
                counter[row["expected"]] += 1
                counter[row["expected"] + "_ok"] += ok
            if ok:
                continue
            if row["expected"] == "fix":
                missed[row["idiom"]] += 1
                missed_rows.append(shown)
            else:
                # what replaced the region holds the line as it was, re-indented, or with `self.` → `ctx.` only
                around = [line.strip() for line in (region or "").splitlines()]
                moved_only = before_line.strip() in around
                renamed = not moved_only and "self." in before_line and re.sub(r"\bself\.", "ctx.", before_line.strip()) in around
                per_tier[tier]["keep_reindented"] += moved_only
                per_tier[tier]["keep_renamed"] += renamed
                broken_keeps.append(
                    f"- {row['repo']} `{row['path']}:{line_no}` ({row['idiom']}; {row['note']}): "
                    + ("its own text unchanged, only re-indented (a rewrite around it): " if moved_only else "")
                    + ("only its `self.` became `ctx.` (the legacy Function around it made static): " if renamed else "")
                    + f"`{before_line.strip()}` → `{(region or '').strip()[:160]}`"
                )
        add("")
        add(f"## {'apply (safe)' if mode == 'safe' else 'apply --unsafe-fixes'}")
        add("")
        for tier in tiers:
            c = per_tier[tier]
            text = (f"tier {tier}: {c['fix_ok']}/{c['fix']} fix sites fixed ({_pct(c['fix_ok'], c['fix'], 1)}), "
                    f"{c['keep'] - c['keep_ok']} of {c['keep']} keep sites changed"
                    + (f" ({c['keep_reindented']} of them only re-indented)" if c["keep_reindented"] else "")
                    + (f" ({c['keep_renamed']} of them only `self.` → `ctx.` in a Function made static)" if c["keep_renamed"] else ""))
            add(f"- **{text}**")
            headline[mode].append(text)
        if kept_by_call:
            add(f"- of the fixed sites, {kept_by_call} of idiom 10 are lines left as they were that build or call an instance "
                "of a legacy Function whose class the output gives a `__call__` running `.apply` (the note names the class)")
        add(f"- `other` (needs outside the tool's rewrites, not in the figures above): {other['fix_ok']} of "
            f"{other['fix']} sites changed ({other['notebook']} of them notebook rows noted `notebook (other)`)")
        add("")
        add("| idiom | fix sites fixed / total | % | keep sites unchanged / total |")
        add("|---|---:|---:|---:|")
        tot = Counter()
        for idiom in IDIOMS:
            c = per.get(idiom)
            if not c:
                continue
            tot.update(c)
            add(f"| {idiom} | {c['fix_ok']} / {c['fix']} | {_pct(c['fix_ok'], c['fix'])} | {c['keep_ok']} / {c['keep']} |")
        add(f"| **all but `other`** | **{tot['fix_ok']} / {tot['fix']}** | **{_pct(tot['fix_ok'], tot['fix'], 1)}** | "
            f"**{tot['keep_ok']} / {tot['keep']}** |")
        add(f"| `other` (not in the headline) | {other['fix_ok']} changed / {other['fix']} | | |")
        add("")
        add("| repo | tier | fix sites fixed / total | % | keep sites changed | `other` changed / total |")
        add("|---|---|---:|---:|---:|---:|")
        for repo in repos:
            c = per_repo[repo["repo"]]
            add(f"| {repo['repo']} | {tier_of[repo['repo']]} | {c['fix_ok']} / {c['fix']} | {_pct(c['fix_ok'], c['fix'])} | "
                f"{c['keep'] - c['keep_ok']} / {c['keep']} | {c['other_ok']} / {c['other']} |")
        if len(tiers) > 1:
            headline[mode].append(f"all tiers: {tot['fix_ok']}/{tot['fix']} ({_pct(tot['fix_ok'], tot['fix'], 1)}), "
                                  f"{tot['keep'] - tot['keep_ok']} keep sites changed")
        add("")
        add("Missed fix sites by idiom: " + (", ".join(f"{k} {v}" for k, v in missed.most_common()) or "none"))
        add("")
        add(f"<details><summary>Missed fix sites ({sum(missed.values())})</summary>")
        add("")
        lines.extend(missed_rows)
        add("")
        add("</details>")
        add("")
        add(f"<details><summary>`other` sites ({len(other_rows)}; outside the headline)</summary>")
        add("")
        lines.extend(other_rows)
        add("")
        add("</details>")
        add("")
        add(f"Keep sites that were changed ({len(broken_keeps)}):" if broken_keeps else "Keep sites that were changed: none")
        lines.extend(broken_keeps)

        failures: list[str] = []
        for path in sorted(outputs[mode].rglob("*")):
            if not path.is_file() or path.suffix not in (".py", ".ipynb"):
                continue
            rel = path.relative_to(outputs[mode])
            err = compile_error(path)
            if err:
                before_err = compile_error(orig_root / rel)
                failures.append(f"- `{rel}`: {err}" + (f" (input fails too: {before_err})" if before_err else " (**new**)"))
        new = sum("(**new**)" in f for f in failures)
        headline[mode].append(f"{new} outputs fail to compile that compiled before ({len(failures)} fail in all)")
        add("")
        add(f"Outputs that fail to compile: {len(failures)} ({new} new; the rest failed as input too)")
        lines.extend(failures)

    add("")
    add("## Tool runs")
    add("")
    crashes = 0
    over_budget = 0
    all_runs = list(runs) + ([root_result[0]] if root_result else [])
    for run in all_runs:
        summary = [l for l in run.stderr.splitlines() if "scanned" in l][-1:] or [f"exit {run.returncode}"]
        add(f"- {run.name}: exit {run.returncode}; {summary[0].strip()}")
        for failed in (l for l in run.stderr.splitlines() if l.startswith("failed:")):
            add(f"  - {failed.strip()[:200]}")
        for skipped in (l for l in run.stderr.splitlines() if l.startswith("skipped:") and "limit" in l):
            over_budget += 1  # a file over the per-file time or memory budget: left unmigrated
            add(f"  - OVER BUDGET: {skipped.strip()[:200]}")
        for c in run.crash_lines:
            crashes += 1
            add(f"  - CRASH: {c}")
    add("")
    add(f"Crash lines (exit status other than 0/1, tracebacks, internal errors): {crashes}")
    add(f"Files left unmigrated for going over the per-file time or memory budget (all runs): {over_budget}")
    root_note = ""
    if root_result:
        _, differences = root_result
        add("")
        add("## One run over the folder of all repos (`--root-run`)")
        add("")
        add(f"`apply` (safe) once over the folder holding the {len(repos)} repos side by side, compared byte for byte "
            f"with the per-repo safe runs: {len(differences)} files differ" + (":" if differences else "."))
        lines.extend(differences)
        root_note = f"; root run: {len(differences)} files differ from the per-repo runs"
    if missing_rows:
        add("")
        add("Manifest rows whose file is missing from the corpus: " + ", ".join(missing_rows))
    add("")
    add("Headline (fix sites of the tool's idioms, `other` aside): "
        + "; ".join(f"{mode}: " + ", ".join(parts) for mode, parts in headline.items())
        + f"; {crashes} crash lines; {over_budget} files over budget{root_note}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
