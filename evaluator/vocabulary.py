"""The words every layer shares: submission languages, evaluation modes, devices, stages,
statuses and verdicts, default stage limits. One home per word: everything else imports it.

Standard library only, so that everything can import it from here: the report contract
(evaluator/report.py), the evaluator's request and command line, the job protocol
(solboard_common/protocol.py), the site's models, and the command-line client, which imports
nothing outside the standard library.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

Language = Literal["python", "ptx", "cuda"]
Mode = Literal["test", "ranked"]
#: Where an evaluation runs: a CUDA GPU, or the CPU development device (wall-clock, no SOL).
Device = Literal["cuda", "cpu"]

LANGUAGES: tuple[Language, ...] = get_args(Language)
PYTHON: Language = "python"
MODES: tuple[Mode, ...] = get_args(Mode)
#: Correctness and timing only: never ranked.
TEST: Mode = "test"
#: Adds the secret seed and the witness, and enters the rankings.
RANKED: Mode = "ranked"
DEVICES: tuple[Device, ...] = get_args(Device)
CUDA: Device = "cuda"
CPU: Device = "cpu"
#: The GPU type key of the CPU development device (queues ``gpu.cpu.x<n>``, ``gpus.toml``, the
#: ``cpu`` board), which ranks only among itself.
CPU_GPU_TYPE = "cpu"
#: What the API, the upload form and the CLI submit when no mode is given: correctness and timing,
#: never ranked (ranked mode adds the secret seed and the witness, and enters the rankings).
DEFAULT_MODE: Mode = TEST
#: Built by native tools (ptxas, nvcc) rather than imported by Python: they need a GPU.
NATIVE_LANGUAGES: tuple[Language, ...] = ("ptx", "cuda")
#: The language a file's extension names (the upload form, the API, both command lines).
LANGUAGE_OF_EXTENSION: dict[str, Language] = {".py": "python", ".ptx": "ptx", ".cu": "cuda", ".cuh": "cuda"}


def language_of_file(name: str) -> Language:
    """The language a file's name says, by its extension in any case; anything else is Python."""
    lowered = name.lower()
    return next(
        (language for suffix, language in LANGUAGE_OF_EXTENSION.items() if lowered.endswith(suffix)), PYTHON
    )


class Stage(StrEnum):
    """The stages of an evaluation, in order: the child's stage limits and the report's
    ``phase_seconds`` name them. Compile, test and ranked have limits of their own (below); start-up
    and the baseline's timing count against the compile limit."""

    START_UP = "start_up"
    BASELINE = "baseline"
    COMPILE = "compile"
    TEST = "test"
    RANKED = "ranked"


#: Default wall-clock limits of an evaluation's stages, in seconds (start-up, the baseline's timing
#: and import/compile/assemble; correctness; timing + witness); the site may send others with each job.
COMPILE_LIMIT_S = 300.0
TEST_LIMIT_S = 300.0
RANKED_LIMIT_S = 900.0
#: A test-mode job needs less: no secret-seed witness, a quarter of the timing budget. The largest
#: stages measured on the H200 (ranked jobs, which run the same trials) were a 27.5 s correctness
#: stage and a 34 s timing stage (paged_decode_attention); the compile stage keeps its limit (it also
#: covers the judge's baseline timing, 125 s at most so far, and nvcc or a load_inline build).
TEST_MODE_TEST_LIMIT_S = 120.0
TEST_MODE_RANKED_LIMIT_S = 120.0


def stage_limits(mode: Mode) -> tuple[float, float, float]:
    """The default (compile, test, ranked) stage limits of a job in ``mode``."""
    if mode == TEST:
        return COMPILE_LIMIT_S, TEST_MODE_TEST_LIMIT_S, TEST_MODE_RANKED_LIMIT_S
    return COMPILE_LIMIT_S, TEST_LIMIT_S, RANKED_LIMIT_S


# The evaluator's word for a shape or a whole evaluation: the report carries it, the child reports
# the failing ones against itself, the site stores it beside its coarse ``Verdict``. (The docstring
# is the report schema's description of it: docs/report-schema.json.)
class Status(StrEnum):
    """What happened, in words that say what went wrong."""

    PASSED = "PASSED"
    COMPILE_ERROR = "COMPILE_ERROR"  # source did not import / compile / assemble, or no kernel entry
    RUNTIME_ERROR = "RUNTIME_ERROR"  # the kernel raised or faulted (CUDA error, exception)
    INCORRECT_SHAPE = "INCORRECT_SHAPE"  # an output's shape or layout changed
    INCORRECT_DTYPE = "INCORRECT_DTYPE"  # an output's dtype or device changed
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"  # values outside tolerance, NaN/Inf, unwritten output
    TIMEOUT = "TIMEOUT"  # a stage ran past its time limit; the process group was killed
    REJECTED = "REJECTED"  # caught by an anti-cheat check; the message says which and why

    @property
    def verdict(self) -> Verdict:
        """The site's coarse status for this evaluator status (README.md, "Architecture")."""
        return _VERDICTS[self]


class Verdict(StrEnum):
    """The site's coarse status of a finished evaluation (its other states: queued, running,
    cancelled, are the site's alone)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"


_VERDICTS = {
    Status.PASSED: Verdict.PASSED,
    Status.COMPILE_ERROR: Verdict.ERROR,
    Status.RUNTIME_ERROR: Verdict.ERROR,
    Status.INCORRECT_SHAPE: Verdict.FAILED,
    Status.INCORRECT_DTYPE: Verdict.FAILED,
    Status.INCORRECT_NUMERICAL: Verdict.FAILED,
    Status.TIMEOUT: Verdict.TIMEOUT,
    Status.REJECTED: Verdict.REJECTED,
}

#: Order in which a shape's status decides the evaluation's status: the worst wins.
STATUS_SEVERITY = [
    Status.REJECTED,
    Status.COMPILE_ERROR,
    Status.TIMEOUT,
    Status.RUNTIME_ERROR,
    Status.INCORRECT_DTYPE,
    Status.INCORRECT_SHAPE,
    Status.INCORRECT_NUMERICAL,
    Status.PASSED,
]


def worst_status(statuses: list[Status]) -> Status:
    """The most severe of several statuses (PASSED only when every one passed)."""
    if not statuses:
        return Status.PASSED
    return min(statuses, key=STATUS_SEVERITY.index)
