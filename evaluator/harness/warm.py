"""A judge prepared before its job exists: the warm spare (``python -m evaluator serve-spare``).

A runner slot that is idle starts the evaluator's process for its *next* job ahead of time. That
process (the judge) imports torch, sets up its device and its own trusted paths (CUDA context,
profiler, BLAS handles), spawns the untrusted child and has it warm up its device (the child's
imports, CUDA context, profiler, L2 controls, CUDA IPC, BLAS), and on a GPU launches the Nsight
Compute witness session and accepts its connection. Then it waits for one job.

Why this is safe (docs/security.md, "Warm spares"):

- Nothing of any submission has run in it: the child is untrusted from the submission's first
  import, and that import happens only after the job was handed over. Until then every process of
  the spare runs our code only, so what it reports (ready, its split of the start-up) is ours.
- It knows nothing of its job until then: the child is told only the device; the problem,
  the file, the shapes and the secret seed arrive with the job. The secret seed stays in the judge
  as in a fresh process.
- It serves exactly one job and exits; a spare that is not used is killed, never handed to a later
  job. So nothing one submission left in a process can be met by the next submission.
"""

from __future__ import annotations

import math
import select
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.harness.parent import ChildProcess
from evaluator.harness.witness import NcuSession

#: The child's log cap while it waits (nothing of a submission has written to it yet); the job's
#: own cap (``--log-bytes``) applies once it is handed over.
IDLE_LOG_CAP = 64 * 1024


class SpareFailed(RuntimeError):
    """The spare could not be prepared; the message says why (with the child's log)."""


@dataclass
class WarmStart:
    device: str
    scratch: Path
    child: ChildProcess
    witness: NcuSession | None
    #: Seconds of the spare's start-up by part (the judge's and the child's), for the report.
    start_up: dict[str, float] = field(default_factory=dict)
    ready_monotonic: float = 0.0
    #: Set once a job took the child: a warm start serves one job.
    used: bool = False
    #: Set by the judge when the child died after the hand-over but before the submission's
    #: import: nothing of the job ran, so the spare reports it was not ready.
    child_lost: bool = False

    def problem(self) -> str | None:
        """Why this spare cannot take a job, or None when it can: its child and its witness
        process must be alive, and the child must not have spoken or closed its channel since it
        reported warm (it speaks only when asked)."""
        code = self.child.process.poll()
        if code is not None:
            return f"its child exited ({'signal ' + str(-code) if code < 0 else 'exit status ' + str(code)})"
        readable, _, _ = select.select([self.child.from_child], [], [], 0)
        if readable:
            return "its child wrote on its channel or closed it before being asked"
        if self.witness is not None and not self.witness.alive():
            return "its witness session (ncu) exited"
        return None

    def hand_over_child(self, start_limit_s: float, log_cap: int) -> ChildProcess:
        """The warm child, for the one job now judged; its stage limit starts now."""
        if self.used:
            raise RuntimeError("a warm spare serves one job only")
        self.used = True
        self.child.log_cap = log_cap
        self.child.enter("compile", start_limit_s)
        return self.child

    def hand_over_witness(self) -> NcuSession | None:
        witness, self.witness = self.witness, None
        return witness

    def facts(self) -> dict[str, Any]:
        return {"idle_seconds": round(time.monotonic() - self.ready_monotonic, 3), "start_up": dict(self.start_up)}

    def close(self) -> None:
        """Kill what is left (after a job, the judge already closed its child) and remove the scratch."""
        self.child.close()
        if self.witness is not None:
            self.witness.discard()
            self.witness = None
        shutil.rmtree(self.scratch, ignore_errors=True)


def prepare(device: str, start_limit_s: float) -> WarmStart:
    """Start and warm everything a job of ``device`` needs that does not depend on the job.
    Raises SpareFailed (everything it started is killed)."""
    from evaluator.harness.judge import spawn_child

    began = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="solboard-job-"))
    child = spawn_child(scratch, device, start_limit_s, IDLE_LOG_CAP)
    warm = WarmStart(device, scratch, child, None)
    try:
        warm.witness = _launch_witness(scratch, device)
        warm.start_up["judge"] = round(_warm_judge(device), 3)
        claims = child.receive("warmed").get("start_up_seconds") or {}
        _connect_witness(warm, max(1.0, start_limit_s - (time.monotonic() - began)))
    except Exception as error:  # noqa: BLE001 - whatever failed (the child, CUDA), it is not ready
        log = child.close()[-4000:]
        warm.close()
        raise SpareFailed(f"the spare's child failed while warming up ({type(error).__name__}: {error})\n{log}")
    child.enter("spare", math.inf)  # waiting for a job is no stage: no deadline until one comes
    warm.start_up.update({f"child.{name}": float(value) for name, value in claims.items()
                          if isinstance(value, (int, float))})
    warm.start_up["total"] = round(time.monotonic() - began, 3)
    warm.ready_monotonic = time.monotonic()
    return warm


def _launch_witness(scratch: Path, device: str) -> NcuSession | None:
    """On a GPU, the witness session a ranked job uses (its defaults: one pass, no sections);
    discarded unused for a test job."""
    if device != "cuda":
        return None
    session = NcuSession(scratch, profile=True, sections=False)
    if session.ncu is None:
        return None
    session.launch()
    return session


def _connect_witness(warm: WarmStart, limit_s: float) -> None:
    """Accept the witness process's connection now, while only our code runs anywhere in the
    job. A session that fails here is dropped: the job then starts its own, as a fresh process does."""
    if warm.witness is None:
        return
    began = time.monotonic()
    try:
        warm.witness.start(limit_s)
        warm.start_up["witness_prepare"] = round(warm.witness.prepare(max(1.0, limit_s - (time.monotonic() - began))), 3)
    except OSError:
        warm.witness.discard()
        warm.witness = None


def _warm_judge(device: str) -> float:
    """The judge's own trusted paths, warmed while the child warms up: the CUDA context, the
    profiler (CUPTI) the baseline is timed with, the BLAS handles. Returns the seconds it took."""
    began = time.monotonic()
    import torch

    from evaluator.harness.device import warm_blas

    if device == "cuda":
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities):
            torch.ones(16, device="cuda").add_(1)
        torch.cuda.synchronize()
    else:
        torch.set_num_threads(1)
    warm_blas(device)
    return time.monotonic() - began
