"""The JSON contract of upload validation and ``check-ptx`` (pydantic, like evaluator/report.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaluator.report import FeatureEvidence

Stage = Literal["spec", "nvcc", "ptxas", "abi", "toolchain"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Diagnostic(_Model):
    stage: Stage = Field(description="Which step found it: spec, nvcc, ptxas, abi (spec vs kernel/problem).")
    severity: Literal["error", "warning", "fatal"]
    message: str = Field(description="The tool's own words where a tool found it.")
    line: int | None = Field(default=None, description="1-based line in the submitted source, when known.")


class KernelResources(_Model):
    name: str
    registers: int | None = None
    barriers: int | None = None
    shared_memory_bytes: int = Field(default=0, description="Static shared memory (ptxas).")
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0


class ArchValidation(_Model):
    arch: str = Field(description="Target, e.g. sm_90a.")
    gpus: str = Field(description="GPU types this target serves.")
    verified_on_hardware: bool = Field(description="False for targets supported from specifications only.")
    ok: bool = Field(description="Assembled, and the spec fits the entry and every shape of the problem.")
    errors: list[Diagnostic] = Field(default_factory=list)
    warnings: list[Diagnostic] = Field(default_factory=list)
    entry: str | None = Field(default=None, description="The entry's name in the PTX (mangled for C++).")
    ptx_version: str | None = None
    ptx_target: str | None = None
    kernels: list[KernelResources] = Field(default_factory=list)
    evidence: FeatureEvidence | None = None


class UploadValidation(_Model):
    ok: bool = Field(description="True when every requested target is ok: the submission may be queued.")
    language: Literal["ptx", "cuda"]
    problem: str | None = None
    spec: dict[str, Any] | None = Field(
        default=None, description="The parsed launch spec, expressions as text."
    )
    errors: list[Diagnostic] = Field(
        default_factory=list, description="Errors before any target (spec, input)."
    )
    warnings: list[Diagnostic] = Field(default_factory=list)
    archs: list[ArchValidation] = Field(default_factory=list)
    tools: dict[str, str] = Field(default_factory=dict, description="Tool versions used.")

    def messages(self) -> list[str]:
        """Every error as one line, for a form or an API error body."""
        lines = [_line(d) for d in self.errors]
        for arch in self.archs:
            lines += [f"[{arch.arch}] {_line(d)}" for d in arch.errors]
        return lines


def _line(diagnostic: Diagnostic) -> str:
    where = f"line {diagnostic.line}: " if diagnostic.line is not None else ""
    return f"{diagnostic.stage}: {where}{diagnostic.message}"
