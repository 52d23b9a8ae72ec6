"""A Celery round trip through real worker processes on a real broker.

The broker is the embedded SQLite one by default and whatever CELERY_BROKER_URL names otherwise
(Redis in CI). Two workers run the site's app: one consumes ``site`` only, the other one GPU queue
only. Tasks must reach the right worker and only it: the worker's answer names itself and the queue
it was delivered from.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from celery import Celery

from leaderboard.celery import RoutingError, build_app
from solboard_common.protocol import RUNNER_TASK, SITE_QUEUE, gpu_queue

REPO = Path(__file__).resolve().parents[2]
RESULT_TIMEOUT_S = 90
TASKS_PER_QUEUE = 3


@dataclass
class Cluster:
    client: Celery
    site_worker: str
    gpu_worker: str
    gpu_queue: str


def start_worker(hostname: str, queue: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "celery", "-A", "leaderboard.celery", "worker", "-Q", queue, "-n", hostname,
            "--pool", "solo", "--concurrency", "1", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--loglevel", "INFO"]
    with log.open("wb") as out:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    var = tmp_path_factory.mktemp("celery-var")
    broker = os.environ.get("CELERY_BROKER_URL") or f"sqla+sqlite:///{var / 'broker.sqlite3'}"
    results = f"db+sqlite:///{var / 'results.sqlite3'}"
    run_id = uuid.uuid4().hex[:8]
    queue = gpu_queue(f"fdn{run_id}", 1)  # unique: a shared Redis may carry other runs' queues
    env = {**os.environ, "SOLBOARD_VAR": str(var), "CELERY_BROKER_URL": broker,
           "CELERY_RESULT_BACKEND": results, "PYTHONUNBUFFERED": "1"}
    site_name, gpu_name = f"site@fdn-{run_id}", f"gpu@fdn-{run_id}"
    workers = [start_worker(site_name, SITE_QUEUE, env, var / "site-worker.log"),
               start_worker(gpu_name, queue, env, var / "gpu-worker.log")]
    try:
        yield Cluster(build_app(broker, results, main="foundation-test"), site_name, gpu_name, queue)
    finally:
        for worker in workers:
            stop_worker(worker)
        for log in sorted(var.glob("*-worker.log")):  # shown by pytest only when a test failed
            print(f"---- {log.name}\n{log.read_text(errors='replace')[-3000:]}")


def test_site_tasks_reach_the_site_worker_and_only_it(cluster: Cluster) -> None:
    pending = [cluster.client.send_task("leaderboard.ping") for _ in range(TASKS_PER_QUEUE)]
    answers = [result.get(timeout=RESULT_TIMEOUT_S) for result in pending]
    assert {(answer["hostname"], answer["queue"]) for answer in answers} == {
        (cluster.site_worker, SITE_QUEUE)
    }


def test_a_task_sent_to_a_gpu_queue_reaches_that_queues_worker_and_only_it(cluster: Cluster) -> None:
    pending = [cluster.client.send_task("leaderboard.ping", queue=cluster.gpu_queue)
               for _ in range(TASKS_PER_QUEUE)]
    answers = [result.get(timeout=RESULT_TIMEOUT_S) for result in pending]
    assert {(answer["hostname"], answer["queue"]) for answer in answers} == {
        (cluster.gpu_worker, cluster.gpu_queue)
    }


def test_both_queues_interleaved_still_reach_their_own_workers(cluster: Cluster) -> None:
    site = cluster.client.send_task("leaderboard.ping")
    gpu = cluster.client.send_task("leaderboard.ping", queue=cluster.gpu_queue)
    assert gpu.get(timeout=RESULT_TIMEOUT_S)["hostname"] == cluster.gpu_worker
    assert site.get(timeout=RESULT_TIMEOUT_S)["hostname"] == cluster.site_worker


def test_a_runner_job_without_a_gpu_queue_is_refused_at_send_time(tmp_path: Path) -> None:
    client = build_app(f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}", None, main="routing-test")
    with pytest.raises(RoutingError, match="needs an explicit queue"):
        client.send_task(RUNNER_TASK, kwargs={"job": {}})
    with pytest.raises(ValueError, match="not a GPU queue"):
        client.send_task(RUNNER_TASK, kwargs={"job": {}}, queue="site")


def test_every_site_task_names_the_site_queue_and_a_time_limit() -> None:
    from leaderboard import tasks  # noqa: F401  (registers the tasks)
    from leaderboard.celery import TASK_QUEUES, app

    site_tasks = [task for name, task in app.tasks.items() if name.startswith("leaderboard.")]
    assert site_tasks
    for task in site_tasks:
        assert TASK_QUEUES[task.name] == SITE_QUEUE, task.name
        assert app.amqp.router.route({}, task.name)["queue"].name == SITE_QUEUE, task.name
        assert task.time_limit and task.soft_time_limit and task.soft_time_limit < task.time_limit, task.name
