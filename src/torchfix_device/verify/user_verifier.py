"""``torchfix-device verify my_models.py``: a user's own model file, before and after the rewrite.

The file is rewritten with every codemod, then the original and the rewrite each run in one
fresh interpreter (one pair; four interpreters only on CUDA, which the CPU runs must not see),
which builds and calls each of its models on DEV and then on the CPU
(:mod:`~torchfix_device.verify.user_harness`). A model is as expected when, after the rewrite,
it runs on DEV with every parameter and buffer there, and gives the same outputs on the CPU as
before. Unlike a fixture, the original need not fail: a user's model may have nothing to fix.
Each model gets a verdict in plain words.

One difference of the CPU outputs is the rewrite's documented intent, and is checked, not
assumed: TFD004 registers layers kept in a plain list or dict, so ``model.eval()`` now reaches
them (a BatchNorm there used batch statistics, a Dropout dropped, in "eval" mode). When the
rewrite's outputs are exactly those of the original with those layers put in eval mode too, the
model is as expected and the verdict says why the numbers changed; any other difference fails.

A file of a folder that holds no model, or whose original cannot be imported (a script reading
its files or data at its top level), is listed as not run: there is nothing to compare. A file
with no ``class`` statement and no ``make_model`` (nor ``type``/``exec``/``eval`` calls that
could make a class) is not imported at all: it cannot hold a model.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from torchfix_device.verify.contract import ModelSpec
from torchfix_device.verify.verifier import LEG_TIMEOUT_S, device_groups, rewrite_model, run_interpreter

INTENDED_EVAL_MODE = (
    "TFD004 registers the layers kept in a plain list or dict, so eval() now reaches them; "
    "with them in eval mode in the original too, the outputs are the same"
)
NO_MODEL = "no model in this file: nn.Module classes with a forward(), or make_model()"


@dataclass
class UserModelReport:
    """One model of a user's file."""

    name: str
    path: str
    device: str
    applied: list[str] = field(default_factory=list)
    """The codemods that changed the file."""
    problem: str | None = None
    """Why the file could not be rewritten or run at all."""
    skipped: str | None = None
    """Why this model was not built (its constructor needs arguments, ...)."""
    inputs: str | None = None
    runs: dict[str, dict] = field(default_factory=dict)
    """``original on DEV``, ``rewrite on DEV``, ``original on cpu``, ``rewrite on cpu`` → the
    harness's record (``status``: ran, built, failed; ``error``)."""
    cpu_equal: bool | None = None
    cpu_differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    intended_change: str | None = None
    """Why the outputs differ, when the difference was shown to be the rewrite's intent."""

    def run(self, code: str, cpu: bool = False) -> dict | None:
        return self.runs.get(f"{code} on {'cpu' if cpu else self.device}")

    @property
    def output_differences(self) -> list[str]:
        """CPU differences in what the model computes (a ``state_dict`` gaining keys is a note)."""
        return [d for d in self.cpu_differences if not d.startswith("state_dict:")]

    @property
    def ok(self) -> bool | None:
        """As expected; None for a model that was not run (skipped)."""
        if self.skipped is not None:
            return None
        if self.problem is not None:
            return False
        after_dev, before_cpu, after_cpu = self.run("rewrite"), self.run("original", True), self.run("rewrite", True)
        if not (after_dev and before_cpu and after_cpu):
            return False
        if any(r["status"] == "failed" for r in (after_dev, before_cpu, after_cpu)):
            return False
        return not self.output_differences or self.intended_change is not None

    def verdict(self) -> str:
        """What happened, in plain words."""
        dev = self.device
        if self.skipped is not None:
            return f"not run: {self.skipped}"
        if self.problem is not None:
            return f"not verified: {self.problem}"
        before_dev, after_dev = self.run("original"), self.run("rewrite")
        before_cpu, after_cpu = self.run("original", True), self.run("rewrite", True)
        if not (before_dev and after_dev and before_cpu and after_cpu):
            return "not verified: a run gave no result"
        if before_cpu["status"] == "failed":
            hint = "; give it inputs with example_inputs()" if "guessed" in (self.inputs or "") else ""
            return f"not verified: it fails on the CPU before the rewrite ({_error(before_cpu)}){hint}"
        if after_dev["status"] == "failed":
            return f"the rewrite fails on {dev}: {_error(after_dev)}"
        if after_cpu["status"] == "failed":
            return f"the rewrite fails on the CPU: {_error(after_cpu)}"
        if self.output_differences and self.intended_change is None:
            return "the rewrite changes the outputs on the CPU: " + "; ".join(self.output_differences)
        called = "runs" if after_dev["status"] == "ran" else "is built and moved (not called: no inputs; define example_inputs())"
        if before_dev["status"] == "failed":
            why = "a device error" if (before_dev.get("error") or {}).get("device_error") else _error(before_dev)
            before = f"fixed: before the rewrite it fails on {dev} ({why}); now it {called} there"
        else:
            before = f"{called} on {dev} before and after the rewrite"
        same = "same outputs on the CPU" if after_cpu["status"] == "ran" else "nothing to compare on the CPU"
        if self.output_differences:
            same = f"the outputs on the CPU differ, as intended ({'; '.join(self.output_differences)}): {self.intended_change}"
        return f"{before}; {same}"

    def to_json(self) -> dict:
        return {**asdict(self), "ok": self.ok, "verdict": self.verdict()}


def _error(record: dict) -> str:
    error = record.get("error") or {}
    text = " ".join(f"{error.get('type', 'Error')}: {error.get('message', '')}".split())
    return text if len(text) <= 160 else text[:159] + "…"


def verify_user_file(spec: ModelSpec, device: str, *, timeout: float = LEG_TIMEOUT_S) -> list[UserModelReport]:
    """Every model of one user file, verified on ``device`` and on the CPU."""
    path = spec.path.resolve()
    new_text, applied, problem = rewrite_model(spec)
    if problem is not None or new_text is None:
        return [UserModelReport(spec.name, str(path), device, applied, problem=problem or "the rewrite failed")]
    if not may_define_a_model(path):
        return [UserModelReport(spec.name, str(path), device, applied, skipped=NO_MODEL)]
    with tempfile.TemporaryDirectory(prefix=f"tfd-verify-{spec.name}-") as tmp:
        workdir = Path(tmp)
        rewritten = workdir / "rewrite" / path.name
        rewritten.parent.mkdir()
        rewritten.write_text(new_text, encoding="utf-8")
        plan = [(code, file, group) for group in device_groups(device) for code, file in (("original", path), ("rewrite", rewritten))]
        with ThreadPoolExecutor(max_workers=max(1, min(len(plan), os.cpu_count() or 1))) as pool:
            futures = [
                (code, group, pool.submit(
                    run_interpreter, code, file, group, workdir, module_name=spec.name, sys_path=path.parent,
                    models="auto", timeout=timeout,
                ))
                for code, file, group in plan
            ]
            done = [(code, group, *future.result()) for code, group, future in futures]
        return _reports(spec.name, str(path), device, applied, done)


def may_define_a_model(path: Path) -> bool:
    """Whether importing ``path`` may give a model (a class defined there, or ``make_model``):
    False for a file with no ``class`` statement, no ``make_model`` and no ``type``/``exec``/
    ``eval`` call (its import, in fresh interpreters that load torch, would find none)."""
    import ast

    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return True  # let the import say what is wrong
    if "make_model" in text:
        return True
    return any(
        isinstance(node, ast.ClassDef)
        or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("type", "exec", "eval"))
        for node in ast.walk(tree)
    )


def _reports(name: str, path: str, device: str, applied: list[str], done: list) -> list[UserModelReport]:
    reports: dict[str, UserModelReport] = {}
    outputs: dict[tuple[str, str], Path] = {}
    order: list[str] = []
    for code, group, legs, log, outputs_dir in done:
        for dev in group:
            where = f"{code} on {'cpu' if dev == 'cpu' else device}"
            if legs is None:  # the harness crashed or timed out: nothing of this file can be judged
                return [UserModelReport(name, path, device, applied, problem=f"{where}: {log.splitlines()[0]}")]
            leg = legs[dev]
            if leg["status"] == "failed":
                error = _error(leg)
                if code == "original" and not (leg.get("error") or {}).get("device_error"):
                    return [UserModelReport(name, path, device, applied, skipped=(
                        f"importing it fails before the rewrite ({where}: {error}); verify imports each file, "
                        "running its top level: keep models in modules of their own, or guard a script with "
                        "`if __name__ == \"__main__\":`"
                    ))]
                return [UserModelReport(name, path, device, applied, problem=f"the file fails to import ({where}): {error}")]
            order = order or leg.get("order", [])
            for skip in leg.get("skipped", []):
                reports.setdefault(skip["model"], UserModelReport(skip["model"], path, device, applied, skipped=skip["reason"]))
            for record in leg["models"]:
                report = reports.setdefault(record["model"], UserModelReport(record["model"], path, device, applied))
                report.runs[where] = record
                report.inputs = report.inputs or record.get("inputs")
                if dev == "cpu" and (outputs_dir / f"{record['model']}.pt").exists():
                    outputs[(record["model"], code)] = outputs_dir / f"{record['model']}.pt"
    if not reports:
        return [UserModelReport(name, path, device, applied, skipped=NO_MODEL)]
    from torchfix_device.verify.compare import compare_saved, explained_by_registration

    for model, report in reports.items():
        before, after = outputs.get((model, "original")), outputs.get((model, "rewrite"))
        if before is not None and after is not None:
            comparison = compare_saved(before, after)
            report.cpu_equal, report.cpu_differences = comparison.equal, comparison.differences
            outputs_only = all(d.startswith(("output ", "state_dict:")) for d in report.cpu_differences)
            if (report.output_differences and outputs_only and "TFD004" in applied
                    and explained_by_registration(before, after)):
                report.intended_change = INTENDED_EVAL_MODE
            report.notes += [f"{d} (a checkpoint saved before the rewrite lacks them)" for d in comparison.differences if d.startswith("state_dict:")]
    rank = {name: index for index, name in enumerate(order)}
    return sorted(reports.values(), key=lambda report: rank.get(report.name, len(rank)))  # as the file defines them
