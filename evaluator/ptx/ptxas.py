"""``ptxas -v`` for one architecture: the cubin, errors verbatim with line numbers, and each
entry's registers, spills, stack, shared memory and barriers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from evaluator.ptx.jailed import ToolLimits, WorkFolder, run_jailed
from evaluator.ptx.sourcetext import text_problem

SOURCE_NAME = "submission.ptx"
_DIAGNOSTIC = re.compile(
    r"^ptxas\s+(?P<file>[^,]+),\s*line\s+(?P<line>\d+);\s*(?P<sev>\w+)\s*:\s*(?P<msg>.*)$"
)
_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$]+)'?")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass
class Diagnostic:
    severity: str  # error | warning | fatal
    message: str
    line: int | None = None

    def render(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.severity}: {self.message}"


@dataclass
class KernelResources:
    registers: int | None = None
    barriers: int | None = None
    shared_memory_bytes: int = 0
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


@dataclass
class Assembly:
    arch: str
    ok: bool
    cubin: bytes | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    kernels: dict[str, KernelResources] = field(default_factory=dict)
    log: str = ""


def assemble(
    ptx: str,
    arch: str,
    source_name: str = SOURCE_NAME,
    timeout_s: float = 120.0,
    limits: ToolLimits | None = None,
) -> Assembly:
    """Assemble PTX text; never raises for bad PTX (``ok`` is False and ``errors`` say why).

    ptxas runs jailed in another process with limits (``jailed.py``), like nvcc: the PTX may be
    the submitter's own text."""
    limits = limits or ToolLimits(wall_seconds=timeout_s)
    problem = text_problem(ptx)
    if problem is not None:
        return Assembly(arch=arch, ok=False, cubin=None, errors=[Diagnostic("error", problem)])
    with WorkFolder("solboard-ptxas-") as folder:
        (folder.work / source_name).write_bytes(ptx.encode("utf-8"))
        result = run_jailed("ptxas", ["-v", f"-arch={arch}", "-o", "out.cubin", source_name], folder, limits)
        cubin_path = folder.work / "out.cubin"
        ok = result.returncode == 0 and not result.timed_out and cubin_path.exists()
        cubin = cubin_path.read_bytes() if ok else None
    log = (result.stdout + result.stderr).replace(str(folder.work) + "/", "")
    assembly = Assembly(arch=arch, ok=cubin is not None, cubin=cubin, log=log)
    limit = result.limit_message("ptxas", limits)
    if limit is not None:
        assembly.errors.append(Diagnostic("error", limit))
    _parse_log(log, assembly)
    real = [d for d in assembly.errors if "aborted due to errors" not in d.message]
    assembly.errors = real or assembly.errors
    if not assembly.ok and not assembly.errors:
        assembly.errors.append(Diagnostic("error", log.strip() or f"ptxas exited with {result.returncode}"))
    return assembly


def _parse_log(log: str, assembly: Assembly) -> None:
    current: KernelResources | None = None
    for line in log.splitlines():
        diagnostic = _diagnostic(line)
        if diagnostic is not None:
            target = assembly.warnings if diagnostic.severity == "warning" else assembly.errors
            target.append(diagnostic)
            continue
        entry = _ENTRY.search(line)
        if entry:
            current = assembly.kernels.setdefault(entry.group(1), KernelResources())
        if current is not None:
            _parse_resources(line, current)


def _diagnostic(line: str) -> Diagnostic | None:
    match = _DIAGNOSTIC.match(line.strip())
    if match:
        return Diagnostic(match.group("sev").lower(), match.group("msg").strip(), int(match.group("line")))
    stripped = line.strip()
    if stripped.startswith("ptxas fatal"):
        return Diagnostic("fatal", stripped.split(":", 1)[-1].strip())
    if re.match(r"^ptxas (warning|error)", stripped):
        severity = "warning" if "warning" in stripped.split(":", 1)[0] else "error"
        return Diagnostic(severity, stripped.split(":", 1)[-1].strip())
    return None


def _parse_resources(line: str, kernel: KernelResources) -> None:
    used = _USED.search(line)
    if used:
        kernel.registers = int(used.group(1))
        kernel.barriers = int(used.group(2)) if used.group(2) else 0
        kernel.shared_memory_bytes = int(used.group(3)) if used.group(3) else 0
    spills = _SPILLS.search(line)
    if spills:
        kernel.stack_frame_bytes, kernel.spill_store_bytes, kernel.spill_load_bytes = map(
            int, spills.groups()
        )
