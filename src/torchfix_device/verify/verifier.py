"""One model: rewrite it, run original and rewrite in fresh interpreters, and judge.

Four legs, run by ``python -m torchfix_device.verify.harness`` in two new interpreters (the
original's and the rewrite's, each on DEV and then on the CPU; four on CUDA, which the CPU legs
must not see):

==================  ==========================================================================
original on DEV     must FAIL with a device error — the proof that the fixture reproduces the
                    bug; a success or any other failure makes it a BROKEN FIXTURE
rewrite on DEV      must RUN, leave every parameter and buffer on DEV, and need no legacy shim
                    (no ``.cuda()``, no ``loss.data[0]``)
original on CPU     both must run; with the same seeds they must give the same outputs and
rewrite on CPU      ``state_dict`` (``compare``), unless the model declares ``INTENDED_CHANGE``
==================  ==========================================================================

and the codemods the model declares in ``CODEMODS`` must each have fixed something in it.

Every leg sees only its own device: when DEV is not CUDA, ``CUDA_VISIBLE_DEVICES`` is emptied, so
code that asks ``torch.cuda.is_available()`` gets the CPU rather than a GPU beside the target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torchfix_device
from torchfix_device.verify.contract import ModelSpec, read_spec
from torchfix_device.verify.legacy import MODERN_FORBIDDEN
from torchfix_device.verify import warm

LEG_TIMEOUT_S = 180


@dataclass
class Leg:
    """What one harness run reported."""

    code: str
    """``original`` or ``rewrite``."""
    device: str
    status: str = "not run"
    """``ran``, ``failed`` (the model raised, or left a tensor off the device), ``crashed`` (the
    harness itself broke), ``timeout``, or ``not run``."""
    error_type: str | None = None
    message: str | None = None
    where: str | None = None
    device_error: bool = False
    shims: dict[str, int] = field(default_factory=dict)
    """How often each stand-in or legacy shim was used (see ``legacy`` and ``checker``)."""
    seconds: float | None = None
    outputs: list[dict] = field(default_factory=list)
    model: dict | None = None
    log: str = ""
    """The end of the interpreter's stdout and stderr (the model's prints, a crash's traceback)."""

    @property
    def forbidden_shims(self) -> dict[str, int]:
        return {k: v for k, v in self.shims.items() if k in MODERN_FORBIDDEN and v}

    def short_error(self, width: int = 70) -> str:
        text = f"{self.error_type}: {self.message}" if self.error_type else self.status
        text = " ".join(text.split())
        return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class ModelReport:
    name: str
    path: str
    device: str
    declared: list[str]
    applied: list[str] = field(default_factory=list)
    intended_change: str | None = None
    problems: list[str] = field(default_factory=list)
    """Contract problems and rewrite failures (each makes the model fail)."""
    original_dev: Leg | None = None
    rewrite_dev: Leg | None = None
    original_cpu: Leg | None = None
    rewrite_cpu: Leg | None = None
    cpu_equal: bool | None = None
    cpu_differences: list[str] = field(default_factory=list)

    # -- verdicts -------------------------------------------------------------------------------
    @property
    def missing_codemods(self) -> list[str]:
        return [c for c in self.declared if c not in self.applied]

    @property
    def codemods_ok(self) -> bool:
        return not self.problems and not self.missing_codemods

    @property
    def original_ok(self) -> bool:
        leg = self.original_dev
        return leg is not None and leg.status == "failed" and leg.device_error

    @property
    def broken_fixture(self) -> bool:
        """The original does not show the bug on DEV, or does not run on the CPU."""
        dev, cpu = self.original_dev, self.original_cpu
        return (dev is not None and dev.status in ("ran", "failed") and not self.original_ok) or (
            cpu is not None and cpu.status in ("failed",)
        )

    @property
    def rewrite_ok(self) -> bool:
        leg = self.rewrite_dev
        return leg is not None and leg.status == "ran" and not leg.forbidden_shims

    @property
    def cpu_ok(self) -> bool:
        return self.cpu_equal is True or (self.cpu_equal is False and self.intended_change is not None)

    @property
    def ok(self) -> bool:
        return self.codemods_ok and self.original_ok and self.rewrite_ok and self.cpu_ok

    def to_json(self) -> dict:
        data = asdict(self)
        for key in ("original_dev", "rewrite_dev", "original_cpu", "rewrite_cpu"):
            if data[key] is not None:
                data[key].pop("code", None)
        data.update(
            missing_codemods=self.missing_codemods,
            codemods_ok=self.codemods_ok,
            original_ok=self.original_ok,
            broken_fixture=self.broken_fixture,
            rewrite_ok=self.rewrite_ok,
            cpu_ok=self.cpu_ok,
            ok=self.ok,
        )
        return data


# -- running the harness ------------------------------------------------------------------------
def _env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(torchfix_device.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = "0"
    if not device.startswith("cuda"):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def device_groups(device: str) -> list[list[str]]:
    """The devices each interpreter runs: DEV and the CPU in one (one pair of interpreters per
    model: original and rewrite), except for CUDA, which the CPU run must not see (code asking
    ``torch.cuda.is_available()`` would take the GPU)."""
    return [[device], ["cpu"]] if device.startswith("cuda") else [[device, "cpu"]]


def run_interpreter(
    code: str,
    model_file: Path,
    devices: list[str],
    workdir: Path,
    *,
    module_name: str,
    sys_path: Path,
    models: str = "contract",
    timeout: float = LEG_TIMEOUT_S,
) -> tuple[dict | None, str, Path]:
    """Run ``model_file`` on ``devices`` in one fresh interpreter: the harness's record of each
    device (None when the harness crashed or timed out), the end of its output (or why it has
    none), and the folder of the CPU outputs."""
    stem = f"{code}-{'-'.join(d.replace(':', '_') for d in devices)}"
    result_file = workdir / f"{stem}.json"
    outputs_dir = workdir / stem
    outputs_dir.mkdir(parents=True, exist_ok=True)
    arguments = [
        str(model_file), *[arg for device in devices for arg in ("--device", device)],
        "--result", str(result_file), "--name", module_name, "--sys-path", str(sys_path),
        "--outputs-dir", str(outputs_dir), "--models", models,
    ]
    limit = timeout * len(devices)
    env = _env(devices[0])
    server = warm.server_for(env) if warm.usable(devices) else None
    if server is not None:  # forked from an interpreter that has imported torch
        out, err = workdir / f"{stem}.stdout", workdir / f"{stem}.stderr"
        returncode = server.run(arguments, workdir, env, out, err, limit)
        log = _tail(*(p.read_bytes() if p.exists() else b"" for p in (out, err)))
        if returncode is None:
            why = f"Timeout: no result after {limit:.0f} s" if server.alive else "HarnessError: the interpreter ended"
            return None, f"{why}\n{log}", outputs_dir
    else:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "torchfix_device.verify.harness", *arguments], cwd=workdir, env=env,
                capture_output=True, text=True, errors="replace", timeout=limit, stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            return None, f"Timeout: no result after {limit:.0f} s\n" + _tail(exc.stdout or b"", exc.stderr or b""), outputs_dir
        returncode, log = proc.returncode, _tail(proc.stdout, proc.stderr)
    if returncode != 0 or not result_file.exists():
        last = (log.strip().splitlines() or ["no output"])[-1]
        return None, f"HarnessError: the harness exited with {returncode}: {last}\n{log}", outputs_dir
    return json.loads(result_file.read_text(encoding="utf-8"))["legs"], log, outputs_dir


def _leg(code: str, device: str, legs: dict | None, log: str, outputs_dir: Path) -> tuple[Leg, Path | None]:
    """The :class:`Leg` of ``device`` in one interpreter's records, and its outputs file."""
    leg = Leg(code=code, device=device, log=log)
    if legs is None:
        kind, _, message = log.partition(": ")
        leg.status = "timeout" if kind == "Timeout" else "crashed"
        leg.error_type, leg.message = kind, message.splitlines()[0] if message else kind
        return leg, None
    record = legs[device]
    leg.status = record["status"]
    leg.shims = record.get("shims", {})
    leg.seconds = record.get("seconds")
    leg.outputs = record.get("outputs", [])
    leg.model = record.get("model")
    error = record.get("error")
    if error:
        leg.error_type, leg.message, leg.where = error["type"], error["message"], error.get("where")
        leg.device_error = bool(error.get("device_error"))
        leg.log = (leg.log + "\n" + error.get("traceback", "")).strip()[-4000:]
    outputs_file = outputs_dir / f"outputs-{device.replace(':', '_')}.pt"
    return leg, outputs_file if leg.status == "ran" and outputs_file.exists() else None


def _tail(*parts: str | bytes, limit: int = 4000) -> str:
    text = "".join(p.decode("utf-8", "replace") if isinstance(p, bytes) else p for p in parts)
    return text[-limit:]


# -- one model ----------------------------------------------------------------------------------
def rewrite_model(spec: ModelSpec) -> tuple[str | None, list[str], str | None]:
    """The rewritten text, the codes that fixed something, and an error message if any."""
    import libcst

    from torchfix_device.codemods.catalog import all_codemods
    from torchfix_device.engine import transform_source
    from torchfix_device.results import InternalError

    text = spec.path.read_text(encoding="utf-8")
    try:
        output = transform_source(text, all_codemods(), filename=str(spec.path))
    except libcst.ParserSyntaxError as exc:
        return None, [], f"the rewrite failed: syntax error at line {exc.raw_line}: {exc.message}"
    except InternalError as exc:
        return None, [], f"the rewrite failed: {exc}"
    except Exception as exc:  # a codemod bug: report it on this model, verify the others
        return None, [], f"the rewrite failed: internal error: {type(exc).__name__}: {exc}"
    applied = sorted({f.code for f in output.findings if f.fixed})
    return output.text, applied, None


def verify_model(
    path: Path,
    device: str,
    *,
    jobs: int | None = None,
    timeout: float = LEG_TIMEOUT_S,
    keep: Path | None = None,
) -> ModelReport:
    """Verify one model file on ``device`` (and on the CPU). Never raises for a bad model.

    ``keep``: a folder to leave the rewritten file and the legs' results in (default: a
    temporary folder, removed afterwards).
    """
    if device.split(":")[0] == "cpu":
        raise ValueError("the target device cannot be the CPU: the CPU is the reference leg")
    path = Path(path).resolve()
    spec = read_spec(path)
    report = ModelReport(
        name=spec.name, path=str(path), device=device, declared=list(spec.codemods),
        intended_change=spec.intended_change, problems=list(spec.problems),
    )
    with tempfile.TemporaryDirectory(prefix=f"tfd-verify-{spec.name}-") as tmp:
        workdir = Path(keep) if keep is not None else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        new_text = None
        if _readable(spec):
            new_text, report.applied, error = rewrite_model(spec)
            if error:
                report.problems.append(error)
        rewritten = workdir / "rewrite" / path.name
        legs: list[tuple[str, Path]] = [("original", path)]
        if new_text is not None:
            rewritten.parent.mkdir(exist_ok=True)
            rewritten.write_text(new_text, encoding="utf-8")
            legs.append(("rewrite", rewritten))
        plan = [(code, file, group) for group in device_groups(device) for code, file in legs]
        workers = max(1, min(len(plan), jobs or os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [
                (code, group, pool.submit(
                    run_interpreter, code, file, group, workdir, module_name=spec.name, sys_path=path.parent, timeout=timeout,
                ))
                for code, file, group in plan
            ]
        outputs: dict[str, Path | None] = {}
        for code, group, future in futures:
            records, log, outputs_dir = future.result()
            for dev in group:
                leg, outputs_file = _leg(code, dev, records, log, outputs_dir)
                setattr(report, f"{code}_{'cpu' if dev == 'cpu' else 'dev'}", leg)
                if dev == "cpu":
                    outputs[code] = outputs_file
        before, after = outputs.get("original"), outputs.get("rewrite")
        if before is not None and after is not None:
            from torchfix_device.verify.compare import compare_saved

            comparison = compare_saved(before, after)
            report.cpu_equal, report.cpu_differences = comparison.equal, comparison.differences
    return report


def _readable(spec: ModelSpec) -> bool:
    """Contract problems other than unreadable/unparsable files still allow a rewrite."""
    return not any(p.startswith(("cannot read", "line ")) for p in spec.problems)
