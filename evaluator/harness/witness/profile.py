"""Reading Nsight Compute's raw page into the report's ``KernelProfile``s.

The ncu session itself is the timing witness's (``witness``, ``witness_session``): one session per
job, whose last witnessed call of each shape is that shape's profile (``--clock-control none``:
the clocks the timing ran at; the sections below). This module only parses.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
from dataclasses import dataclass

from evaluator.harness import identity
from evaluator.ptx.feature_evidence import parse_opcode_instances
from evaluator.report import KernelProfile, WarpStall

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
        row = dict(zip(header, values, strict=True))
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


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run(
            [ncu, "--version"], capture_output=True, text=True, timeout=30, check=False,
            **identity.untrusted_process(),
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "ncu"
    return f"ncu {out.strip().splitlines()[-1].split()[-1]}" if out.strip() else "ncu"
