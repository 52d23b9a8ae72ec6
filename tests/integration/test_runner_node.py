"""A real CPU runner node (supervisor + Celery workers + jailed evaluator) on a real broker.

No Django here: the test plays the site, sending jobs and control messages by task name and
reading what the runner sends to the ``site`` queue, exactly as a site worker would receive it.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runners import procs
from runners.celery_app import build_app
from solboard_common.protocol import CONTROL_TASK, ControlMessage, JobLimits, control_queue
from solboard_common.signing import message_mac, unsigned
from tests.harness_helpers import REPO
from tests.runner_helpers import (
    HANGING_KERNEL,
    RunnerProcess,
    SiteQueue,
    broker_environment,
    isolated_broker,
    make_job,
    send_job,
    traversable_folder,
)

pytestmark = pytest.mark.integration
SHORT = JobLimits(compile_seconds=20, test_seconds=4, ranked_seconds=10)


@dataclass
class Node:
    broker: str
    runner: RunnerProcess
    site: SiteQueue

    def cancel(self, job_id: str, evaluation_id: int) -> None:
        message = ControlMessage(job_id=job_id, evaluation_id=evaluation_id, reason="test cancel")
        build_app(self.broker).send_task(CONTROL_TASK, args=[message.model_dump(mode="json")],
                                         queue=control_queue(self.runner.name))


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    var = traversable_folder()
    broker = isolated_broker(var, redis_db=14)
    runner = RunnerProcess(f"t{os.getpid()}", broker, var, {"SOLBOARD_PLANTED_SECRET": "hunter2"}).start()
    try:
        with broker_environment(broker):
            site = SiteQueue(broker)
            site.wait_for(lambda task, payload: task == "leaderboard.runner_heartbeat", timeout=60)
            yield Node(broker, runner, site)
    finally:
        runner.stop()
        print(runner.log_tail())
        shutil.rmtree(var, ignore_errors=True)


def test_a_job_comes_back_as_a_report_that_describes_its_sandbox(node: Node) -> None:
    job = make_job(1)
    send_job(node.broker, job)
    result = node.site.result_of(job.job_id)
    assert result["outcome"] == "completed", result["message"]
    assert result["runner"] == f"{node.runner.name}:cpu"
    report = result["report"]
    assert report["status"] == "PASSED" and report["device"]["gpu_type"] == "cpu"
    assert report["sandbox"]["network"].startswith("namespace") or os.geteuid() != 0
    assert "gaps" in report["sandbox"] and report["sandbox"]["gpu_check"] == "not applicable (CPU device)"
    assert node.site.count("leaderboard.job_started", job.job_id) == 1
    # The runner's GPU hold (the site bounds it, leaderboard/gpu_time.py): the locks taken -> the
    # GPU check after the job, which covers the evaluator's run.
    assert report["wall_seconds"] <= result["gpu_hold_seconds"] < report["wall_seconds"] + 60




ATTACK = """
import os, socket, subprocess, sys, time

def attempt(what, action):
    try:
        action(); print("ATTACK", what, "SUCCEEDED", file=sys.stderr)
    except Exception as error:
        print("ATTACK", what, "blocked:", type(error).__name__, file=sys.stderr)

attempt("network", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
print("ATTACK secret", os.environ.get("SOLBOARD_PLANTED_SECRET"), os.environ.get("CELERY_BROKER_URL"),
      os.environ.get("SOLBOARD_RUNNER_CREDENTIAL"), file=sys.stderr)
attempt("write", lambda: open("{outside}", "w").write("owned"))
if os.fork() == 0:
    os.setsid()
    with open(os.path.expanduser("~/daemon.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(600)
    os._exit(0)

def kernel(a, b, c):
    c.copy_(a + b)
"""


def test_a_submission_that_attacks_the_runner_is_contained_and_reported(
    node: Node, listener: tuple[int, list[object]]
) -> None:
    port, accepted = listener
    outside = node.runner.var / "owned.txt"  # a folder the job user may enter but not write
    job = make_job(2, source=ATTACK.format(port=port, outside=outside), limits=SHORT)
    send_job(node.broker, job)
    result = node.site.result_of(job.job_id)
    assert result["outcome"] == "completed", result["message"]
    text = result["report"]["log"] + result["log"]
    assert "SUCCEEDED" not in text or os.geteuid() != 0, text
    assert "hunter2" not in str(result) and node.broker not in str(result)
    assert node.runner.credential.secret_string() not in str(result)
    assert accepted == [] or os.geteuid() != 0
    assert not outside.exists() or os.geteuid() != 0
    assert int(result["report"]["sandbox"]["leftover_processes_killed"]) >= 1
    user = result["report"]["sandbox"]["user"]
    found = re.fullmatch(r"solboard-job \(uid (\d+)\)", user)
    if found:  # nothing of this job survives it (its daemon included): no process holds its uids, the
        # judge's or the untrusted processes' (the slot's next warm spare has a pair of its own)
        child = int(found.group(1))
        survivors = set(procs.pids_with_uid(child)) | set(procs.pids_with_uid(child - 1))
        assert not survivors, survivors


def test_every_message_the_node_sends_is_signed_with_its_credential(node: Node) -> None:
    job = make_job(10)
    send_job(node.broker, job)
    node.site.result_of(job.job_id)
    credential = node.runner.credential
    assert {task for task, _ in node.site.seen} >= {"leaderboard.store_result", "leaderboard.job_started",
                                                    "leaderboard.runner_heartbeat"}
    for task, payload in node.site.seen:
        body, auth = unsigned(payload)
        assert auth["credential"] == credential.public_id and len(auth["nonce"]) == 32
        assert auth["mac"] == message_mac(
            credential.key, task, body, credential.public_id, auth["ts"], auth["nonce"]
        )
    nonces = [payload["auth"]["nonce"] for _, payload in node.site.seen]
    assert len(set(nonces)) == len(nonces)


def test_no_process_of_the_node_has_a_secret_on_its_command_line(node: Node) -> None:
    secret = node.runner.credential.secret_string()
    key = secret.rsplit(":", 1)[1]
    tree = node.runner.tree()
    assert len(tree) >= 3  # the supervisor, a slot worker, the control worker
    for pid in tree:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert key not in argv and "SOLBOARD_RUNNER_CREDENTIAL=" not in argv, argv


def test_a_hanging_kernel_times_out_and_the_runner_takes_the_next_job(node: Node) -> None:
    hanging, after = make_job(3, source=HANGING_KERNEL, limits=SHORT), make_job(4)
    send_job(node.broker, hanging)
    send_job(node.broker, after)
    result = node.site.result_of(hanging.job_id)
    statuses = {result["outcome"], (result["report"] or {}).get("status")}
    assert "TIMEOUT" in statuses or "timeout" in statuses, result
    assert node.site.result_of(after.job_id)["report"]["status"] == "PASSED"


def test_a_cancel_on_the_control_queue_kills_the_running_job(node: Node) -> None:
    long = JobLimits(compile_seconds=60, test_seconds=120, ranked_seconds=60)
    hanging, after = make_job(5, source=HANGING_KERNEL, limits=long), make_job(6)
    send_job(node.broker, hanging)
    send_job(node.broker, after)
    node.site.wait_for(lambda t, p: t == "leaderboard.job_started" and p["job_id"] == hanging.job_id, 60)
    time.sleep(1.0)
    cancelled_at = time.monotonic()
    node.cancel(hanging.job_id, hanging.evaluation_id)
    result = node.site.result_of(hanging.job_id, timeout=60)
    assert result["outcome"] == "cancelled" and "test cancel" in result["message"]
    assert time.monotonic() - cancelled_at < 30
    assert node.site.result_of(after.job_id)["report"]["status"] == "PASSED"


def test_the_cpu_node_serves_multi_gpu_jobs_on_its_x2_slot_never_beside_an_x1_job(node: Node) -> None:
    # Both slots take the CPU device's one lock: sent together, one job's result comes back before
    # the other job starts (the runner sends both messages while it holds the lock).
    source = (REPO / "examples" / "python" / "allreduce.py").read_text()
    multi = make_job(11, source=source, problem="allreduce", gpu_count=2)
    single = make_job(12)
    send_job(node.broker, multi)
    send_job(node.broker, single)
    results = {job.job_id: node.site.result_of(job.job_id, timeout=180) for job in (multi, single)}
    report = results[multi.job_id]["report"]
    assert results[multi.job_id]["outcome"] == "completed", results[multi.job_id]["message"]
    assert results[multi.job_id]["runner"] == f"{node.runner.name}:cpux2"
    assert report["status"] == "PASSED" and report["world_size"] == 2, report["message"]
    assert results[single.job_id]["runner"] == f"{node.runner.name}:cpu"
    order = [(task, payload["job_id"]) for task, payload in node.site.seen
             if task in ("leaderboard.job_started", "leaderboard.store_result")
             and payload.get("job_id") in (multi.job_id, single.job_id)]
    first = order[0][1]
    assert order.index(("leaderboard.store_result", first)) < order.index(
        ("leaderboard.job_started", single.job_id if first == multi.job_id else multi.job_id)), order


def test_a_cancel_that_arrives_before_the_job_means_it_never_runs(node: Node) -> None:
    job = make_job(7)
    node.cancel(job.job_id, job.evaluation_id)
    time.sleep(3)  # the control worker drops its marker
    send_job(node.broker, job)
    result = node.site.result_of(job.job_id)
    assert result["outcome"] == "cancelled" and node.site.count("leaderboard.job_started", job.job_id) == 0


def test_heartbeats_name_the_slot_its_queue_and_its_current_job(node: Node) -> None:
    job = make_job(8, source=HANGING_KERNEL, limits=SHORT)
    send_job(node.broker, job)
    beat = node.site.wait_for(
        lambda t, p: t == "leaderboard.runner_heartbeat" and p["current_job"] == job.job_id, 60
    )
    assert beat["runner"] == f"{node.runner.name}:cpu" and beat["queues"] == ["gpu.cpu.x1"]
    assert beat["node"] == node.runner.name and beat["device"] == "cpu" and beat["healthy"]
    node.site.result_of(job.job_id)


def test_sigterm_releases_the_running_job_and_stops_every_process(node: Node) -> None:
    other = RunnerProcess(f"s{os.getpid()}", node.broker, node.runner.var).start()
    try:
        node.runner.stop()  # only the second node consumes now
        job = make_job(9, source=HANGING_KERNEL, limits=JobLimits(compile_seconds=60, test_seconds=120))
        send_job(node.broker, job)
        node.site.wait_for(lambda t, p: t == "leaderboard.job_started" and p["job_id"] == job.job_id, 90)
        tree = other.tree()
        assert other.stop(timeout=60) == 0
        result = node.site.result_of(job.job_id, timeout=30)
        assert result["outcome"] == "runner_error" and result["message"].startswith("released")
        assert not [pid for pid in tree if procs.alive(pid)]
    finally:
        other.stop()


def test_a_root_runner_lets_job_users_traverse_the_folders_above_the_interpreter(tmp_path: Path) -> None:
    from runners.node import let_job_users_traverse

    private = tmp_path / "home"
    inner = private / "pyenv" / "bin"
    inner.mkdir(parents=True)
    private.chmod(0o700)
    changed = let_job_users_traverse([inner])
    assert str(private) in changed
    assert private.stat().st_mode & 0o777 == 0o701  # search only: nobody else may list it
    assert let_job_users_traverse([inner]) == []  # idempotent
