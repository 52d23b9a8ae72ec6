"""One pipeline for upload validation, ``check-ptx`` and the loader: spec -> (nvcc) -> ptxas ->
entry and ABI checks -> evidence, for one target. Needs no GPU."""

from __future__ import annotations

from dataclasses import dataclass

from evaluator.ptx import abi as abi_mod
from evaluator.ptx.archs import get_arch
from evaluator.ptx.errors import SpecError, ToolchainError
from evaluator.ptx.feature_evidence import build_evidence
from evaluator.ptx.jailed import ToolLimits
from evaluator.ptx.limits import check_shape, check_static
from evaluator.ptx.models import ArchValidation, Diagnostic, KernelResources, Stage
from evaluator.ptx.nvcc import compile_to_ptx
from evaluator.ptx.ptxas import Diagnostic as ToolDiagnostic
from evaluator.ptx.ptxas import assemble
from evaluator.ptx.spec import LaunchSpec, extract_spec_text, parse_spec
from evaluator.ptx.toolchain import find_tool


@dataclass
class Build:
    """What the loader needs besides the JSON result."""

    result: ArchValidation
    spec: LaunchSpec | None
    ptx: str | None = None
    cubin: bytes | None = None
    sass: str | None = None


def load_spec(source: str, launch_spec: str | None, abi: abi_mod.ProblemAbi | None) -> LaunchSpec:
    """The spec from the separate field when given, else from the source's comment block."""
    text = launch_spec if launch_spec and launch_spec.strip() else extract_spec_text(source)
    if text is None:
        raise SpecError("no launch spec: add a `// solboard-launch:` comment block or send the spec field")
    spec_text = extract_spec_text(text) if "solboard-launch:" in text else text
    return parse_spec(spec_text or "", abi.axes if abi else None)


def _diag(stage: Stage, d: ToolDiagnostic) -> Diagnostic:
    severity = d.severity if d.severity in ("error", "warning", "fatal") else "error"
    return Diagnostic(stage=stage, severity=severity, message=d.message, line=d.line)  # type: ignore[arg-type]


def error(stage: Stage, message: str) -> Diagnostic:
    return Diagnostic(stage=stage, severity="error", message=message)


def build_for_arch(
    language: str, source: str, spec: LaunchSpec | None, abi: abi_mod.ProblemAbi | None, arch_name: str,
    limits: ToolLimits | None = None,
) -> Build:
    arch = get_arch(arch_name)
    result = ArchValidation(
        arch=arch.name, gpus=arch.gpus, verified_on_hardware=arch.verified_on_hardware, ok=False
    )
    build = Build(result, spec)
    try:
        ptx = _ptx_for(language, source, arch_name, result, limits)
        if ptx is None:
            return build
        build.ptx = ptx
        _assemble(build, ptx, arch_name, limits)
    except ToolchainError as problem:
        result.errors.append(error("toolchain", problem.message))
    result.ok = not result.errors
    return build


def _ptx_for(language: str, source: str, arch: str, result: ArchValidation,
             limits: ToolLimits | None = None) -> str | None:
    if language == "ptx":
        return source
    compiled = compile_to_ptx(source, arch, limits=limits)
    result.errors += [_diag("nvcc", d) for d in compiled.errors]
    result.warnings += [_diag("nvcc", d) for d in compiled.warnings]
    return compiled.ptx


def _assemble(build: Build, ptx: str, arch_name: str, limits: ToolLimits | None = None) -> None:
    result = build.result
    version, target = abi_mod.ptx_version(ptx), abi_mod.ptx_target(ptx)
    result.ptx_version = f"{version[0]}.{version[1]}" if version else None
    result.ptx_target = target
    if not _target_fits(result, version, target, arch_name):
        return
    if find_tool("ptxas") is None:  # the driver JIT-compiles the PTX at load; no SASS evidence
        result.warnings.append(
            Diagnostic(
                stage="toolchain",
                severity="warning",
                message="ptxas not found: PTX left to the driver's JIT; no SASS evidence",
            )
        )
        _check_entry(build, ptx)
        return
    assembly = assemble(ptx, arch_name, limits=limits)
    result.errors += [_diag("ptxas", d) for d in assembly.errors]
    result.warnings += [_diag("ptxas", d) for d in assembly.warnings]
    result.kernels = [KernelResources(name=n, **vars(k)) for n, k in assembly.kernels.items()]
    if not assembly.ok:
        return
    build.cubin = assembly.cubin
    _check_entry(build, ptx)


def _target_fits(
    result: ArchValidation, version: tuple[int, int] | None, target: str | None, arch: str
) -> bool:
    need = get_arch(arch).min_ptx_version
    if version is not None and version < need and target == arch:
        result.errors.append(
            error(
                "ptxas",
                f"{arch} needs PTX .version {need[0]}.{need[1]} or newer; "
                f"this PTX says .version {version[0]}.{version[1]}",
            )
        )
    if target and target.endswith("a") and target != arch:
        result.errors.append(
            error(
                "ptxas",
                f".target {target} is specific to that architecture and cannot be "
                f"built for {arch}: upload PTX with .target {arch} for it",
            )
        )
    return not result.errors


def _check_entry(build: Build, ptx: str) -> None:
    result, spec = build.result, build.spec
    entries = abi_mod.parse_entries(ptx)
    if spec is None:
        return
    try:
        entry = abi_mod.resolve_entry(entries, spec.entry)
        result.entry = entry.name
        abi_mod.check_params(spec, entry)
    except SpecError as problem:
        result.errors.append(error("abi", problem.message))
        return
    build.result.entry = entry.name


def check_problem_fit(build: Build, abi: abi_mod.ProblemAbi) -> None:
    """Names against the problem, then every shape against the target's limits."""
    result, spec = build.result, build.spec
    if spec is None or build.ptx is None or result.entry is None or result.errors:
        return
    entry = abi_mod.parse_entries(build.ptx)[result.entry]
    static_smem = next((k.shared_memory_bytes for k in result.kernels if k.name == entry.name), 0)
    arch = get_arch(result.arch)
    try:
        result.warnings += [
            Diagnostic(stage="abi", severity="warning", message=w)
            for w in abi_mod.check_against_problem(spec, abi)
        ]
        check_static(spec, arch, entry)
        for axes in abi.shapes:
            check_shape(spec, arch, entry, static_smem, axes)
            abi_mod.check_tensormaps_for_shape(spec, abi, axes)
    except SpecError as problem:
        result.errors.append(error("abi", problem.message))
    result.ok = not result.errors


def attach_evidence(build: Build, required: list[str]) -> None:
    result = build.result
    if build.ptx is None:
        return
    kernel = next((k for k in result.kernels if k.name == result.entry), None)
    resources = (
        (kernel.registers, kernel.spill_store_bytes + kernel.spill_load_bytes, kernel.shared_memory_bytes)
        if kernel
        else (None, None, None)
    )
    result.evidence, build.sass = build_evidence(result.arch, build.ptx, build.cubin, required, resources)
