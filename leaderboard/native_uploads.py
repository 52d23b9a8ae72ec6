"""Upload validation of PTX and CUDA C++ submissions, on the site's CPU, before anything is saved.

Each requested GPU type is built for its own target (``GpuType.arch``: sm_90a for H100/H200,
sm_100a for B200) with the evaluator's ``validate_upload`` (ptxas, and nvcc for ``.cu``): the code
``python -m evaluator check-ptx`` runs. Any error refuses the upload with the tools' own words,
line numbers kept. What the build found (registers, spills, shared memory, instruction families,
required features missing) becomes ``Submission.static_evidence``.

The tools never run in the web process: each runs jailed in a process of its own
(``evaluator/ptx/jailed.py``: only the toolchain and include folders visible, no network, CPU,
memory and file limits, stopped past its time), every header nvcc opened must come from the CUDA
toolkit or the host compiler (``evaluator/ptx/includes.py``), and only the submission's own
diagnostics come back (docs/ptx.md, "Validation on the site").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError

from evaluator.ptx import validate_upload
from evaluator.ptx.jailed import ToolLimits
from evaluator.ptx.models import ArchValidation, UploadValidation
from leaderboard.models import GpuType, Language, Problem


def validate_native_upload(
    problem: Problem, language: str, source: str, launch_spec: str | None, gpus: Sequence[GpuType],
    limits: ToolLimits | None = None,
) -> dict[str, Any]:
    """The static evidence of a PTX/CUDA upload; raises ValidationError (field -> messages).
    ``limits``: each tool run's (the site's, ``compile_limits.site_tool_limits``)."""
    _refuse_gpu_types_without_arch(language, gpus)
    archs = list(dict.fromkeys(gpu.arch for gpu in gpus if gpu.arch))
    try:
        result = validate_upload(language, source, launch_spec, problem.name, archs, limits)
    except RecursionError:  # the TOML reader recurses per level: ``x = [[[[...]]]]`` 200,000 deep
        raise ValidationError({"launch_spec": "the launch spec nests arrays or tables too deeply"}) from None
    if not result.ok:
        raise ValidationError({"source": result.messages() or ["the upload was refused without a message"]})
    return static_evidence(result)


def _refuse_gpu_types_without_arch(language: str, gpus: Sequence[GpuType]) -> None:
    # The CPU development device has no GPU architecture: a PTX/CUDA kernel cannot run there.
    without = [gpu for gpu in gpus if not gpu.arch]
    if not without:
        return
    label = Language(language).label
    names = ", ".join(f"{gpu.key} ({gpu.name})" for gpu in without)
    runnable = ", ".join(
        GpuType.objects.filter(arch__isnull=False).exclude(arch="").values_list("key", flat=True)
    )
    raise ValidationError(
        {"gpu_types": f"{names} has no GPU architecture and cannot run {label} submissions; "
                      f"choose a GPU type with one: {runnable}"}
    )


def static_evidence(result: UploadValidation) -> dict[str, Any]:
    """``{"tools": {...}, "archs": {"sm_90a": {entry, kernels, evidence, warnings}}}``."""
    return {"tools": result.tools, "archs": {arch.arch: _arch_evidence(arch) for arch in result.archs}}


def _arch_evidence(arch: ArchValidation) -> dict[str, Any]:
    return {
        "entry": arch.entry,
        "ptx_target": arch.ptx_target,
        "verified_on_hardware": arch.verified_on_hardware,
        "kernels": [kernel.model_dump(mode="json") for kernel in arch.kernels],
        "evidence": arch.evidence.model_dump(mode="json") if arch.evidence else None,
        "warnings": [warning.model_dump(mode="json") for warning in arch.warnings],
    }
