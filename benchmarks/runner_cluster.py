"""A throwaway SOLboard on one machine for the runner benchmarks: a fresh SQLite database and
embedded broker in a temporary folder, one site worker and N runner nodes as subprocesses.

Run the scripts with the project importable (``make setup`` installs it; else ``PYTHONPATH=.``).
Usage from a benchmark script (before anything imports Django):

    with Cluster(runners=2, device="cpu") as cluster:
        evaluation_ids = [cluster.submit("alice", source, mode="ranked") for _ in range(10)]
        cluster.wait_all(evaluation_ids)

Everything is stopped (and killed if needed) on exit; the logs are kept when ``keep`` is set.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Self

from _bench import provenance as bench_provenance

REPO = Path(__file__).resolve().parent.parent


class Cluster:
    def __init__(self, runners: int = 1, device: str = "cpu", env: dict[str, str] | None = None,
                 keep: bool = False, folder: Path | None = None, loglevel: str = "WARNING") -> None:
        self.folder = folder or Path(tempfile.mkdtemp(prefix="solboard-bench-", dir="/tmp"))
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o755)  # job users must reach their scratch folders under it
        self.keep, self.device, self.count, self.loglevel = keep, device, runners, loglevel
        self.env = {**os.environ, "SOLBOARD_VAR": str(self.folder), "PYTHONPATH": str(REPO),
                    "DATABASE_URL": f"sqlite:///{self.folder / 'db.sqlite3'}",
                    "CELERY_BROKER_URL": f"sqla+sqlite:///{self.folder / 'broker.sqlite3'}",
                    "CELERY_RESULT_BACKEND": f"db+sqlite:///{self.folder / 'results.sqlite3'}",
                    "SOLBOARD_HEARTBEAT_SECONDS": "2", "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "leaderboard.settings", **(env or {})}
        self.processes: list[subprocess.Popen[bytes]] = []
        self.names: list[str] = []

    def __enter__(self) -> Self:
        try:
            self._start_all()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start_all(self) -> None:
        os.environ.update(self.env)
        self._manage("migrate", "--noinput")
        self._manage("sync_gpu_types")
        self._manage("sync_problems")
        self._start(
            "site-worker",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "leaderboard.celery",
                "worker",
                "-Q",
                "site",
                "-n",
                "site@bench",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "WARNING",
            ],
        )
        for index in range(self.count):
            credential = self.folder / f"credential-bench{index}"  # each node signs with its own (0600)
            self._manage("runner_credentials", "issue", f"bench{index}", "--output", str(credential))
            self._start(
                f"runner-{index}",
                [
                    sys.executable,
                    "-m",
                    "runners",
                    "--device",
                    self.device,
                    "--credential-file",
                    str(credential),
                    "--loglevel",
                    self.loglevel,
                ],
            )
        import django

        django.setup()

    def _manage(self, *args: str) -> None:
        subprocess.run([sys.executable, str(REPO / "manage.py"), *args], env=self.env, check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)

    def _start(self, name: str, argv: list[str]) -> None:
        log = (self.folder / f"{name}.log").open("ab")
        self.processes.append(
            subprocess.Popen(
                argv, env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )
        self.names.append(name)

    def check_alive(self) -> None:
        """A site worker or runner node that died fails the wait at once, naming its log: on the H200 a
        node whose control loop died (a Redis too old for kombu) left a benchmark waiting until its
        time limit (benchmarks/results/fast_feedback.md#h200)."""
        for name, process in zip(self.names, self.processes, strict=True):
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with status {process.returncode}; see {self.folder / (name + '.log')}"
                )

    def wait_for_runners(self, timeout: float = 120) -> None:
        from leaderboard.models import RunnerNode

        deadline = time.monotonic() + timeout
        while RunnerNode.objects.filter(last_heartbeat__isnull=False).count() < self.count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"runners did not report within {timeout}s; see {self.folder}")
            self.check_alive()
            time.sleep(0.5)

    def submit(self, username: str, source: str, mode: str = "ranked", gpu_type: str = "cpu",
               problem: str = "vector_add") -> int:
        from django.contrib.auth import get_user_model

        from leaderboard.submissions import create_submission

        user = get_user_model().objects.get_or_create(username=username)[0]
        return create_submission(user, problem, "python", source, [gpu_type], mode).evaluations.get().pk

    def wait_all(self, evaluation_ids: list[int], timeout: float) -> dict[int, Any]:
        from leaderboard.models import TERMINAL_STATUSES, Evaluation

        deadline = time.monotonic() + timeout
        while True:
            done = dict(Evaluation.objects.filter(pk__in=evaluation_ids, status__in=TERMINAL_STATUSES)
                        .values_list("pk", "finished_at"))
            if len(done) == len(evaluation_ids) or time.monotonic() > deadline:
                return done
            self.check_alive()
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if not self.keep:
            shutil.rmtree(self.folder, ignore_errors=True)


def provenance() -> dict[str, Any]:
    """_bench's header, plus the machine and its load: these benchmarks share a machine with others."""
    return bench_provenance() | {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
        "load_average_at_start": os.getloadavg(),
    }
