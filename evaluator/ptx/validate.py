"""Upload validation: the function the site calls before anything is queued (CPU only, ptxas).

    validate_upload("ptx", source, None, "vector_add", ["sm_90a"]) -> UploadValidation

``ok`` is False with precise messages when the source does not assemble/compile, the spec does
not parse or does not fit the entry's parameters or the problem's ABI, or a shape of the problem
would get a launch the target refuses. Required features that are missing are not errors: they
are reported in each target's ``evidence.missing`` (a ranking filter).
"""

from __future__ import annotations

from typing import Any

from evaluator.ptx import abi as abi_mod
from evaluator.ptx.archs import ARCHS, GPU_ARCH
from evaluator.ptx.build import attach_evidence, build_for_arch, check_problem_fit, error, load_spec
from evaluator.ptx.errors import SpecError
from evaluator.ptx.jailed import ToolLimits
from evaluator.ptx.models import Diagnostic, UploadValidation
from evaluator.ptx.spec import LaunchSpec, extract_spec_text, spec_summary
from evaluator.ptx.toolchain import tool_versions

MAX_SOURCE_BYTES = 4 * 1024 * 1024
LANGUAGES = ("ptx", "cuda")


def validate_upload(
    language: str, source: str, launch_spec: str | None, problem: Any = None, archs: list[str] | None = None,
    limits: ToolLimits | None = None,
) -> UploadValidation:
    """Validate a PTX or CUDA C++ upload for each target (names like ``sm_90a`` or GPU types like ``h200``).

    ``limits``: each nvcc/ptxas run's (the site passes shorter ones than the evaluator's defaults)."""
    abi = _abi(problem)
    result = UploadValidation(
        ok=False,
        language="cuda" if language == "cuda" else "ptx",
        problem=abi.name if abi else None,
        tools=tool_versions(),
    )
    if not _precheck(language, source, problem, result):
        return result
    try:
        spec: LaunchSpec | None = load_spec(source, launch_spec, abi)
    except SpecError as problem_:
        if abi is not None or _has_spec(source, launch_spec):
            result.errors.append(error("spec", problem_.message))
            return result
        # A check on its own (no problem, no spec): assemble anyway for registers and features.
        result.warnings.append(Diagnostic(stage="spec", severity="warning", message=(
            f"{problem_.message}; assembled without one: resources and features only, no ABI check")))
        spec = None
    result.spec = spec_summary(spec) if spec is not None else None
    targets = _targets(archs, abi, result)
    for arch in targets:
        build = build_for_arch(language, source, spec, abi, arch, limits)
        if abi is not None:
            check_problem_fit(build, abi)
        attach_evidence(build, list(abi.required_features.get(arch, ())) if abi else [])
        result.archs.append(build.result)
    result.ok = not result.errors and bool(result.archs) and all(a.ok for a in result.archs)
    return result


def _has_spec(source: str, launch_spec: str | None) -> bool:
    return bool(launch_spec and launch_spec.strip()) or extract_spec_text(source) is not None


def _abi(problem: Any) -> abi_mod.ProblemAbi | None:
    if problem is None:
        return None
    if isinstance(problem, str):
        from evaluator.problems import get_problem

        problem = get_problem(problem)
    return abi_mod.problem_abi(problem)


def _precheck(language: str, source: str, problem: Any, result: UploadValidation) -> bool:
    if language not in LANGUAGES:
        result.errors.append(
            error("spec", f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
        )
    elif len(source.encode()) > MAX_SOURCE_BYTES:
        result.errors.append(error("spec", f"source is larger than {MAX_SOURCE_BYTES // (1024 * 1024)} MiB"))
    elif "\x00" in source:
        result.errors.append(error("spec", "source contains a NUL byte: upload text"))
    elif problem is not None and not isinstance(problem, str) and language not in problem.languages:
        result.errors.append(
            error(
                "spec",
                f"problem {problem.name} does not accept {language} (accepts {', '.join(problem.languages)})",
            )
        )
    return not result.errors


def _targets(archs: list[str] | None, abi: abi_mod.ProblemAbi | None, result: UploadValidation) -> list[str]:
    wanted = archs or (["sm_90a"] if abi is None else list(abi.archs[:1]))
    targets = []
    for name in wanted:
        arch = GPU_ARCH.get(name.lower(), name)
        if arch not in ARCHS:
            result.errors.append(
                error("spec", f"unknown target {name!r}; known: {', '.join([*ARCHS, *GPU_ARCH])}")
            )
        elif abi is not None and arch not in abi.archs:
            result.errors.append(
                error("spec", f"{abi.name} does not accept target {arch} (accepts {', '.join(abi.archs)})")
            )
        elif arch not in targets:
            targets.append(arch)
    return targets
