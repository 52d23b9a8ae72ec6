"""Runner authentication at the site's door (leaderboard/dispatch/inbox.py, credentials.py).

Every message reaches the site worker's tasks (leaderboard/tasks.py) exactly as a runner or an
attacker holding the broker URL would put it on the ``site`` queue. The cast: alice submits;
node-a holds a credential the operator issued and runs her job; node-b holds another credential;
the attacker holds the broker URL and nothing else.
"""

from __future__ import annotations

import time
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import OperationalError
from django.utils import timezone

from leaderboard import tasks
from leaderboard.dispatch import credentials
from leaderboard.dispatch.inbox import purge_nonces, receive
from leaderboard.models import (
    Evaluation,
    RankingEntry,
    RunnerAuthFailure,
    RunnerCredential,
    RunnerMessageNonce,
)
from leaderboard.submissions import create_submission
from solboard_common.protocol import SITE_HEARTBEAT_TASK, SITE_RESULT_TASK, SITE_STARTED_TASK, JobStarted
from solboard_common.signing import Credential
from tests.leaderboard import test_dispatch_results as results
from tests.leaderboard.dispatch_reports import gpu_report, signed
from tests.runner_helpers import local_credential

RUNNER = "node-a:0"
# Shared with test_dispatch_results: a real CPU report and a broker of the test's own.
cpu_report = results.cpu_report


@pytest.fixture
def node_a(db: None) -> Credential:
    return credentials.issue("node-a", created_by="operator")[1]


@pytest.fixture
def node_b(db: None) -> Credential:
    return credentials.issue("node-b", created_by="operator")[1]


@pytest.fixture
def gpu_evaluation(alice: Any, gpu_types: Any, problems: Any, broker: str,
                   django_capture_on_commit_callbacks: Any) -> Evaluation:
    example = "def kernel(a, b, c):\n    c.copy_(a + b)\n"
    with django_capture_on_commit_callbacks(execute=True):
        submission = create_submission(alice, "vector_add", "python", example, ["h200"], "ranked")
    return submission.evaluations.get()


def started_message(evaluation: Evaluation, runner: str = RUNNER) -> dict[str, Any]:
    return JobStarted(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, runner=runner,
                      started_at=timezone.now().isoformat()).model_dump(mode="json")


def result_message(evaluation: Evaluation, report: dict[str, Any], runner: str = RUNNER) -> dict[str, Any]:
    return {"job_id": str(evaluation.job_id), "evaluation_id": evaluation.pk, "runner": runner,
            "outcome": "completed", "report": report}


def heartbeat_message(runner: str = RUNNER) -> dict[str, Any]:
    return {"runner": runner, "node": runner.split(":")[0], "hostname": "host-a", "queues": ["gpu.h200.x1"],
            "sent_at": timezone.now().isoformat()}


def store(payload: dict[str, Any], capture: Any) -> str:
    with capture(execute=True):
        return str(tasks.store_result(payload))


def refusals(reason: str) -> int:
    return sum(RunnerAuthFailure.objects.filter(reason=reason).values_list("count", flat=True))


def assert_not_ranked(evaluation: Evaluation) -> None:
    evaluation.refresh_from_db()
    assert (
        evaluation.status in ("queued", "running")
        and evaluation.score is None
        and not evaluation.rank_eligible
    )
    assert not RankingEntry.objects.filter(evaluation=evaluation).exists()


def test_an_honest_signed_result_is_stored_and_ranked(gpu_evaluation: Evaluation, node_a: Credential,
                                                      cpu_report: dict[str, Any],
                                                      django_capture_on_commit_callbacks: Any) -> None:
    assert tasks.job_started(signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a)) == "running"
    payload = signed(SITE_RESULT_TASK, result_message(gpu_evaluation, gpu_report(cpu_report)), node_a)
    assert store(payload, django_capture_on_commit_callbacks) == "stored passed"
    gpu_evaluation.refresh_from_db()
    assert gpu_evaluation.rank_eligible and RankingEntry.objects.filter(evaluation=gpu_evaluation).exists()
    row = RunnerCredential.objects.get(public_id=node_a.public_id)
    assert row.messages_accepted == 2 and row.last_used_at is not None


def test_a_forged_result_without_a_credential_is_dropped_and_counted(
        gpu_evaluation: Evaluation, cpu_report: dict[str, Any],
        django_capture_on_commit_callbacks: Any) -> None:
    forged = result_message(gpu_evaluation, {**gpu_report(cpu_report), "shapes": [], "problem_score": 7.5})
    assert store(forged, django_capture_on_commit_callbacks) == "refused: unsigned"
    assert_not_ranked(gpu_evaluation)
    assert refusals("unsigned") == 1


def test_a_result_with_a_bad_mac_is_refused(gpu_evaluation: Evaluation, node_a: Credential,
                                            cpu_report: dict[str, Any],
                                            django_capture_on_commit_callbacks: Any) -> None:
    tasks.job_started(signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a))
    guessed = Credential(node="node-a", public_id=node_a.public_id, key=bytes(32))
    payload = signed(SITE_RESULT_TASK, result_message(gpu_evaluation, gpu_report(cpu_report)), guessed)
    assert store(payload, django_capture_on_commit_callbacks) == "refused: bad mac"
    tampered = signed(SITE_RESULT_TASK, result_message(gpu_evaluation, gpu_report(cpu_report)), node_a)
    tampered["report"]["problem_score"] = 1.0  # changed after signing
    assert store(tampered, django_capture_on_commit_callbacks) == "refused: bad mac"
    assert_not_ranked(gpu_evaluation)
    assert RunnerAuthFailure.objects.get(reason="bad mac").credential.public_id == node_a.public_id


def test_an_unknown_credential_is_refused(gpu_evaluation: Evaluation, cpu_report: dict[str, Any],
                                          django_capture_on_commit_callbacks: Any) -> None:
    payload = signed(SITE_RESULT_TASK, result_message(gpu_evaluation, gpu_report(cpu_report)),
                     local_credential("node-a"))
    assert store(payload, django_capture_on_commit_callbacks) == "refused: unknown credential"
    assert_not_ranked(gpu_evaluation)


def test_a_replayed_message_is_refused(gpu_evaluation: Evaluation, node_a: Credential) -> None:
    payload = signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a)
    assert tasks.job_started(payload) == "running"
    assert tasks.job_started(payload) == "refused: replay"
    gpu_evaluation.refresh_from_db()
    assert gpu_evaluation.attempts == 1 and refusals("replay") == 1


@pytest.mark.parametrize("offset", [-3600, +3600])
def test_a_message_outside_the_time_window_is_refused(gpu_evaluation: Evaluation, node_a: Credential,
                                                      offset: int) -> None:
    payload = signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a, now=time.time() + offset)
    assert tasks.job_started(payload) == "refused: stale"
    assert_not_ranked(gpu_evaluation)
    gpu_evaluation.refresh_from_db()
    assert gpu_evaluation.attempts == 0


def test_a_revoked_credential_is_refused(gpu_evaluation: Evaluation, node_a: Credential) -> None:
    credentials.revoke("node-a")
    assert (
        tasks.job_started(signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a))
        == "refused: revoked"
    )
    assert (
        tasks.runner_heartbeat(signed(SITE_HEARTBEAT_TASK, heartbeat_message(), node_a)) == "refused: revoked"
    )
    gpu_evaluation.refresh_from_db()
    assert gpu_evaluation.status == "queued" and gpu_evaluation.attempts == 0


def test_a_runner_cannot_speak_as_another_node(gpu_evaluation: Evaluation, node_b: Credential,
                                               cpu_report: dict[str, Any],
                                               django_capture_on_commit_callbacks: Any) -> None:
    as_a = signed(
        SITE_RESULT_TASK, result_message(gpu_evaluation, gpu_report(cpu_report), runner=RUNNER), node_b
    )
    assert store(as_a, django_capture_on_commit_callbacks) == "refused: wrong node"
    beat = signed(SITE_HEARTBEAT_TASK, {**heartbeat_message("node-b:0"), "node": "node-a"}, node_b)
    assert tasks.runner_heartbeat(beat) == "refused: wrong node"
    assert_not_ranked(gpu_evaluation)


def test_a_result_for_a_job_another_runner_claimed_is_ignored(
    gpu_evaluation: Evaluation,
    node_a: Credential,
    node_b: Credential,
    cpu_report: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    assert tasks.job_started(signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a)) == "running"
    theirs = signed(
        SITE_RESULT_TASK, result_message(gpu_evaluation, gpu_report(cpu_report), "node-b:0"), node_b
    )
    assert store(theirs, django_capture_on_commit_callbacks) == "ignored: claimed by node-a:0, not node-b:0"
    assert_not_ranked(gpu_evaluation)


def test_a_result_for_an_evaluation_never_handed_over_is_ignored(
    gpu_evaluation: Evaluation,
    node_a: Credential,
    cpu_report: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    Evaluation.objects.filter(pk=gpu_evaluation.pk).update(enqueued_at=None)
    payload = signed(SITE_RESULT_TASK, result_message(gpu_evaluation, gpu_report(cpu_report)), node_a)
    assert store(payload, django_capture_on_commit_callbacks) == "ignored: not handed to any runner"
    assert_not_ranked(gpu_evaluation)


def test_a_signed_heartbeat_is_recorded_and_an_unsigned_one_is_not(
    node_a: Credential, gpu_types: Any
) -> None:
    from leaderboard.models import RunnerNode

    assert tasks.runner_heartbeat(heartbeat_message()) == "refused: unsigned"
    assert not RunnerNode.objects.exists()
    assert tasks.runner_heartbeat(signed(SITE_HEARTBEAT_TASK, heartbeat_message(), node_a)).startswith(
        "recorded"
    )
    assert RunnerNode.objects.get().name == RUNNER


def test_a_message_whose_handler_hit_a_locked_database_can_be_retried(gpu_evaluation: Evaluation,
                                                                      node_a: Credential) -> None:
    payload = signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a)

    def locked(message: JobStarted) -> str:
        raise OperationalError("database is locked")

    with pytest.raises(OperationalError):
        receive(SITE_STARTED_TASK, payload, JobStarted, locked)
    assert not RunnerMessageNonce.objects.exists()  # rolled back with the handler's writes
    assert tasks.job_started(payload) == "running"  # Celery's retry is not taken for a replay


def test_old_nonces_are_forgotten_once_no_message_could_carry_them(gpu_evaluation: Evaluation,
                                                                   node_a: Credential, settings: Any) -> None:
    tasks.job_started(signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a))
    window = settings.SOLBOARD_RUNNER_MESSAGE_WINDOW_SECONDS = 300
    RunnerMessageNonce.objects.update(received_at=timezone.now() - timedelta(seconds=2 * window + 1))
    assert purge_nonces(force=True) == 1 and not RunnerMessageNonce.objects.exists()


def test_the_site_stores_no_key_only_a_fingerprint(node_a: Credential) -> None:
    row = RunnerCredential.objects.get(public_id=node_a.public_id)
    stored = " ".join(
        str(value) for value in RunnerCredential.objects.filter(pk=row.pk).values().get().values()
    )
    assert node_a.secret_string().rsplit(":", 1)[1] not in stored and node_a.key.hex() not in stored
    assert row.key_fingerprint == node_a.fingerprint and credentials.usable(node_a)


def test_a_rotated_secret_key_in_the_fallbacks_still_verifies(gpu_evaluation: Evaluation, node_a: Credential,
                                                              settings: Any) -> None:
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-after-rotation-" + "x" * 40
    assert tasks.job_started(signed(SITE_STARTED_TASK, started_message(gpu_evaluation), node_a)) == "running"
    settings.SECRET_KEY_FALLBACKS = []
    payload = signed(SITE_HEARTBEAT_TASK, heartbeat_message(), node_a)
    assert tasks.runner_heartbeat(payload) == "refused: bad mac"


def test_the_command_issues_lists_and_revokes(db: None, tmp_path: Any) -> None:
    out, err = StringIO(), StringIO()
    call_command("runner_credentials", "issue", "gpu-host-1", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert secret.startswith("solboard-runner:gpu-host-1:") and "shown once" in err.getvalue()
    target = tmp_path / "credential"
    call_command("runner_credentials", "issue", "gpu-host-2", "--output", str(target), stderr=StringIO())
    assert target.stat().st_mode & 0o777 == 0o600
    listing = StringIO()
    call_command("runner_credentials", "list", stdout=listing)
    assert "gpu-host-1" in listing.getvalue() and "gpu-host-2" in listing.getvalue()
    assert secret.rsplit(":", 1)[1] not in listing.getvalue()
    call_command("runner_credentials", "revoke", "gpu-host-1", stdout=StringIO())
    assert RunnerCredential.objects.get(node_name="gpu-host-1").revoked_at is not None


def test_make_run_writes_a_0600_dev_credential_and_reuses_it_while_valid(db: None, tmp_path: Any) -> None:
    path = tmp_path / "var" / "runner-credential"
    first, issued = credentials.ensure_dev_credential(path, "devbox")
    assert issued and path.stat().st_mode & 0o777 == 0o600
    again, issued_again = credentials.ensure_dev_credential(path, "devbox")
    assert not issued_again and again == first
    credentials.revoke(first.public_id)
    renewed, issued_after_revoke = credentials.ensure_dev_credential(path, "devbox")
    assert issued_after_revoke and renewed.public_id != first.public_id


def test_the_admin_shows_a_new_credential_once_and_revokes_it(db: None, admin_client: Any) -> None:
    response = admin_client.post("/admin/leaderboard/runnercredential/add/", {"node_name": "gpu-host-9"})
    row = RunnerCredential.objects.get(node_name="gpu-host-9")
    page = response.content.decode()
    assert response.status_code == 200 and f"solboard-runner:gpu-host-9:{row.public_id}:" in page
    change = admin_client.get(f"/admin/leaderboard/runnercredential/{row.pk}/change/").content.decode()
    assert "solboard-runner:gpu-host-9" not in change
    admin_client.post("/admin/leaderboard/runnercredential/", {
        "action": "revoke_selected", "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.revoked_at is not None
    tasks.runner_heartbeat({"runner": "x:0"})
    failures = admin_client.get("/admin/leaderboard/runnerauthfailure/").content.decode()
    assert "unsigned" in failures
