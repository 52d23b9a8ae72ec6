"""The words every layer shares: submission languages, evaluation modes, default stage limits.

Standard library only, so that everything can import it from here: the report contract
(evaluator/report.py), the evaluator's request and command line, the job protocol
(solboard_common/protocol.py), the site's models, and the command-line client, which imports
nothing outside the standard library.
"""

from __future__ import annotations

from typing import Literal, get_args

Language = Literal["python", "ptx", "cuda"]
Mode = Literal["test", "ranked"]

LANGUAGES: tuple[Language, ...] = get_args(Language)
MODES: tuple[Mode, ...] = get_args(Mode)
#: What the API, the upload form and the CLI submit when no mode is given: correctness and timing,
#: never ranked (ranked mode adds the secret seed and the witness, and enters the rankings).
DEFAULT_MODE: Mode = "test"
#: Built by native tools (ptxas, nvcc) rather than imported by Python: they need a GPU.
NATIVE_LANGUAGES: tuple[Language, ...] = ("ptx", "cuda")

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
    if mode == "test":
        return COMPILE_LIMIT_S, TEST_MODE_TEST_LIMIT_S, TEST_MODE_RANKED_LIMIT_S
    return COMPILE_LIMIT_S, TEST_LIMIT_S, RANKED_LIMIT_S
