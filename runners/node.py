"""The node supervisor behind ``solboard runner``: GPUs -> slots -> one Celery worker per slot,
a control worker, heartbeats, restarts, and a clean stop on Ctrl-C / SIGTERM.

Process tree: supervisor -> ``celery worker`` per slot (own session, dies with the supervisor)
-> one jailed evaluator per job (own session, dies with its worker). Nothing here talks to a
database: a node holds the broker URL and its runner credential (the key that signs what it sends
to the site), and hands both to its workers through the environment, never on a command line:
/proc/<pid>/cmdline is readable by every user of the host.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.vocabulary import CPU, CUDA
from runners import calibration, heartbeat, identities, jobflow, nvml_probe, sandbox
from runners.celery_app import SUPERVISOR_PID_VARIABLE, build_app
from runners.slots import Slot, StateDir, plan_slots
from runners.spares import SPARES_VARIABLE
from solboard_common.config import REPO_ROOT, var_dir
from solboard_common.protocol import GpuInfo, JobResult, control_queue
from solboard_common.signing import CREDENTIAL_FILE_VARIABLE, CREDENTIAL_VARIABLE, Credential

log = logging.getLogger(__name__)
STOP_GRACE_S = 30.0


class NodeError(RuntimeError):
    """The node cannot start; the message says what to fix."""


@dataclass
class NodeConfig:
    name: str
    broker_url: str
    credential: Credential
    device: str = "auto"
    gpu_indices: list[int] | None = None
    state_dir: Path | None = None
    scratch: Path | None = None
    loglevel: str = "INFO"
    heartbeat_seconds: float = 10.0  # SOLBOARD_HEARTBEAT_SECONDS, read once by the CLI
    warm_spares: bool = True  # SOLBOARD_RUNNER_SPARES, read once by the CLI (runners/spares.py)

    @property
    def state_root(self) -> Path:
        return self.state_dir or var_dir() / "runner" / self.name


def resolve_gpus(device: str, only: list[int] | None) -> list[GpuInfo]:
    """GPUs this node serves: none on the CPU device; ``auto`` falls back to the CPU device."""
    if device == CPU:
        return []
    found = nvml_probe.discover(only)
    if device == CUDA and not found:
        raise NodeError("--device cuda but NVML finds no GPU (is the driver loaded?)")
    return found


def let_job_users_traverse(paths: list[Path]) -> list[str]:
    """A root runner's job users must reach the interpreter, its libraries and the project: add the
    search bit (o+x, not read) to the folders above them that lack it — /root is 0700 on Debian,
    and pyenv and clones often live there. Returns the folders changed, which the node logs."""
    changed = []
    for path in paths:
        for folder in [path, *path.parents]:
            if not folder.exists():  # made later (the scratch folder), by the runner itself
                continue
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                folder.chmod(mode | stat.S_IXOTH)
                changed.append(str(folder))
    return changed


def _job_user_paths(scratch: Path) -> list[Path]:
    interpreter = Path(sys.executable).resolve()
    return [interpreter.parent, Path(sys.base_prefix).resolve(), Path(sys.prefix), REPO_ROOT, scratch]


def check_job_user_can_run(user: sandbox.JobUser | None, scratch: Path) -> None:
    """Fail at start, not on the first job, when the job user cannot run the interpreter."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": "/"}
    with sandbox.Scratch(scratch, user) as folder:
        probe = f"import os, evaluator.report; os.listdir({str(folder.path)!r})"
        spec = sandbox.Spec(argv=[sys.executable, "-c", probe], env=env,
                            limits=sandbox.Limits(wall_seconds=60), user=user)
        result = sandbox.run(spec, folder.path)
    if result.returncode != 0:
        who = user.name if user else "the runner's user"
        raise NodeError(
            f"{who} cannot run {sys.executable} with the project ({REPO_ROOT}) in its scratch folder "
            f"({scratch}): "
            f"{result.stderr.decode(errors='replace').strip()[-800:]}\n"
            "Make the interpreter, its libraries, the project and every folder above the scratch "
            "folder readable/traversable by that user (e.g. `chmod o+x /root` for a pyenv there)."
        )


@dataclass
class WorkerProcess:
    label: str
    argv: list[str]
    env: dict[str, str]
    slot: Slot | None = None
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env=self.env, cwd=REPO_ROOT, start_new_session=True)
        log.info("started %s (pid %d)", self.label, self.process.pid)

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()


@dataclass
class Node:
    config: NodeConfig
    stop_event: threading.Event = field(default_factory=threading.Event)

    def prepare(self) -> None:
        self.state = StateDir(self.config.state_root, self.config.scratch)
        self.state.shutdown_marker.unlink(missing_ok=True)
        self.gpus = resolve_gpus(self.config.device, self.config.gpu_indices)
        self.slots = plan_slots(self.gpus)
        self.job_users = (
            {slot.key: identities.claim_block() for slot in self.slots} if os.geteuid() == 0 else {}
        )
        if self.job_users:
            for folder in let_job_users_traverse(_job_user_paths(self.state.scratch)):
                log.warning("job users may now traverse %s (o+x) to reach the interpreter/project", folder)
        for slot in self.slots:
            check_job_user_can_run(self._job_user(slot), self.state.scratch)
            jobflow.health_file(self.state, slot.key).unlink(missing_ok=True)
        self.calibrations = self._calibrate()
        self.messenger = jobflow.Messenger(build_app(self.config.broker_url), self.config.credential)
        self.workers = [self._worker(slot) for slot in self.slots] + [self._control_worker()]

    def _job_user(self, slot: Slot) -> sandbox.JobUser | None:
        """A uid of the slot's block, as the processes that run submitted code get one."""
        claimed = self.job_users.get(slot.key)
        return identities.Rotation(claimed[0]).take().untrusted() if claimed else None

    def _calibrate(self) -> dict[str, Path | None]:
        """One calibration per GPU type + driver, cached (the CPU device has no SOL: none), keyed by
        GPU type; and one per x<n> slot with its link measured, keyed by the slot's key."""
        done: dict[str, Path | None] = {}
        folder = self.state.root / "calibration"
        for gpu in self.gpus:
            if gpu.gpu_type not in done:
                done[gpu.gpu_type] = calibration.calibrate(folder, gpu.gpu_type, gpu.driver, gpu.index)
        drivers = {gpu.index: gpu.driver for gpu in self.gpus}
        for slot in self.slots:
            if slot.device == CUDA and len(slot.gpu_indices) > 1:
                done[slot.key] = calibration.calibrate_link(
                    folder,
                    slot.gpu_type,
                    drivers[slot.gpu_indices[0]],
                    slot.gpu_indices,
                    done.get(slot.gpu_type),
                )
        return done

    def calibration_of(self, slot: Slot) -> Path | None:
        """The file a slot's jobs get: its own (an x<n> slot's, with the link) or its GPU type's."""
        return self.calibrations.get(slot.key) or self.calibrations.get(slot.gpu_type)

    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop(CREDENTIAL_FILE_VARIABLE, None)  # the value itself follows: one source for workers
        env.update(
            {
                "CELERY_BROKER_URL": self.config.broker_url,
                CREDENTIAL_VARIABLE: self.config.credential.secret_string(),
                "PYTHONPATH": str(REPO_ROOT),
                "SOLBOARD_RUNNER_NODE": self.config.name,
                "SOLBOARD_RUNNER_STATE": str(self.state.root),
                "SOLBOARD_RUNNER_SCRATCH": str(self.state.scratch),
                SUPERVISOR_PID_VARIABLE: str(os.getpid()),
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            }
        )
        return env

    def _celery_argv(self, queue: str, hostname: str) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "runners.celery_app", "worker", "-Q", queue,
                "--pool", "solo", "--concurrency", "1", "--prefetch-multiplier", "1",
                "--hostname", hostname, "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--loglevel", self.config.loglevel]

    def _worker(self, slot: Slot) -> WorkerProcess:
        env = self._base_env()
        path = self.calibration_of(slot)
        claimed = self.job_users.get(slot.key)
        env.update({"SOLBOARD_RUNNER_SLOT": slot.to_json(), "CUDA_VISIBLE_DEVICES": slot.cuda_visible_devices,
                    SPARES_VARIABLE: "1" if self.config.warm_spares else "0",
                    identities.UID_BLOCK_VARIABLE: claimed[0].to_text() if claimed else "",
                    "SOLBOARD_RUNNER_CALIBRATION": str(path) if path else ""})
        return WorkerProcess(
            slot.key, self._celery_argv(slot.queue, f"{slot.key}@{self.config.name}"), env, slot
        )

    def _control_worker(self) -> WorkerProcess:
        env = self._base_env()
        env["CUDA_VISIBLE_DEVICES"] = ""
        queue = control_queue(self.config.name)
        return WorkerProcess("control", self._celery_argv(queue, f"control@{self.config.name}"), env)

    def run(self) -> None:
        """Start everything and supervise until ``stop_event`` is set; then stop cleanly."""
        for worker in self.workers:
            worker.start()
        try:
            self._loop()
        finally:
            self.shutdown()

    def _loop(self) -> None:
        interval = self.config.heartbeat_seconds
        next_beat = 0.0
        while not self.stop_event.is_set():
            if time.monotonic() >= next_beat:
                self.send_heartbeats(interval)
                jobflow.flush_outbox(self.state, self.messenger)
                next_beat = time.monotonic() + interval
            for worker in self.workers:
                self._supervise(worker)
            self.stop_event.wait(0.5)

    def send_heartbeats(self, interval: float) -> None:
        for slot in self.slots:
            beat = heartbeat.build(self.config.name, slot, self.state, self.gpus,
                                   calibration.load(self.calibration_of(slot)))
            try:
                self.messenger.heartbeat(beat, expires=max(30.0, 3 * interval))
            except Exception:  # broker down: the next beat tries again
                log.warning("heartbeat not sent (broker unavailable?)")

    def _supervise(self, worker: WorkerProcess) -> None:
        code = worker.exited()
        if code is None or self.stop_event.is_set():
            return
        if worker.next_start == 0.0:
            log.error("%s exited with %s", worker.label, code)
            if worker.slot is not None:
                self._report_lost_job(worker.slot, code)
            worker.restarts += 1
            worker.next_start = time.monotonic() + min(30.0, 2.0 ** min(worker.restarts, 5))
        if time.monotonic() < worker.next_start or not self._slot_usable(worker.slot):
            return
        worker.next_start = 0.0
        worker.start()

    def _slot_usable(self, slot: Slot | None) -> bool:
        """An unhealthy slot (GPU held after a job) restarts only once NVML shows it free."""
        if slot is None or jobflow.read_health(self.state, slot.key)[0]:
            return True
        if nvml_probe.processes_on(slot.gpu_indices):
            return False
        jobflow.health_file(self.state, slot.key).unlink(missing_ok=True)
        return True

    def _report_lost_job(self, slot: Slot, code: int) -> None:
        """The worker died mid-job: say so now (the site retries, bounded) instead of waiting."""
        current = self.state.read_slot(slot.key)
        if not current.get("job_id"):
            return
        result = JobResult(job_id=current["job_id"], evaluation_id=int(current["evaluation_id"]),
                           runner=slot.runner_name(self.config.name), outcome="runner_error",
                           message=f"the runner's worker died during the job ({sandbox.signal_name(code)})")
        jobflow.deliver_via(self.state, self.messenger, result)
        self.state.write_slot(slot.key, job_id=None, evaluation_id=None, marker=current.get("marker"))

    def shutdown(self) -> None:
        """Running jobs are killed and released (the site requeues them), then workers stop."""
        self.state.shutdown_marker.touch()
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(
            self.state.read_slot(s.key).get("job_id") for s in self.slots
        ):
            time.sleep(0.2)
        for worker in self.workers:
            if worker.exited() is None and worker.process is not None:
                worker.process.send_signal(signal.SIGTERM)
        for worker in self.workers:
            self._reap(worker, deadline + STOP_GRACE_S)
        self.state.shutdown_marker.unlink(missing_ok=True)

    @staticmethod
    def _reap(worker: WorkerProcess, deadline: float) -> None:
        if worker.process is None:
            return
        try:
            worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop; killing it", worker.label)
            os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()
