"""What one evaluation is asked to do (the Python API's and the CLI's input)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from evaluator.problems import Problem
from evaluator.vocabulary import COMPILE_LIMIT_S, RANKED_LIMIT_S, TEST_LIMIT_S, Device, Language, Mode


@dataclass(frozen=True)
class Limits:
    compile_s: float = COMPILE_LIMIT_S
    test_s: float = TEST_LIMIT_S
    ranked_s: float = RANKED_LIMIT_S
    log_bytes: int = 64 * 1024
    #: Seconds the first call of a shape may take (compilation, autotuning); None: the device's
    #: default (``call_limits.FIRST_CALL_S``).
    first_call_s: float | None = None


@dataclass(frozen=True)
class EvaluationRequest:
    problem: str
    file: Path
    language: Language = "python"
    spec: Path | None = None
    device: Device = "cuda"
    mode: Mode = "test"
    seed: int | None = None
    secret_seed: int | None = field(default=None, repr=False)
    shapes: Literal["all", "quick", "ranked"] = "all"
    limits: Limits = field(default_factory=Limits)
    artifacts: Path | None = None
    calibration: dict[str, float] | None = None
    #: Seconds of timing per shape for the kernel and the baseline; None = the mode's default.
    budget_s: tuple[float, float] | None = None
    profile: bool = True
    #: The witness session also collects ncu's SpeedOfLight, LaunchStats and Occupancy sections
    #: (several replay passes: seconds per shape); otherwise one pass of durations and launch facts.
    profile_sections: bool = False
    #: Exact shapes to evaluate (overrides ``shapes``); for benchmarks and debugging.
    shape_ids: tuple[str, ...] | None = None
    #: Ranks of a multi-GPU problem (one process and one GPU each); None = the problem's own world
    #: size. A single-GPU problem runs at 1.
    world_size: int | None = None


def world_size_of(request: EvaluationRequest, problem: Problem) -> int:
    """The world size ``request`` runs ``problem`` at; ValueError when the problem has none such."""
    if problem.kind != "multi":
        if request.world_size not in (None, 1):
            raise ValueError(f"{problem.name} is a single-GPU problem: the world size is 1")
        return 1
    size = problem.world_size if request.world_size is None else int(request.world_size)
    if size not in problem.world_sizes:
        raise ValueError(f"{problem.name} runs at world sizes {list(problem.world_sizes)}, not {size}")
    return size
