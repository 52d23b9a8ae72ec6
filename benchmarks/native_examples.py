"""Every native example (examples/cuda/, examples/ptx/) through the whole evaluator on a GPU, one
``python -m evaluator run --mode ranked`` each, and a compact table that says exactly what failed
and why, so that one round of fixes is enough:

- compile errors: the first diagnostics, with the line numbers of the example;
- wrong results: the first failing check (distribution, seed) and its worst element (output,
  index, value written, value expected);
- launch errors: the driver's own name and text (``CUDA_ERROR_...``);
- per shape: status, median, fraction of SOL, speedup over the baseline, whether the witness
  confirmed it, and the executed HGMMA / QGMMA / UTMALDG / HMMA counts Nsight Compute saw;
- per example: the evidence level and the required features it misses on this GPU's target.

A CPU preflight (upload validation with nvcc and ptxas) runs first for every example, so a compile
error shows even where the time budget cuts the GPU runs. Nothing here is timed by itself: the
figures are the evaluator's.

    python3 benchmarks/native_examples.py --out DIR [--only NAME,...] [--shapes all|quick|ranked]
                                          [--budget S] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SECRET_SEED = "20261205"
EXECUTED = ("HGMMA", "QGMMA", "UTMALDG", "HMMA")


@dataclass(frozen=True)
class Example:
    name: str
    problem: str
    path: str  # relative to the repository root


#: The Hopper examples first (the issue's evidence), then PTXBench's task set, then the older ones.
EXAMPLES = (
    Example("attention_fwd_wgmma_tma", "attention_fwd", "examples/cuda/attention_fwd_wgmma_tma.cu"),
    Example("gemm_fp8_wgmma_tma", "gemm_fp8", "examples/cuda/gemm_fp8_wgmma_tma.cu"),
    Example("attention_fwd", "attention_fwd", "examples/cuda/attention_fwd.cu"),
    Example("gemm_fp8", "gemm_fp8", "examples/cuda/gemm_fp8.cu"),
    Example("paged_decode_attention", "paged_decode_attention", "examples/cuda/paged_decode_attention.cu"),
    Example("rmsnorm", "rmsnorm", "examples/cuda/rmsnorm.cu"),
    Example("moe_unpermute", "moe_unpermute", "examples/cuda/moe_unpermute.cu"),
    Example("attention_bwd", "attention_bwd", "examples/cuda/attention_bwd.cu"),
    Example("vector_add_cu", "vector_add", "examples/cuda/vector_add.cu"),
    Example("vector_add_ptx", "vector_add", "examples/ptx/vector_add.ptx"),
    Example("gemm_bf16_mma", "gemm_bf16", "examples/ptx/gemm_bf16_mma.ptx"),
    Example("gemm_bf16_wgmma_tma", "gemm_bf16", "examples/ptx/gemm_bf16_wgmma_tma.ptx"),
)


def language_of(path: str) -> str:
    return "cuda" if path.endswith(".cu") else "ptx"


# ---------------------------------------------------------------- CPU preflight


def preflight(example: Example) -> str:
    """'ok' or the upload validation's errors (nvcc/ptxas words, example line numbers)."""
    from evaluator.ptx import validate_upload

    source = (REPO / example.path).read_text()
    result = validate_upload(language_of(example.path), source, None, example.problem, ["sm_90a"])
    if result.ok:
        evidence = result.archs[0].evidence
        missing = ", ".join(evidence.missing) if evidence and evidence.missing else "nothing"
        return f"ok (static evidence: missing {missing})"
    return "REFUSED: " + " | ".join(result.messages()[:4])


# ---------------------------------------------------------------- one GPU run


def run(example: Example, shapes: str, timeout_s: float, out: Path, device: str = "cuda") -> dict[str, Any]:
    """The report of one ranked evaluation, or {'failure': words} when none came back."""
    command = [
        sys.executable,
        "-m",
        "evaluator",
        "run",
        example.problem,
        str(REPO / example.path),
        "--language",
        language_of(example.path),
        "--mode",
        "ranked",
        "--secret-seed-stdin",
        "--shapes",
        shapes,
        "--json",
        "--device",
        device,
    ]
    started = time.monotonic()
    try:
        done = subprocess.run(
            command,
            input=SECRET_SEED + "\n",
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=REPO,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"failure": f"the evaluator ran past {timeout_s:.0f} s and was stopped"}
    (out / f"{example.name}.stderr.log").write_text(done.stderr)
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = " / ".join(done.stderr.strip().splitlines()[-4:])
        return {"failure": f"exit {done.returncode}, no report: {tail}"}
    (out / f"{example.name}.json").write_text(json.dumps(report, indent=1))
    report["_wall_s"] = time.monotonic() - started
    return report


# ---------------------------------------------------------------- reading a report


def executed_counts(shape: dict[str, Any]) -> dict[str, int]:
    """HGMMA/QGMMA/UTMALDG/HMMA executed on this shape (ncu's per-opcode counts, all kernels)."""
    counts = {name: 0 for name in EXECUTED}
    profile = shape.get("profile") or {}
    for kernel in profile.get("kernels", []) if profile.get("available") else []:
        for opcode, count in kernel.get("executed_instructions", {}).items():
            base = opcode.split(".", 1)[0].upper()
            if base in counts:
                counts[base] += int(count)
    return counts


def first_failure(shape: dict[str, Any]) -> str:
    """Why a shape failed: the first failing check and its worst element, or the shape's message."""
    for check in shape.get("checks", []):
        if check.get("passed"):
            continue
        where = f"{check.get('trial', '?')} ({check.get('distribution', '?')})"
        for output, stats in check.get("errors", {}).items():
            worst = (stats.get("worst") or [None])[0]
            if worst:
                return (
                    f"{where}: {output}{worst['index']} = {worst['got']} "
                    f"expected {worst['expected']:.6g} (matched {stats.get('matched_ratio', 0):.6f}, "
                    f"non-finite {stats.get('nonfinite_count')})"
                )
        return f"{where}: {check.get('message', '')[:200]}"
    return (shape.get("message") or "")[:300]


def shape_row(shape: dict[str, Any]) -> str:
    timing, sol, witness = shape.get("timing") or {}, shape.get("sol") or {}, shape.get("witness") or {}
    counts = executed_counts(shape)
    executed = (
        " ".join(f"{name}={count:,}" for name, count in counts.items() if count) or "no executed counts"
    )
    line = f"  {shape['shape_id']:<34} {shape['status']:<20}"
    if shape["status"] == "PASSED":
        line += (
            f" {timing.get('median_us', float('nan')):>10.1f} us  SOL {sol.get('sol_fraction', 0):.3f}"
            f"  x{sol.get('speedup', 0):.2f}"
            f"  witness {'yes' if witness.get('confirmed') else 'NO'}  {executed}"
        )
    else:
        line += f" {first_failure(shape)}"
    return line


def evidence_line(report: dict[str, Any]) -> str:
    evidence = report.get("evidence") or {}
    if not evidence:
        return "  evidence: none in the report"
    missing = ", ".join(evidence.get("missing", [])) or "nothing"
    executed = evidence.get("executed_families") or {}
    counts = ", ".join(f"{k} {v:,}" for k, v in sorted(executed.items())) or "-"
    return (f"  evidence ({evidence.get('evidence_level')}, {evidence.get('arch')}): required "
            f"{', '.join(evidence.get('required', [])) or 'nothing'}, missing {missing}; executed {counts}")


def summary(example: Example, report: dict[str, Any]) -> list[str]:
    if "failure" in report:
        return [f"{example.name} [{example.problem}]: NO REPORT: {report['failure']}"]
    head = (f"{example.name} [{example.problem}]: {report['status']} witnessed={report.get('witnessed')} "
            f"rank_eligible={report.get('rank_eligible')} score={report.get('problem_score')} "
            f"({report.get('_wall_s', 0):.0f} s)")
    lines = [head]
    if report["status"] != "PASSED" and report.get("message"):
        lines.append("  message: " + " / ".join(report["message"].splitlines()[:6])[:600])
    lines += [shape_row(shape) for shape in report.get("shapes", [])]
    lines.append(evidence_line(report))
    return lines


# ---------------------------------------------------------------- driver


def chosen(only: str | None) -> list[Example]:
    if not only:
        return list(EXAMPLES)
    names = only.split(",")
    unknown = set(names) - {example.name for example in EXAMPLES}
    if unknown:
        raise SystemExit(f"unknown examples {sorted(unknown)}; known: {', '.join(e.name for e in EXAMPLES)}")
    return [example for example in EXAMPLES if example.name in names]


def emit(lines: list[str], log: Path) -> None:
    with log.open("a") as handle:
        for line in lines:
            print(line, flush=True)
            handle.write(line + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated example names (default: all, in the table's order)")
    parser.add_argument("--shapes", choices=["all", "quick", "ranked"], default="all")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for the whole run")
    parser.add_argument("--timeout", type=float, default=400.0, help="seconds for one example at most")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: a dry run of this script's plumbing (native kernels cannot run there)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log, started = args.out / "summary.txt", time.monotonic()
    examples = chosen(args.only)
    emit(["== preflight (upload validation on the CPU, sm_90a)"], log)
    emit([f"{example.name:<26} {preflight(example)}" for example in examples], log)
    emit([f"== ranked runs (--shapes {args.shapes}, secret seed {SECRET_SEED})"], log)
    for example in examples:
        left = args.budget - (time.monotonic() - started)
        if left < 30:
            emit([f"{example.name}: NOT RUN (budget spent)"], log)
            continue
        report = run(example, args.shapes, min(args.timeout, left - 10), args.out, args.device)
        emit(summary(example, report), log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
