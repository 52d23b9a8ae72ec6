"""Child for the untimed Nsight Compute pass: ``python -m evaluator.harness.profile_child CONFIG``.

Loads the submission, makes inputs for one shape, warms up outside the profiled range, then makes
ONE call inside the NVTX range ``sbprof`` (ncu profiles only kernels inside it). Nothing it does
feeds a verdict: the profile is evidence for the author, never a score.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from evaluator.harness import correctness as corr
from evaluator.harness.submission import SubmissionError, load
from evaluator.harness.work import with_scalar_args
from evaluator.problems import get_problem

RANGE = "sbprof"
WARMUP_CALLS = 2


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    problem = get_problem(config["problem"])
    refmod = problem.reference_module()
    shape = problem.shape(config["shape"])
    axes = dict(shape.axes)
    spec = Path(config["spec"]) if config.get("spec") else None
    try:
        kernel = load(config["language"], Path(config["file"]), spec, problem, "cuda").kernel_for(axes)
        if config["language"] == "python":
            kernel = with_scalar_args(kernel, problem, axes)
    except SubmissionError as error:
        print(error.message, file=sys.stderr)
        return 3
    inputs = refmod.generate_inputs(
        axes, int.from_bytes(os.urandom(4), "little"), "cuda", problem.distributions[0]
    )
    args = [inputs[item.name] for item in problem.inputs]
    outputs = list(corr.allocate_outputs(problem.outputs, axes, "cuda").values())
    for _ in range(WARMUP_CALLS):
        kernel(*args, *outputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    kernel(*args, *outputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
