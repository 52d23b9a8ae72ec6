"""The site side of runners, one message at a time: results, job_started, heartbeats, cancel,
fair release and the sweeper, against the real database and a real (temporary) broker.

The cast (tests/conftest.py): alice and bob submit; the operator is staff. The report is a real
one, produced once by the real evaluator on the CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from evaluator.report import EvaluationReport, ShapeReport
from evaluator.scoring import ranked_time
from leaderboard import dispatch
from leaderboard.models import Evaluation, RunnerNode, ShapeResult
from leaderboard.submissions import create_submission
from solboard_common.protocol import (
    PROTOCOL_VERSION,
    GpuInfo,
    Heartbeat,
    JobResult,
    JobStarted,
    control_queue,
    gpu_queue,
)
from tests.leaderboard.dispatch_reports import with_witness
from tests.runner_helpers import messages_on

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "examples" / "python" / "vector_add.py").read_text()
RUNNER = "node-a:cpu"


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real ranked report of the example vector_add on the CPU development device."""
    out = subprocess.run(
        [sys.executable, "-m", "evaluator", "run", "vector_add", str(REPO / "examples/python/vector_add.py"),
         "--device", "cpu", "--mode", "ranked", "--json"],
        capture_output=True, text=True, check=True, cwd=tmp_path_factory.mktemp("eval"),
        env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
    )
    return json.loads(out.stdout)




@pytest.fixture
def evaluation(alice: Any, gpu_types: Any, problems: Any, broker: str,
               django_capture_on_commit_callbacks: Any) -> Evaluation:
    with django_capture_on_commit_callbacks(execute=True):
        submission = create_submission(alice, "vector_add", "python", EXAMPLE, ["cpu"], "ranked")
    return submission.evaluations.get()


def started(evaluation: Evaluation, runner: str = RUNNER) -> str:
    return dispatch.record_started(JobStarted(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk,
                                              runner=runner, started_at=timezone.now().isoformat()))


def completed(evaluation: Evaluation, report: dict[str, Any], runner: str = RUNNER) -> JobResult:
    return JobResult(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, runner=runner,
                     outcome="completed", report=EvaluationReport.model_validate(report))


def test_a_submission_is_saved_and_handed_to_the_broker_on_commit(
    evaluation: Evaluation, broker: str
) -> None:
    evaluation.refresh_from_db()
    assert evaluation.status == "queued" and evaluation.enqueued_at is not None
    [job] = messages_on(broker, gpu_queue("cpu"))
    assert job["evaluation_id"] == evaluation.pk and job["job_id"] == str(evaluation.job_id)
    assert job["seed"] == evaluation.secret_seed and job["source"] == EXAMPLE


@pytest.mark.parametrize(("field", "value", "complaint"), [
    ("source", "def kernel(:\n", "does not parse"),
    ("language", "cobol", "unknown language"),
    ("gpu_types", ["z9000"], "unknown GPU type"),
    ("problem_name", "no_such_problem", "no such problem"),
    ("mode", "fast", "mode must be"),
])
def test_create_submission_refuses_bad_input(alice: Any, gpu_types: Any, problems: Any, broker: str,
                                             field: str, value: Any, complaint: str) -> None:
    arguments: dict[str, Any] = {"problem_name": "vector_add", "language": "python", "source": EXAMPLE,
                                 "gpu_types": ["cpu"], "mode": "test", field: value}
    with pytest.raises(ValidationError, match=complaint):
        create_submission(alice, **arguments)
    assert not Evaluation.objects.exists()


def test_a_completed_cpu_report_is_stored_with_a_development_score(evaluation: Evaluation,
                                                                    cpu_report: dict[str, Any]) -> None:
    assert started(evaluation) == "running"
    assert dispatch.store_result(completed(evaluation, with_witness(cpu_report))) == "stored passed"
    evaluation.refresh_from_db()
    shapes = cpu_report["shapes"]
    expected = 1.0
    for shape in with_witness(cpu_report)["shapes"]:  # the ranked times: the judge's clock where it says more
        times = ranked_time(ShapeReport.model_validate(shape))
        assert times is not None
        expected *= times.baseline_us / (times.baseline_us + times.kernel_us)
    assert evaluation.status == "passed" and evaluation.rank_eligible
    assert evaluation.score == pytest.approx(expected ** (1 / len(shapes)))
    assert evaluation.shape_results.count() == len(shapes) and evaluation.runner.name == RUNNER
    # No GPU hold in this result: the GPU time is the site's own wall time, job_started -> result.
    assert evaluation.gpu_seconds is not None and 0 <= evaluation.gpu_seconds < 5


def test_the_same_result_delivered_twice_is_recorded_once(
    evaluation: Evaluation, cpu_report: dict[str, Any]
) -> None:
    started(evaluation)
    result = completed(evaluation, cpu_report)
    assert dispatch.store_result(result) == "stored passed"
    first = list(ShapeResult.objects.values_list("id", flat=True))
    assert dispatch.store_result(result) == "ignored: already passed"
    assert list(ShapeResult.objects.values_list("id", flat=True)) == first


def test_a_result_without_its_started_message_is_still_stored(evaluation: Evaluation,
                                                              cpu_report: dict[str, Any]) -> None:
    assert dispatch.store_result(completed(evaluation, cpu_report)) == "stored passed"
    evaluation.refresh_from_db()
    assert evaluation.runner.name == RUNNER and evaluation.started_at is not None


def test_results_for_another_delivery_or_runner_are_ignored(
    evaluation: Evaluation, cpu_report: dict[str, Any]
) -> None:
    started(evaluation)
    stale = completed(evaluation, cpu_report).model_copy(update={"job_id": str(uuid.uuid4())})
    assert dispatch.store_result(stale) == "ignored: stale job id"
    assert dispatch.store_result(completed(evaluation, cpu_report, runner="intruder:cpu")).startswith(
        "ignored"
    )
    evaluation.refresh_from_db()
    assert evaluation.status == "running"


def test_a_report_for_another_problem_is_an_error(evaluation: Evaluation, cpu_report: dict[str, Any]) -> None:
    started(evaluation)
    forged = {**cpu_report, "mode": "test"}
    assert dispatch.store_result(completed(evaluation, forged)) == "stored error"
    evaluation.refresh_from_db()
    assert "not vector_add/ranked" in evaluation.message and not evaluation.shape_results.exists()


def test_a_terminal_status_never_changes(
    evaluation: Evaluation, cpu_report: dict[str, Any], alice: Any
) -> None:
    started(evaluation)
    assert dispatch.cancel_evaluation(evaluation, alice)
    # The result changes nothing of the cancelled evaluation but the GPU time its job used.
    assert (
        dispatch.store_result(completed(evaluation, cpu_report))
        == "ignored: already cancelled; GPU time recorded"
    )
    evaluation.refresh_from_db()
    assert (
        evaluation.status == "cancelled" and evaluation.report is None and evaluation.gpu_seconds is not None
    )


def test_a_runner_error_requeues_on_a_new_job_id_until_the_attempts_are_spent(evaluation: Evaluation) -> None:
    job_ids = set()
    for attempt in range(1, evaluation.max_attempts + 1):
        evaluation.refresh_from_db()
        job_ids.add(evaluation.job_id)
        started(evaluation)
        lost = JobResult(
            job_id=str(evaluation.job_id),
            evaluation_id=evaluation.pk,
            runner=RUNNER,
            outcome="runner_error",
            message="the runner's worker died during the job (signal SIGKILL)",
        )
        outcome = dispatch.store_result(lost)
        assert outcome == ("requeued" if attempt < evaluation.max_attempts else "stored error")
    evaluation.refresh_from_db()
    assert evaluation.status == "error" and "gave up after 3 attempts" in evaluation.message
    assert len(job_ids) == evaluation.max_attempts


def test_a_job_every_runner_refuses_ends_as_an_error_and_a_drain_release_costs_no_attempt(
        evaluation: Evaluation, django_capture_on_commit_callbacks: Any) -> None:
    """A runner whose catalogue lacks the problem refuses the job before it starts. Uncounted, that
    requeue looped once a second for as long as the runner stayed online (a newcomer's import under
    ``make run`` sat "queued (position 1)" for ten minutes); a runner shutting down releases jobs
    it never started, which must not use up their attempts."""
    def answer(outcome: str, message: str) -> str:
        evaluation.refresh_from_db()
        with django_capture_on_commit_callbacks(execute=True):  # the requeue hands the job on again
            return dispatch.store_result(JobResult(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk,
                                                   runner=RUNNER, outcome=outcome, message=message))

    for _ in range(5):
        assert answer("runner_error", "released: the runner is shutting down") == "requeued"
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempts) == ("queued", 0)
    refusal = "this runner's catalogue has no problem 'pmpp_vectoradd_py'"
    outcomes = [answer("refused", refusal) for _ in range(evaluation.max_attempts)]
    assert outcomes == ["requeued"] * (evaluation.max_attempts - 1) + ["stored error"]
    evaluation.refresh_from_db()
    assert evaluation.status == "error" and "gave up after 3 attempts" in evaluation.message
    assert f"refused by {RUNNER}: {refusal}" in evaluation.message


def test_a_job_its_own_processes_ended_is_charged_and_an_evaluator_crash_is_refunded(
    alice: Any, gpu_types: Any, problems: Any, broker: str, django_capture_on_commit_callbacks: Any
) -> None:
    """A judge killed or stopped from inside its job (runner outcome ``job_failed``) is the
    submission's failure: an error with a verdict, which the daily quota keeps. Before, the runner
    said ``evaluator_error`` and the quota unit came back, so a submission that killed its judge
    whenever it was failing never paid for a try."""
    from leaderboard.api import quotas

    with django_capture_on_commit_callbacks(execute=True):
        killer, crash = (
            create_submission(alice, "vector_add", "python", EXAMPLE, ["cpu"], "test").evaluations.get()
            for _ in range(2)
        )
    for evaluation, outcome in ((killer, "job_failed"), (crash, "evaluator_error")):
        started(evaluation)
        result = JobResult(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, runner=RUNNER,
                           outcome=outcome, message="the judge was killed by signal SIGKILL ...")
        assert dispatch.store_result(result) == "stored error"
        evaluation.refresh_from_db()
    assert (killer.status, killer.evaluator_status) == ("error", "RUNTIME_ERROR")
    assert (crash.status, crash.evaluator_status) == ("error", None)
    assert set(quotas.charged(alice)) == {killer}


def test_a_job_started_too_often_ends_as_error_and_its_runner_is_told_to_stop(evaluation: Evaluation,
                                                                              broker: str) -> None:
    for _ in range(evaluation.max_attempts):
        assert started(evaluation) == "running"
    assert started(evaluation) == "too many attempts"
    evaluation.refresh_from_db()
    assert evaluation.status == "error" and "may be crashing its runner" in evaluation.message
    [cancel] = messages_on(broker, control_queue("node-a"))
    assert cancel["job_id"] == str(evaluation.job_id)


def test_a_stale_delivery_that_starts_is_told_to_stop(evaluation: Evaluation, broker: str) -> None:
    old = str(evaluation.job_id)
    Evaluation.objects.filter(pk=evaluation.pk).update(job_id=uuid.uuid4())
    answer = dispatch.record_started(JobStarted(job_id=old, evaluation_id=evaluation.pk, runner="node-b:cpu",
                                                started_at=timezone.now().isoformat()))
    assert answer == "stale delivery"
    assert [m["job_id"] for m in messages_on(broker, control_queue("node-b"))] == [old]


def test_only_the_owner_or_staff_may_cancel(evaluation: Evaluation, bob: Any, operator: Any) -> None:
    with pytest.raises(dispatch.CancelNotAllowed):
        dispatch.cancel_evaluation(evaluation, bob)
    assert dispatch.cancel_evaluation(evaluation, operator)
    assert not dispatch.cancel_evaluation(evaluation, operator)  # already ended


def test_cancelling_a_running_evaluation_tells_its_node(
    evaluation: Evaluation, alice: Any, broker: str
) -> None:
    started(evaluation)
    assert dispatch.cancel_evaluation(evaluation, alice)
    [cancel] = messages_on(broker, control_queue("node-a"))
    assert cancel == {"protocol": PROTOCOL_VERSION, "action": "cancel", "job_id": str(evaluation.job_id),
                      "evaluation_id": evaluation.pk, "reason": "cancelled by alice"}


def test_one_users_flood_does_not_starve_another_user(alice: Any, bob: Any, gpu_types: Any, problems: Any,
                                                      broker: str, settings: Any,
                                                      django_capture_on_commit_callbacks: Any) -> None:
    settings.SOLBOARD_MAX_INFLIGHT_PER_USER = 4
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(12):
            create_submission(alice, "vector_add", "python", EXAMPLE, ["cpu"], "test")
        create_submission(bob, "vector_add", "python", EXAMPLE, ["cpu"], "test")
    sent = messages_on(broker, gpu_queue("cpu"))
    owners = [Evaluation.objects.get(pk=job["evaluation_id"]).submission.user.username for job in sent]
    assert owners.count("alice") == 4 and owners.count("bob") == 1
    first = Evaluation.objects.get(pk=sent[0]["evaluation_id"])
    started(first)
    lost = JobResult(
        job_id=str(first.job_id), evaluation_id=first.pk, runner=RUNNER, outcome="evaluator_error"
    )
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.store_result(lost)
    assert len(messages_on(broker, gpu_queue("cpu"))) == 1  # alice's fifth, now that one finished


def heartbeat(runner: str = RUNNER, current: Evaluation | None = None) -> Heartbeat:
    return Heartbeat(
        runner=runner,
        node=runner.split(":")[0],
        hostname="host-a",
        device="cpu",
        queues=["gpu.cpu.x1"],
        gpus=[]
        if "cpu" in runner
        else [
            GpuInfo(
                index=0,
                uuid="GPU-1",
                name="NVIDIA H200",
                gpu_type="h200",
                memory_bytes=1 << 37,
                driver="580.1",
            )
        ],
        current_job=str(current.job_id) if current else None,
        current_evaluation_id=current.pk if current else None,
        sent_at=timezone.now().isoformat(),
    )


def test_a_heartbeat_records_the_runner_and_its_current_job(evaluation: Evaluation, gpu_types: Any) -> None:
    started(evaluation)
    node = dispatch.record_heartbeat(heartbeat(current=evaluation))
    assert node.is_alive and node.gpu_type.key == "cpu" and node.current_evaluation_id == evaluation.pk
    assert RunnerNode.objects.count() == 1


def test_the_sweeper_releases_evaluations_whose_hand_over_was_lost(
    evaluation: Evaluation, broker: str
) -> None:
    messages_on(broker, gpu_queue("cpu"))  # the first hand-over "got lost"
    Evaluation.objects.filter(pk=evaluation.pk).update(enqueued_at=None)
    assert dispatch.sweep().released == 1
    assert [job["evaluation_id"] for job in messages_on(broker, gpu_queue("cpu"))] == [evaluation.pk]


def test_the_sweeper_requeues_the_job_of_a_runner_that_went_silent(evaluation: Evaluation, broker: str,
                                                                   settings: Any) -> None:
    started(evaluation)
    dispatch.record_heartbeat(heartbeat(current=evaluation))
    long_ago = timezone.now() - timedelta(seconds=settings.SOLBOARD_RUNNER_STALE_SECONDS + 5)
    RunnerNode.objects.update(last_heartbeat=long_ago)
    Evaluation.objects.filter(pk=evaluation.pk).update(started_at=long_ago)
    old_job = evaluation.job_id
    messages_on(broker, gpu_queue("cpu"))
    report = dispatch.sweep()
    evaluation.refresh_from_db()
    assert (report.requeued, report.released) == (1, 1)
    assert evaluation.status == "queued" and evaluation.job_id != old_job and evaluation.attempts == 1
    assert [job["job_id"] for job in messages_on(broker, gpu_queue("cpu"))] == [str(evaluation.job_id)]


def test_the_sweeper_requeues_a_job_its_live_runner_no_longer_runs(
    evaluation: Evaluation, settings: Any
) -> None:
    started(evaluation)
    long_ago = timezone.now() - timedelta(seconds=2 * settings.SOLBOARD_RUNNER_STALE_SECONDS + 5)
    Evaluation.objects.filter(pk=evaluation.pk).update(started_at=long_ago)
    dispatch.record_heartbeat(heartbeat(current=None))  # alive, but idle
    assert dispatch.sweep().requeued == 1


def test_the_admin_action_cancels_what_is_still_in_flight(
    evaluation: Evaluation, operator: Any, rf: Any
) -> None:
    from django.contrib import admin
    from django.contrib.messages.storage.fallback import FallbackStorage

    from leaderboard.dispatch.admin_actions import cancel_selected

    request = rf.post("/admin/leaderboard/evaluation/")
    request.user, request.session = operator, {}
    request._messages = FallbackStorage(request)
    cancel_selected(admin.site._registry[Evaluation], request, Evaluation.objects.all())
    cancel_selected(admin.site._registry[Evaluation], request, Evaluation.objects.all())
    evaluation.refresh_from_db()
    assert evaluation.status == "cancelled" and evaluation.message == "cancelled by operator"
    assert [str(m) for m in request._messages] == ["1 evaluation(s) cancelled; 0 had already ended.",
                                                   "0 evaluation(s) cancelled; 1 had already ended."]


def test_the_sweeper_hands_over_again_what_sat_in_the_broker_too_long(evaluation: Evaluation, broker: str,
                                                                      settings: Any) -> None:
    settings.SOLBOARD_BROKER_WAIT_MAX_SECONDS = 60
    old_job = evaluation.job_id
    Evaluation.objects.filter(pk=evaluation.pk).update(enqueued_at=timezone.now() - timedelta(seconds=61))
    messages_on(broker, gpu_queue("cpu"))
    assert dispatch.sweep().released == 1
    evaluation.refresh_from_db()
    assert evaluation.job_id != old_job and evaluation.enqueued_at is not None
    assert [job["job_id"] for job in messages_on(broker, gpu_queue("cpu"))] == [str(evaluation.job_id)]


def test_the_sweep_command_reports_what_it_did(evaluation: Evaluation, broker: str) -> None:
    from io import StringIO

    from django.core.management import call_command

    Evaluation.objects.filter(pk=evaluation.pk).update(enqueued_at=None)
    out = StringIO()
    call_command("sweep", stdout=out)
    assert out.getvalue().strip() == "released 1, requeued 0, failed 0"


def test_only_known_finite_positive_ceilings_of_a_runner_are_used() -> None:
    from leaderboard.dispatch.report_verdict import runner_ceilings

    heartbeat = {
        "ceilings.bf16_tensor_tflops": 760.0,
        "ceilings.hbm_tbps": 4.2,
        "ceilings.nvlink_gbps_per_direction": 331.4,
        "ceilings.made_up_tflops": 1e9,
        "ceilings.fp8_tensor_tflops": float("nan"),
        "ceilings.fp16_tensor_tflops": -1,
        "link.world_size": 2,
        "ceilings.tf32_tensor_tflops": True,
        "runs": 9,
    }
    assert runner_ceilings(heartbeat) == {
        "bf16_tensor_tflops": 760.0,
        "hbm_tbps": 4.2,
        "nvlink_gbps_per_direction": 331.4,
    }
    assert runner_ceilings({}) is None and runner_ceilings(None) is None
