"""``.cu`` -> PTX with nvcc for one target (``-gencode=arch=compute_90a,code=sm_90a``).

The PTX then goes through the same ptxas path as a PTX submission, so both languages get the same
errors, resources and evidence. The source is untrusted and this runs on the site's upload path:
nvcc runs jailed in another process (``jailed.py``: private root with only the toolchain and
include folders, no network, CPU/memory/file limits, killed past its time); every file its
preprocessor opened must be a toolkit or host-compiler header (``includes.py``), or the upload is
refused without a word of the file; and the messages returned keep only the submission's own
diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evaluator.ptx.archs import get_arch
from evaluator.ptx.errors import CompileError
from evaluator.ptx.includes import (
    PREPROCESSOR_FLAGS,
    SOURCE_NAME,
    Scrubbed,
    refused_include,
    scrub_log,
    split_opened_headers,
)
from evaluator.ptx.jailed import JailedResult, ToolLimits, WorkFolder, run_jailed
from evaluator.ptx.ptxas import Diagnostic
from evaluator.ptx.sourcetext import text_problem

NVCC_FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo"]


@dataclass
class CudaCompile:
    ok: bool
    ptx: str | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    log: str = ""  # the scrubbed diagnostics, never nvcc's raw output

    def raise_for_errors(self) -> str:
        if self.ptx is None:
            lines = "\n".join(d.render() for d in self.errors)
            raise CompileError(f"nvcc failed for {SOURCE_NAME}:\n{lines}")
        return self.ptx


def compile_to_ptx(
    source: str, arch: str, timeout_s: float = 180.0, limits: ToolLimits | None = None
) -> CudaCompile:
    """PTX text or the submission's diagnostics (line numbers of the .cu); never raises for bad C++."""
    limits = limits or ToolLimits(wall_seconds=timeout_s)
    problem = text_problem(source)
    if problem is not None:
        return _refused(problem)
    with WorkFolder("solboard-nvcc-") as folder:
        (folder.work / SOURCE_NAME).write_bytes(source.encode("utf-8"))
        args = [
            "-ptx",
            get_arch(arch).gencode,
            *NVCC_FLAGS,
            *PREPROCESSOR_FLAGS,
            "-o",
            "out.ptx",
            SOURCE_NAME,
        ]
        run = run_jailed("nvcc", args, folder, limits)
        preprocessed = split_opened_headers(run.stderr.replace(str(folder.work) + "/", ""))
        refusal = refused_include(preprocessed.opened, folder.work)
        ptx_path = folder.work / "out.ptx"
        ptx = (
            ptx_path.read_text() if run.returncode == 0 and not run.timed_out and ptx_path.exists() else None
        )
    if refusal is not None:  # first: a refused include withholds everything else the run said
        return _refused(refusal)
    return _outcome(run, ptx, scrub_log(preprocessed.log_lines), limits)


def _refused(message: str) -> CudaCompile:
    return CudaCompile(False, None, [Diagnostic("error", message)], log=message)


def _outcome(run: JailedResult, ptx: str | None, scrubbed: Scrubbed, limits: ToolLimits) -> CudaCompile:
    limit = run.limit_message("nvcc", limits)
    if limit is not None:
        scrubbed.errors.insert(0, Diagnostic("error", limit))
        ptx = None
    if ptx is None and not scrubbed.errors:
        hidden = f"; {scrubbed.hidden} diagnostic(s) in other files are not shown" if scrubbed.hidden else ""
        scrubbed.errors.append(Diagnostic("error", f"nvcc exited with status {run.returncode}{hidden}"))
    return CudaCompile(ptx is not None, ptx, scrubbed.errors, scrubbed.warnings, scrubbed.render())
