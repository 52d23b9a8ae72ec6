"""One untimed Nsight Compute pass per passed shape (ranked mode, where ``ncu`` exists).

``ncu --clock-control none`` keeps the clocks as they were for timing; ``--nvtx-include sbprof/``
profiles only the submission's kernels of the one profiled call. The ``.ncu-rep`` is kept as an
artifact; the report gets a compact ``KernelProfile`` per kernel parsed from
``ncu --import ... --csv --page raw``. Any failure becomes ``available=False`` with its message,
never a failed evaluation.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evaluator.harness.parent import child_env
from evaluator.harness.request import EvaluationRequest
from evaluator.ptx.evidence import parse_opcode_instances
from evaluator.report import KernelProfile, ProfileReport, WarpStall

SECTIONS = (
    "SpeedOfLight",
    "LaunchStats",
    "Occupancy",
    "MemoryWorkloadAnalysis",
    "WarpStateStats",
    "InstructionStats",
)
#: Seconds one shape's profile may take at most.
SHAPE_LIMIT_S = 180.0
_STALL = re.compile(r"^smsp__average_warp(?:s|_latency)_issue_stalled_(\w+?)(?:_per_issue_active)?\.ratio$")


_TIME_UNITS = {
    "ns": 1e-3,
    "nsecond": 1e-3,
    "us": 1.0,
    "usecond": 1.0,
    "ms": 1e3,
    "msecond": 1e3,
    "s": 1e6,
    "second": 1e6,
}
_BYTE_UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6}


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except (ValueError, AttributeError):
        return None


@dataclass
class _Row:
    """One kernel's row of the raw page, with the units row beside it."""

    values: dict[str, str]
    units: dict[str, str]

    def metric(self, *names: str) -> float | None:
        for name in names:
            value = _number(self.values.get(name, ""))
            if value is not None:
                return value
        return None

    def scaled(self, name: str, table: dict[str, float]) -> float | None:
        value = self.metric(name)
        unit = self.units.get(name, "").split("/")[0].strip()
        return value * table[unit] if value is not None and unit in table else None


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """KernelProfiles from ncu's raw page as CSV (``--csv --page raw``, live or ``--import``).

    A header row, an optional units row (ncu prints one; its ID cell is empty), one row per kernel;
    other lines (``==PROF==`` messages) are skipped, and a repeated header is ignored."""
    rows = list(csv.reader(io.StringIO(text)))
    header_index = next((i for i, row in enumerate(rows) if "Kernel Name" in row), None)
    if header_index is None:
        return []
    header = rows[header_index]
    units: dict[str, str] = {}
    kernels = []
    for values in rows[header_index + 1:]:
        if len(values) != len(header) or values == header:
            continue
        row = dict(zip(header, values))
        if _number(row.get("ID", "")) is None and "ID" in row:
            units = row
            continue
        kernels.append(_kernel(_Row(row, units)))
    return kernels


def _kernel(row: _Row) -> KernelProfile:
    registers = row.metric("launch__registers_per_thread")
    shared = row.scaled("launch__shared_mem_per_block", _BYTE_UNITS)
    if shared is None:
        parts = [
            row.scaled(name, _BYTE_UNITS)
            for name in ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
        ]
        shared = (
            sum(part for part in parts if part is not None) if any(p is not None for p in parts) else None
        )
    launch_id = row.metric("ID")
    return KernelProfile(
        name=row.values.get("Kernel Name", "?")[:300],
        launch_id=int(launch_id) if launch_id is not None else None,
        duration_us=row.scaled("gpu__time_duration.sum", _TIME_UNITS),
        sm_throughput_pct=row.metric("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        dram_throughput_pct=row.metric(
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        ),
        achieved_occupancy_pct=row.metric("sm__warps_active.avg.pct_of_peak_sustained_active"),
        l2_hit_rate_pct=row.metric("lts__t_sector_hit_rate.pct"),
        registers_per_thread=int(registers) if registers is not None else None,
        shared_memory_bytes=int(shared) if shared is not None else None,
        grid=row.values.get("Grid Size") or row.values.get("launch__grid_size"),
        block=row.values.get("Block Size") or row.values.get("launch__block_size"),
        top_stalls=_stalls(row.values),
        executed_instructions=_instructions(row),
    )


def _stalls(row: dict[str, str]) -> list[WarpStall]:
    values: dict[str, float] = {}
    for column, text in row.items():
        match = _STALL.match(column)
        value = _number(text) if match else None
        reason = match.group(1) if match else ""
        if value and value > 0 and reason != "selected" and not reason.endswith("_not_issued"):
            values[reason] = values.get(reason, 0.0) + value
    total = sum(values.values())
    top = sorted(values.items(), key=lambda item: -item[1])[:4]
    return [WarpStall(reason=name, percent=100.0 * value / total) for name, value in top] if total else []


def _instructions(row: _Row) -> dict[str, int]:
    """Executed SASS instructions per opcode (needs --print-metric-instances), plus the total."""
    counts = parse_opcode_instances(row.values.get("sass__inst_executed_per_opcode", ""))
    total = row.metric("smsp__inst_executed.sum", "inst_executed")
    if total is not None:
        counts["total"] = int(total)
    return counts


def _run(
    command: list[str], timeout: float, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, "")


def _import(ncu: str, report_path: Path, scratch: Path) -> list[KernelProfile]:
    """Parse the report's raw page; add per-opcode counts where this ncu prints metric instances."""
    base = [ncu, "--import", str(report_path), "--csv", "--page", "raw"]
    kernels = parse_raw_csv(_run(base, 120, dict(os.environ), scratch).stdout)
    try:
        detailed = _run([*base, "--print-metric-instances", "details"], 120, dict(os.environ), scratch)
        per_opcode = parse_raw_csv(detailed.stdout) if detailed.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        per_opcode = []
    if len(per_opcode) == len(kernels):
        for kernel, extra in zip(kernels, per_opcode, strict=True):
            kernel.executed_instructions = {**extra.executed_instructions, **kernel.executed_instructions}
    return kernels


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run(
            [ncu, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "ncu"
    return f"ncu {out.strip().splitlines()[-1].split()[-1]}" if out.strip() else "ncu"


def profile_shape(
    request: EvaluationRequest, shape_id: str, ncu: str, folder: Path, scratch: Path, limit: float
) -> ProfileReport:
    config = scratch / f"{shape_id}.json"
    config.write_text(
        json.dumps(
            {
                "problem": request.problem,
                "file": str(Path(request.file).resolve()),
                "language": request.language,
                "spec": str(Path(request.spec).resolve()) if request.spec else None,
                "shape": shape_id,
            }
        )
    )
    report_path = folder / f"{shape_id}.ncu-rep"
    command = [
        ncu,
        "--clock-control",
        "none",
        "--nvtx",
        "--nvtx-include",
        "sbprof/",
        "--target-processes",
        "all",
        "--force-overwrite",
        "--export",
        str(report_path),
    ]
    for section in SECTIONS:
        command += ["--section", section]
    command += [sys.executable, "-m", "evaluator.harness.profile_child", str(config)]
    try:
        run = _run(command, limit, child_env(scratch), scratch)
        if run.returncode != 0 or not report_path.exists():
            return ProfileReport(
                available=False, reason=f"ncu failed (exit {run.returncode}): {run.stdout[-800:]}"
            )
        kernels = _import(ncu, report_path, scratch)
    except subprocess.TimeoutExpired:
        return ProfileReport(available=False, reason=f"the profile ran past {limit:.0f} s")
    except OSError as error:
        return ProfileReport(available=False, reason=f"ncu could not run: {error}")
    if not kernels:
        return ProfileReport(available=False, reason="ncu recorded no kernel in the profiled call")
    tool = f"{ncu_version(ncu)} --clock-control none"
    artifact = report_path.name if request.artifacts else None  # without --artifacts it is not kept
    return ProfileReport(available=True, tool=tool, kernels=kernels, artifact=artifact)


def profile_shapes(
    request: EvaluationRequest, shape_ids: list[str], budget_s: float
) -> dict[str, ProfileReport]:
    ncu = shutil.which("ncu")
    if ncu is None:
        return {
            shape_id: ProfileReport(available=False, reason="ncu not found on this runner")
            for shape_id in shape_ids
        }
    scratch = Path(tempfile.mkdtemp(prefix="solboard-profile-"))
    folder = Path(request.artifacts) if request.artifacts else scratch
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + budget_s
    reports = {}
    try:
        for shape_id in shape_ids:
            remaining = deadline - time.monotonic()
            if remaining < 10:
                reports[shape_id] = ProfileReport(
                    available=False, reason="no time left in the ranked stage for a profile"
                )
                continue
            reports[shape_id] = profile_shape(
                request, shape_id, ncu, folder, scratch, min(remaining, SHAPE_LIMIT_S)
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return reports
