"""The trusted side: spawns one fresh child per job, drives its stages, enforces the limits.

The parent never imports the submission (nor torch). It talks to the child over two pipes in
length-prefixed JSON frames (``channel``), kills the child's whole process group when a stage runs
past its limit, captures the child's stdout/stderr into a capped log, sends the secret seed only
after the import was checked and the sealing key only after the child reports quiescence, and
rejects anything on the channel that does not follow the protocol (a forged report).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.harness import channel
from evaluator.harness.request import EvaluationRequest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Environment variables the child inherits (nothing else: no broker URL, no tokens).
PASSED_ENV = (
    "PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "NVIDIA_VISIBLE_DEVICES",
    # Hosts that share NVLink must keep multicast off in every process (GPU_FACTS.md).
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)
#: Seconds the child has to seal and send its report once it said it is ready.
SEAL_SECONDS = 60.0
#: Stage order; a message announcing a stage out of this order is a protocol violation.
STAGES = ("compile", "test", "ranked")


@dataclass
class ChildOutcome:
    """What the parent learnt from the child; ``body`` only from a validly sealed report."""

    body: dict[str, Any] | None = None
    status: str | None = None  # a whole-job status decided by the parent (TIMEOUT, REJECTED, ...)
    message: str = ""
    stage: str = "compile"
    shape: str | None = None
    log: str = ""
    exit_code: int | None = None
    notes: dict[str, str] = field(default_factory=dict)
    #: Seconds per phase as the parent's clock saw them (start_up, compile, test, ranked, seal).
    phase_seconds: dict[str, float] = field(default_factory=dict)


class ProtocolViolation(Exception):
    pass


def child_env(scratch: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    python_path = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(
        HOME=str(scratch),
        TMPDIR=str(scratch),
        LANG="C.UTF-8",
        PYTHONPATH=os.pathsep.join(python_path),
        PYTHONDONTWRITEBYTECODE="1",
        TRITON_CACHE_DIR=str(scratch / "triton"),
        TORCH_EXTENSIONS_DIR=str(scratch / "torch_extensions"),
        # torch.compile compiles in-process: a pool of compile workers would outlive the calls.
        TORCHINDUCTOR_COMPILE_THREADS="1",
    )
    return env


def read_log(path: Path, cap: int) -> str:
    """The child's output, capped: head and tail when it is longer than ``cap`` bytes."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if size <= cap:
                data = handle.read()
            else:
                head = handle.read(cap // 2)
                handle.seek(size - cap // 2)
                data = head + f"\n[... {size - cap} bytes cut ...]\n".encode() + handle.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class ChildRun:
    """One child process and the conversation with it."""

    def __init__(self, request: EvaluationRequest, config: dict[str, Any], scratch: Path) -> None:
        self.request = request
        self.config = config
        self.scratch = scratch
        self.key = secrets.token_bytes(32)
        self.outcome = ChildOutcome()
        self.stage_index = 0
        self.stages_seen: set[str] = set()
        self.deadline = time.monotonic() + request.limits.compile_s
        self.phase, self.phase_began = "start_up", time.monotonic()

    def limit(self, stage: str) -> float:
        limits = self.request.limits
        return {"compile": limits.compile_s, "test": limits.test_s, "ranked": limits.ranked_s}[stage]

    def spawn(self) -> None:
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        self.log_path = self.scratch / "child.log"
        self.phase_began = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = self._popen(to_child_r, from_child_w, log)
        os.close(to_child_r)
        os.close(from_child_w)
        self.reader = channel.FrameReader(self.from_child)

    def _popen(self, to_child_r: int, from_child_w: int, log: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evaluator.harness.child",
                "--in-fd",
                str(to_child_r),
                "--out-fd",
                str(from_child_w),
            ],
            cwd=self.scratch,
            env=child_env(self.scratch),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(to_child_r, from_child_w),
            start_new_session=True,
        )

    def next_phase(self, phase: str) -> None:
        now = time.monotonic()
        self.outcome.phase_seconds[self.phase] = round(now - self.phase_began, 3)
        self.phase, self.phase_began = phase, now

    def send(self, message: dict[str, Any]) -> None:
        try:
            channel.write_all(self.to_child, channel.encode(message))
        except BrokenPipeError:
            pass  # the child died; the reader will see EOF

    def enter_stage(self, stage: str) -> None:
        if stage not in STAGES or stage in self.stages_seen or STAGES.index(stage) < self.stage_index:
            raise ProtocolViolation(f"stage {stage!r} out of order")
        self.stages_seen.add(stage)
        self.next_phase(stage)
        self.stage_index = STAGES.index(stage)
        self.outcome.stage = stage
        self.outcome.shape = None
        self.deadline = time.monotonic() + self.limit(stage)

    def converse(self) -> None:
        """Run the protocol until a sealed report, a violation, a timeout or the child's death."""
        self.send({**self.config, "spawned_monotonic": self.phase_began})
        sealing = False
        while True:
            message = self.reader.next(self.deadline)
            kind = message["type"]
            if kind == "stage":
                self.enter_stage(str(message.get("stage")))
            elif kind == "progress":
                self.outcome.shape = str(message.get("shape"))
            elif kind == "imported" and self.outcome.stage == "compile" and not hasattr(self, "_seed_sent"):
                self._seed_sent = True
                self.send({"type": "seed", "secret": self.request.secret_seed})
            elif kind == "unsealed" and not sealing:
                self.outcome.status, self.outcome.message = "REJECTED", str(message.get("reason"))
                return
            elif kind == "ready" and not sealing:
                sealing = True
                self.next_phase("seal")
                self.deadline = time.monotonic() + SEAL_SECONDS
                self.send({"type": "key", "key": self.key.hex()})
            elif kind == "report" and sealing:
                self.accept_report(message)
                return
            else:
                raise ProtocolViolation(f"unexpected {kind!r} message")

    def accept_report(self, message: dict[str, Any]) -> None:
        body, mac = message.get("body"), message.get("mac")
        if not isinstance(body, str) or not channel.seal_is_valid(self.key, body, str(mac)):
            raise ProtocolViolation("the report's seal is not valid")
        extra = self.reader.drain()
        if extra:
            raise ProtocolViolation(f"{len(extra)} extra bytes after the report")
        import json

        self.outcome.body = json.loads(body)

    def run(self) -> ChildOutcome:
        self.spawn()
        try:
            self.converse()
        except channel.ChannelTimeout:
            where = f" (shape {self.outcome.shape})" if self.outcome.shape else ""
            self.outcome.status = "TIMEOUT"
            self.outcome.message = (
                f"stage {self.outcome.stage}{where} ran past its limit of {self.limit(self.outcome.stage):g} s; "
                "the process group was killed"
            )
        except ProtocolViolation as error:
            self.outcome.status, self.outcome.message = "REJECTED", f"forged report: {error} (class 4)"
        except channel.ChannelError as error:
            self.died(error)
        finally:
            self.next_phase("done")
            self.finish()
        return self.outcome

    def died(self, error: Exception) -> None:
        if self.reader.buffer and not self.reader.closed:
            self.outcome.status, self.outcome.message = (
                "REJECTED",
                f"forged report: garbage on the channel ({error}) (class 4)",
            )
            return
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.outcome.exit_code = code
        if not self.stages_seen:
            # The child died before the submission was loaded: the evaluator's fault, not a verdict.
            self.outcome.status = "INTERNAL"
            self.outcome.message = "the evaluator's child failed while starting"
            return
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        where = f", shape {self.outcome.shape}" if self.outcome.shape else ""
        self.outcome.status = "RUNTIME_ERROR"
        self.outcome.message = f"the process died ({how}) during stage {self.outcome.stage}{where}"

    def finish(self) -> None:
        kill_group(self.process)
        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self.outcome.log = read_log(self.log_path, self.request.limits.log_bytes)


def run_child(request: EvaluationRequest, config: dict[str, Any]) -> ChildOutcome:
    scratch = Path(tempfile.mkdtemp(prefix="solboard-job-"))
    try:
        return ChildRun(request, config, scratch).run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
