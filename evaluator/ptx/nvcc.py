"""``.cu`` -> PTX with nvcc for one target (``-gencode=arch=compute_90a,code=sm_90a``).

The PTX then goes through the same ptxas path as a PTX submission, so both languages get the same
errors, resources and evidence. Source is untrusted and this may run on the web's upload path:
only ``#include <system_header>`` is accepted (no quoted, absolute, relative or macro includes),
so no file of the host can be pulled into the compile or echoed back in an error message.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.ptx.archs import get_arch
from evaluator.ptx.assemble import Diagnostic
from evaluator.ptx.errors import CompileError
from evaluator.ptx.toolchain import run_tool

SOURCE_NAME = "submission.cu"
_INCLUDE = re.compile(r"^\s*(?:#|%:|\?\?=)\s*(include|include_next|import|embed)\b(.*)$")
_SAFE_HEADER = re.compile(r"^<[A-Za-z0-9_][A-Za-z0-9_./]*>$")
_NVCC_DIAGNOSTIC = re.compile(
    r"^(?P<file>[^\s(]+)\((?P<line>\d+)\):\s*(?P<sev>error|warning)[^:]*:\s*(?P<msg>.*)$"
)
NVCC_FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo"]


def check_includes(source: str) -> None:
    """Refuse any include that could read a file other than a toolkit/system header."""
    # Backslash-newline splices lines before directives are recognised: check spliced lines.
    spliced = re.sub(r"\\[ \t]*\r?\n", "", source)
    for number, line in enumerate(spliced.splitlines(), start=1):
        match = _INCLUDE.match(line)
        if not match:
            continue
        target = match.group(2).split("//")[0].strip()
        if match.group(1) != "include" or not _SAFE_HEADER.match(target) or ".." in target:
            raise CompileError(
                f"{SOURCE_NAME}:{number}: only #include <header> of system/CUDA headers is allowed, got {line.strip()!r}"
            )


@dataclass
class CudaCompile:
    ok: bool
    ptx: str | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    log: str = ""

    def raise_for_errors(self) -> str:
        if self.ptx is None:
            lines = "\n".join(d.render() for d in self.errors)
            raise CompileError(f"nvcc failed for {SOURCE_NAME}:\n{lines}\n\n{self.log.strip()}")
        return self.ptx


def compile_to_ptx(source: str, arch: str, timeout_s: float = 180.0) -> CudaCompile:
    """PTX text or nvcc's diagnostics verbatim (line numbers of the .cu); never raises for bad C++."""
    try:
        check_includes(source)
    except CompileError as error:
        return CudaCompile(False, None, [Diagnostic("error", error.message)], log=error.message)
    with tempfile.TemporaryDirectory(prefix="solboard-nvcc-") as tmp:
        folder = Path(tmp)
        (folder / SOURCE_NAME).write_text(source)
        args = ["-ptx", get_arch(arch).gencode, *NVCC_FLAGS, "-o", "out.ptx", SOURCE_NAME]
        result = run_tool("nvcc", args, folder, timeout_s)
        ptx_path = folder / "out.ptx"
        ptx = ptx_path.read_text() if result.returncode == 0 and ptx_path.exists() else None
    log = (result.stdout + result.stderr).replace(tmp + "/", "")
    diagnostics = parse_nvcc_log(log)
    errors = [d for d in diagnostics if d.severity == "error"]
    if ptx is None and not errors:
        errors = [Diagnostic("error", log.strip() or f"nvcc exited with {result.returncode}")]
    warnings = [d for d in diagnostics if d.severity == "warning"]
    return CudaCompile(ptx is not None, ptx, errors, warnings, log)


def parse_nvcc_log(log: str) -> list[Diagnostic]:
    diagnostics = []
    for line in log.splitlines():
        match = _NVCC_DIAGNOSTIC.match(line.strip())
        if match:
            diagnostics.append(
                Diagnostic(match.group("sev"), match.group("msg").strip(), int(match.group("line")))
            )
    return diagnostics
