"""A fix that becomes possible only after another fix (a later pass of the engine) is reported as
the fix it is, at its place in the original file: the run on the original had left that place
for review (faster-rcnn's ``proposal_target_layer_cascade.py``: TFD003 said "the module defines
no parameter or buffer" while the output took the device of the buffer TFD007 had just
registered), and the summary did not count the fix."""

from __future__ import annotations

from pathlib import Path

from differential import compare, run_sources
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.engine.lines import LateFixes, unchanged_lines
from torchfix_device.finding import Finding

BUFFER_FIRST = '''import torch
import torch.nn as nn


class Targets(nn.Module):
    def __init__(self, means):
        super(Targets, self).__init__()
        self.means = torch.FloatTensor(means)

    def offsets(self, batch_size, width):
        return torch.arange(0, batch_size) * width

    def forward(self, boxes):
        return boxes - self.means + self.offsets(boxes.size(0), 4).view(-1, 1).float()


model = Targets([0.1, 0.2])
print(model(torch.ones(3, 2)))
'''


def test_a_fix_made_possible_by_an_earlier_fix_is_listed_as_a_fix_at_its_place() -> None:
    out = transform_source(BUFFER_FIRST, all_codemods(), filename="targets.py")
    assert "torch.arange(0, batch_size, device=self.means.device) * width" in out.text
    listed = [(f.line, f.column, f.code, f.fixed) for f in out.findings]
    assert listed == [(8, 9, "TFD007", True), (11, 16, "TFD003", True)], out.findings
    (late,) = [f for f in out.findings if f.code == "TFD003"]
    assert "device=self.means.device" in late.message and "no parameter or buffer" not in late.message


def test_the_summary_counts_it(cli, tmp_path: Path) -> None:
    (tmp_path / "targets.py").write_text(BUFFER_FIRST, encoding="utf-8")
    out = cli("check", "targets.py", cwd=tmp_path)
    text = out.stdout.decode()
    assert out.returncode == 1, text + out.stderr.decode()
    assert "targets.py:11:16: TFD003 [*]" in text and "manual review" not in text
    assert "fixes: TFD003 ×1, TFD007 ×1" in out.stderr.decode() + text
    assert "left for review" not in out.stderr.decode() + text


def test_the_rewrite_behaves_as_the_original_on_both_legs() -> None:
    after = transform_source(BUFFER_FIRST, all_codemods(), filename="targets.py").text
    jobs = [{"source": source, "leg": leg, "filename": "targets.py"} for leg in ("cpu", "gpu") for source in (BUFFER_FIRST, after)]
    cpu_before, cpu_after, gpu_before, gpu_after = run_sources(jobs)
    assert cpu_before["error"] is None, cpu_before
    assert compare(cpu_before, cpu_after) == [] and compare(gpu_before, gpu_after) == []


def test_unchanged_lines_map_a_rewrite_back_to_the_file() -> None:
    text = "a\nb\nc\nd\n"
    new = "device = x\na\nB\nc\nd\n"  # a line inserted before, one changed
    assert unchanged_lines(text, new) == {2: 1, 4: 3, 5: 4}
    assert unchanged_lines(text, text) == {1: 1, 2: 2, 3: 3, 4: 4}
    assert unchanged_lines("a\nb", "a\nb") == {1: 1, 2: 2}  # no final newline


def _finding(line: int, code: str = "TFD003", fixed: bool = True, message: str = "fixed") -> Finding:
    return Finding(line=line, column=5, code=code, message=message, fixed=fixed)


def test_a_late_fix_replaces_a_review_item_and_never_a_fix_and_one_on_a_new_line_is_dropped() -> None:
    text = "a\nb\nc\nd\n"
    late = LateFixes(text, set(), set())
    late.keep([_finding(3), _finding(1, code="TFD001")], [("TFD012", 5, 1)], "x\na\nb\nc\nd\n")  # one line inserted
    assert set(late.fixes) == {("TFD003", 2, 5)}  # the fix on the inserted line has no place in text
    assert late.resolved == {("TFD012", 4, 1)}
    review, fix_elsewhere = _finding(2, fixed=False, message="review"), _finding(4, code="TFD005")
    assert late.merged({review, fix_elsewhere}) == {_finding(2), fix_elsewhere}
    listed_fix = _finding(2, message="the original's own fix")
    assert late.merged({listed_fix}) == {listed_fix}
    assert LateFixes(text, set(), set()).merged({review}) == {review}


def test_a_fix_the_run_on_the_original_listed_already_needs_no_comparison_of_lines(monkeypatch) -> None:
    from torchfix_device.engine import lines

    text = "a\nb\nc\nd\n"
    listed = {_finding(2, message="the original's own fix")}
    compared = []
    monkeypatch.setattr(lines, "_unchanged", lambda *args: compared.append(args) or {})
    late = LateFixes(text, listed, {("TFD012", 3, 5)})
    late.keep([_finding(3)], [("TFD012", 4, 5)], "x\na\nb\nc\nd\n")  # the same places, a line lower
    assert compared == [] and late.fixes == {} and late.resolved == set()
    late.keep([_finding(4)], [], "x\na\nb\nc\nd\n")  # `c`: listed nowhere
    assert len(compared) == 1
