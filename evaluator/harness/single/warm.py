"""A judge prepared before its job exists: the warm spare (``python -m evaluator serve-spare``).

A runner slot starts the evaluator's process for its *next* job ahead of time, in two parts:

1. ``stage``, while another job may still run on the GPU, nothing that touches the device: the
   judge imports torch and the harness, spawns the untrusted child (which imports torch and the
   modules of its device's timing, L2 controls, profiler and CUDA IPC), and on a GPU launches the
   Nsight Compute witness session and accepts its witness process's connection (that process
   imports torch and waits). It prints ``staged`` and waits for the runner's word.
2. ``warm_device``, once the runner found the GPU free of any job: the CUDA contexts of the judge,
   the child and the witness process, made at the same time, the profiler (CUPTI), the L2
   controls, the BLAS handles. It prints ``ready`` and waits for one job.

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

from evaluator.harness.clock import PartClock
from evaluator.harness.parent import ChildProcess
from evaluator.harness.witness.witnesses import NcuSession

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

    def record_child(self, claims: dict[str, Any]) -> None:
        """The child's own split of its start-up (a claim, informational: ``child.*``)."""
        self.start_up.update({f"child.{name}": float(value) for name, value in claims.items()
                              if isinstance(value, (int, float))})

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
        return {
            "idle_seconds": round(time.monotonic() - self.ready_monotonic, 3),
            "start_up": dict(self.start_up),
        }

    def close(self) -> None:
        """Kill what is left (after a job, the judge already closed its child) and remove the scratch."""
        self.child.close()
        if self.witness is not None:
            self.witness.discard()
            self.witness = None
        shutil.rmtree(self.scratch, ignore_errors=True)


def stage(device: str, start_limit_s: float) -> WarmStart:
    """The first part of a spare's start, which touches no device: the judge's and the child's
    imports (torch, the harness, the device's modules), the child's process, ncu and the witness
    process, whose connection is accepted now. A spare stages while another job runs on its GPU:
    no process of it may hold a CUDA context then (NVML would count it beside the running job's
    witnessed calls, which it would void, and a context's creation and warm-up work would share the
    GPU with a timed job). Raises SpareFailed (everything it started is killed)."""
    began = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="solboard-job-"))
    child = _spawn_staged_child(scratch, device, start_limit_s)
    warm = WarmStart(device, scratch, child, None)
    try:
        warm.witness = _launch_witness(scratch, device)
        warm.start_up["judge.imports"] = round(_import_judge(device), 3)
        claims = child.receive("staged").get("start_up_seconds") or {}
        _connect_witness(warm, max(1.0, start_limit_s - (time.monotonic() - began)))
    except Exception as error:  # whatever failed, it is not staged
        raise _failed(warm, "staging", error) from None
    child.enter("spare", math.inf)  # waiting for the device is no stage: no deadline until then
    warm.record_child(claims)
    warm.start_up["staged"] = round(time.monotonic() - began, 3)
    return warm


def warm_device(warm: WarmStart, start_limit_s: float) -> None:
    """The second part, on the device, once the runner says no job runs on it: the CUDA contexts
    of the judge, the child and the witness process, the profiler, the L2 controls, the BLAS
    handles, made at the same time in the three processes. Raises SpareFailed."""
    began = time.monotonic()
    warm.child.enter("warm_up", start_limit_s)
    try:
        warm.child.send({"type": "warm_up", "device": warm.device})
        asked = _ask_witness_to_prepare(warm)
        warm.start_up.update({f"judge.{name}": seconds for name, seconds in _warm_judge(warm.device).items()})
        claims = warm.child.receive("warmed").get("start_up_seconds") or {}
        if asked:
            _await_witness(warm, max(1.0, start_limit_s - (time.monotonic() - began)))
    except Exception as error:  # whatever failed (the child, CUDA), it is not ready
        raise _failed(warm, "warming up its device", error) from None
    warm.child.enter("spare", math.inf)  # waiting for a job is no stage: no deadline until one comes
    warm.record_child(claims)
    warm.start_up["device"] = round(time.monotonic() - began, 3)
    warm.start_up["total"] = round(warm.start_up.get("staged", 0.0) + warm.start_up["device"], 3)
    warm.ready_monotonic = time.monotonic()


def prepare(device: str, start_limit_s: float) -> WarmStart:
    """Both parts at once (a spare told to warm as soon as it is staged)."""
    warm = stage(device, start_limit_s)
    warm_device(warm, start_limit_s)
    return warm


def _failed(warm: WarmStart, step: str, error: Exception) -> SpareFailed:
    log = warm.child.close()[-4000:]
    warm.close()
    return SpareFailed(f"the spare failed while {step} ({type(error).__name__}: {error})\n{log}")


def _spawn_staged_child(scratch: Path, device: str, start_limit_s: float) -> ChildProcess:
    """The untrusted child, told to import what its device needs and nothing more (``stage``)."""
    child = ChildProcess(["-m", "evaluator.harness.single.child"], scratch, IDLE_LOG_CAP)
    spawned = time.monotonic()
    child.spawn(start_limit_s)
    child.send({"type": "stage", "device": device, "spawned_monotonic": spawned})
    return child


def _launch_witness(scratch: Path, device: str) -> NcuSession | None:
    """On a GPU, the witness session a ranked job uses (its defaults: one pass, no sections);
    discarded unused for a test job. ncu starts its target, which imports torch and connects; no
    CUDA call until it is asked to prepare."""
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
    except OSError:
        warm.witness.discard()
        warm.witness = None
    warm.start_up["witness.connect"] = round(time.monotonic() - began, 3)


def _ask_witness_to_prepare(warm: WarmStart) -> bool:
    """Have the witness process make its CUDA context while the judge and the child make theirs."""
    if warm.witness is None:
        return False
    try:
        warm.witness.ask_prepare()
    except OSError:
        _drop_witness(warm)
        return False
    return True


def _await_witness(warm: WarmStart, limit_s: float) -> None:
    assert warm.witness is not None
    try:
        warm.start_up["witness.prepare"] = round(warm.witness.await_prepared(limit_s), 3)
    except OSError:
        _drop_witness(warm)


def _drop_witness(warm: WarmStart) -> None:
    if warm.witness is not None:
        warm.witness.discard()
        warm.witness = None


def _import_judge(device: str) -> float:
    """The judge's own modules (what ``evaluate`` and the device's warm-up need), imported before
    its device is touched. Returns the seconds it took."""
    began = time.monotonic()
    import torch

    import evaluator.api
    import evaluator.harness.device
    import evaluator.harness.single.judge

    if device == "cuda":
        import torch.profiler  # noqa: F401

        import evaluator.harness.timing.telemetry  # noqa: F401
    return time.monotonic() - began


def _warm_judge(device: str) -> dict[str, float]:
    """The judge's own trusted paths, warmed while the child warms up: the CUDA context, the
    profiler (CUPTI) the baseline is timed with, the BLAS handles. Returns the seconds by part."""
    import torch

    from evaluator.harness.device import warm_blas

    clock = PartClock()
    if device == "cuda":
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        clock.mark("context")
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities):
            torch.ones(16, device="cuda").add_(1)
        torch.cuda.synchronize()
        clock.mark("profiler")
    else:
        torch.set_num_threads(1)
    warm_blas(device)
    clock.mark("blas")
    return clock.parts
