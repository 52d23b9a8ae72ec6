"""The production profile's parts that need no running server: `check --deploy` clean with DEBUG
off, JSON logs, and /metrics (`leaderboard/metrics.py`: queue depth per GPU type, jobs by outcome, witness
rejections, runner heartbeats, request latency), kept from strangers. `.ci/run prod` runs the whole profile
(uvicorn, Celery, PostgreSQL, Redis) with an API smoke test and a locust load.

The cast (tests/conftest.py): alice's evaluations fill the queue; a runner node has a heartbeat.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from leaderboard.models import Evaluation, RunnerNode, Submission

REPO = Path(__file__).resolve().parents[2]
PRODUCTION = {"DEBUG": "false", "SECRET_KEY": "x" * 20 + "production-profile-test-key-0123456789abcdef",
              "ALLOWED_HOSTS": "solboard.example.org"}


def manage(*args: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env, "SOLBOARD_VAR": str(tmp_path), "PYTHONPATH": str(REPO)}
    environment.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_is_clean_with_debug_off(tmp_path: Path) -> None:
    done = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_logs_are_one_json_object_per_line_with_debug_off(tmp_path: Path) -> None:
    script = ("import logging, django; django.setup(); "
              "logging.getLogger('leaderboard.test').warning('hello %s', 'world', extra={'user_id': 7})")
    environment = {**os.environ, **PRODUCTION, "SOLBOARD_VAR": str(tmp_path), "PYTHONPATH": str(REPO),
                   "DJANGO_SETTINGS_MODULE": "leaderboard.settings"}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=60, check=True)
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    [record] = [line for line in lines if line.get("name") == "leaderboard.test"]
    assert (record["levelname"], record["message"], record["user_id"]) == ("WARNING", "hello world", 7)
    assert "timestamp" in record


def test_a_bad_log_format_stops_the_process(tmp_path: Path) -> None:
    done = manage("check", env={"LOG_FORMAT": "xml"}, tmp_path=tmp_path)
    assert done.returncode != 0 and "LOG_FORMAT='xml'" in done.stderr


@pytest.mark.django_db
def test_metrics_answer_only_loopback_without_a_token(client: Client, settings: Any) -> None:
    settings.SOLBOARD_METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 404
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.5").status_code == 404  # "internal" is not enough
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200


@pytest.mark.django_db
def test_metrics_want_the_token_when_one_is_set(client: Client, settings: Any) -> None:
    settings.SOLBOARD_METRICS_TOKEN = "metrics-secret"
    assert client.get("/metrics").status_code == 404  # loopback is not enough now
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-secret").status_code == 200


def sample(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))  # the exposition's order
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} " if labels else f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{labels} in:\n{text}")


@pytest.mark.django_db
def test_metrics_say_queue_depth_outcomes_witness_rejections_heartbeats_and_latency(
        client: Client, alice: Any, gpu_types: Any, problems: Any) -> None:
    submission = Submission.objects.create(user=alice, problem=problems["vector_add"], problem_version=1,
                                           language="python", source="pass\n")
    for run in (1, 2, 3):
        Evaluation.objects.create(
            submission=submission, gpu_type=gpu_types["h100"], mode="ranked", run_number=run
        )
    Evaluation.objects.create(
        submission=submission,
        gpu_type=gpu_types["cpu"],
        mode="test",
        status="rejected",
        message="timing not confirmed by the witness",
    )
    Evaluation.objects.create(submission=submission, gpu_type=gpu_types["cpu"], mode="test", status="failed",
                              run_number=2)
    RunnerNode.objects.create(name="node-a:0", gpu_type=gpu_types["h100"],
                              last_heartbeat=timezone.now() - timedelta(seconds=42))
    assert client.get("/api/problems").status_code == 200
    text = client.get("/metrics").content.decode()
    assert sample(text, "solboard_queue_depth", gpu_type="h100") == 3
    assert sample(text, "solboard_evaluations", gpu_type="cpu", status="failed") == 1
    assert sample(text, "solboard_witness_rejections") == 1
    assert (
        41 <= sample(text, "solboard_runner_heartbeat_age_seconds", runner="node-a:0", gpu_type="h100") < 60
    )
    assert sample(text, "solboard_http_request_duration_seconds_count", method="GET", route="/api/problems",
                  status="2xx") >= 1

