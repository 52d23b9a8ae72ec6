"""Static architecture-feature evidence of a PTX/CUDA submission, built by the judge.

The same build the child's loader does (``evaluator.ptx``: nvcc for CUDA, ptxas for the device's
target, cuobjdump/nvdisasm for SASS), without loading anything: the evidence decides the
required-features ranking track, so it must not be the untrusted child's word.
"""

from __future__ import annotations

from typing import Any

from evaluator.harness.request import EvaluationRequest
from evaluator.problems import Problem


def static_evidence(request: EvaluationRequest, problem: Problem) -> dict[str, Any] | None:
    import torch

    from evaluator.ptx.abi import problem_abi
    from evaluator.ptx.archs import arch_for_capability
    from evaluator.ptx.build import attach_evidence, build_for_arch, load_spec

    try:
        source = request.file.read_text()
        launch_spec = request.spec.read_text() if request.spec else None
        abi = problem_abi(problem)
        arch = arch_for_capability(*torch.cuda.get_device_capability(0))
        build = build_for_arch(request.language, source, load_spec(source, launch_spec, abi), abi, arch)
        attach_evidence(build, list(abi.required_features.get(arch, ())))
    except Exception:  # a source that does not build has no evidence; the child says why
        return None
    evidence = build.result.evidence
    return evidence.model_dump(mode="json") if evidence is not None else None
