"""A human-readable summary of an ``EvaluationReport`` (the CLI's default output)."""

from __future__ import annotations

from evaluator.report import EvaluationReport, ShapeReport, TimingStats
from evaluator.vocabulary import RANKED, Status


def _timing(label: str, timing: TimingStats | None) -> str:
    if timing is None:
        return ""
    ci = f"+-{timing.ci95_half_width_rel * 100:.2f}%"
    return f"{label} {timing.median_us:.2f} us {ci} (n={timing.n}, {timing.method}/{timing.ranked_source})"


def _shape_line(shape: ShapeReport) -> str:
    parts = [f"  {shape.shape_id:<28} {shape.status.value:<20}"]
    if shape.timing:
        parts.append(_timing("kernel", shape.timing))
        parts.append(_timing("baseline", shape.baseline_timing))
    if shape.timing and shape.timing.rank_median_us:
        parts.append("ranks " + "/".join(f"{value:.1f}" for value in shape.timing.rank_median_us) + " us")
    if shape.sol:
        parts.append(f"S={shape.sol.score:.3f} SOL={shape.sol.sol_fraction:.2%} x{shape.sol.speedup:.2f}")
    if shape.message and shape.status != Status.PASSED:
        parts.append(shape.message[:200])
    return "  ".join(part for part in parts if part)


def human_summary(report: EvaluationReport) -> str:
    device = report.device
    dev = f"{device.name} ({device.gpu_type}{', development device' if device.development_device else ''})"
    ranks = f", {report.world_size} ranks" if report.world_size > 1 else ""
    lines = [
        f"{report.problem} v{report.problem_version} [{report.language}, {report.mode}{ranks}] on {dev}",
        f"status: {report.status.value}  {report.message}".rstrip(),
    ]
    lines += [_shape_line(shape) for shape in report.shapes]
    if report.problem_score is not None:
        lines.append(f"problem score: {report.problem_score:.4f} (rank eligible)")
    elif report.mode == RANKED:
        lines.append("not rank eligible")
    lines += [f"flag: {flag}" for flag in report.flags]
    lines += [f"note: {note}" for note in report.notes]
    phases = ", ".join(f"{name} {seconds:.1f}" for name, seconds in report.phase_seconds.items())
    lines.append(f"wall: {report.wall_seconds:.1f} s" + (f" ({phases})" if phases else ""))
    return "\n".join(lines)
