"""Messages split by audience: a private submission's tracebacks, compiler output, exception
messages, logs, kernel names and runner paths reach its owner and staff only; anyone else reads
its status, an error kind, the failing shape and the exploit class (leaderboard/audience.py).

Every failure path, with a secret in the source, from real reports: the evaluator runs each
fixture of tests/fixtures/audience/ on the CPU (import error, a Triton-like CompilationError, a
runtime error, a timeout, a wrong answer) and a class-16 cheat (REJECTED), and nvcc/ptxas build a
CUDA upload whose warnings and kernel name carry the secret, and fail on one that uses it. Each
report is stored through the runner-result path, then every surface is read as an anonymous
visitor and as another user: the API detail, long-poll, event stream and list, the HTML report and
its live status, the leaderboard, problem, user, integrity and home pages, and webhook payloads.

The cast (tests/conftest.py): alice owns the private submissions; bob is another user; the
operator is staff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from evaluator.ptx.nvcc import compile_to_ptx
from evaluator.ptx.toolchain import find_tool
from evaluator.report import EvaluationReport
from leaderboard import dispatch
from leaderboard.models import Evaluation, Submission, WebhookDelivery
from leaderboard.models.tokens import AgentInfo
from solboard_common.protocol import JobResult, JobStarted
from tests.leaderboard.api_support import catalogue, client_for, submit_body

pytestmark = pytest.mark.django_db
__all__ = ["catalogue"]
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/audience"
SECRET = "SOLBOARD_SECRET_51a7"
RUNNER_PATH = "/srv/solboard/var/runner/vm/scratch/job-7"
RUNNER = "node-a:cpu"
#: fixture -> (the evaluator status it must end with, extra CLI arguments)
PYTHON_CASES = {
    "import_error": ("COMPILE_ERROR", []),
    "triton_like": ("RUNTIME_ERROR", []),
    "runtime_error": ("RUNTIME_ERROR", []),
    "timeout": ("TIMEOUT", ["--time-limit-test", "4"]),
    "wrong_answer": ("INCORRECT_NUMERICAL", []),
    "rejected": ("REJECTED", []),
}
CUDA_SPEC = "".join(line + "\n" for line in (REPO / "examples/cuda/vector_add.cu").read_text().splitlines()
                    if line.startswith("// ") and ("=" in line or "solboard-launch" in line))
#: Builds, with an nvcc warning naming the secret and a second kernel named after it.
CUDA_WARNS = (REPO / "examples/cuda/vector_add.cu").read_text() + (
    f'extern "C" __global__ void {SECRET}_kernel(float* out) {{ int {SECRET} = 1; out[0] = 0.0f; }}\n')
#: Does not build: nvcc's error quotes the secret.
CUDA_BROKEN = CUDA_SPEC + f'extern "C" __global__ void vector_add(float* a) {{ a[0] = {SECRET}; }}\n'


def source_of(case: str) -> str:
    if case == "rejected":  # a class-16 cheat that also prints the secret
        return f'print("{SECRET}")\n' + (REPO / "tests/fixtures/cheats/c16_early_ready.py").read_text()
    return (FIXTURES / f"{case}.py").read_text()


def run_evaluator(folder: Path, case: str) -> dict[str, Any]:
    path = folder / f"{case}.py"
    path.write_text(source_of(case))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "run",
            "vector_add",
            str(path),
            "--device",
            "cpu",
            "--mode",
            "test",
            "--json",
            *PYTHON_CASES[case][1],
        ],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=240,
        check=False,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["status"] == PYTHON_CASES[case][0], (case, report["status"], report["message"][:500])
    return report


@pytest.fixture(scope="module")
def real_reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The evaluator's own reports of every Python failure path (CPU, three at a time)."""
    folder = tmp_path_factory.mktemp("audience")
    with ThreadPoolExecutor(max_workers=3) as pool:
        reports = dict(zip(PYTHON_CASES, pool.map(lambda case: run_evaluator(folder, case), PYTHON_CASES),
                           strict=True))
    return folder, reports


def stored(client: APIClient, body: dict[str, Any], report: dict[str, Any], capture: Any) -> Submission:
    """Alice's private submission, its evaluation started by a runner and ended with ``report``."""
    with capture(execute=True):
        created = client.post("/api/submissions", body, format="json")
    assert created.status_code == 201, created.json()
    evaluation = Evaluation.objects.get(submission_id=created.json()["id"])
    report = {**report, "sandbox": {**report.get("sandbox", {}), "scratch": RUNNER_PATH},
              "log": report.get("log", "") + f"\n[runner] scratch {RUNNER_PATH}"}
    dispatch.record_started(
        JobStarted(
            job_id=str(evaluation.job_id),
            evaluation_id=evaluation.pk,
            runner=RUNNER,
            started_at=timezone.now().isoformat(),
        )
    )
    result = JobResult(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, runner=RUNNER,
                       outcome="completed", report=EvaluationReport.model_validate(report))
    assert dispatch.store_result(result).startswith("stored"), report["message"][:300]
    return evaluation.submission


def cuda_compile_error_report(cpu_report: dict[str, Any]) -> dict[str, Any]:
    """What a GPU runner reports when nvcc refuses the upload at load time (harness/submission.py's
    words around nvcc's own diagnostics, from a real nvcc run)."""
    compiled = compile_to_ptx(CUDA_BROKEN, "sm_90a")
    assert not compiled.ok and SECRET in compiled.log
    lines = "\n".join(diagnostic.render() for diagnostic in compiled.errors)
    device = {**cpu_report["device"], "kind": "cuda", "name": "NVIDIA H100", "gpu_type": "h100",
              "development_device": False}
    return {**cpu_report, "language": "cuda", "device": device, "shapes": [],
            "message": f"cuda submission does not build: nvcc failed for submission.cu:\n{lines}"}


@pytest.fixture
def alice_private(alice: Any, catalogue: None, real_reports: tuple[Path, dict[str, dict[str, Any]]],
                  django_capture_on_commit_callbacks: Any, settings: Any) -> list[Submission]:
    """One private submission of alice's per failure path; her token has a webhook."""
    settings.SOLBOARD_QUOTA_MAX_QUEUED = 100
    client = client_for(alice, agent=AgentInfo("agent"), callback_url="http://127.0.0.1:9/hook")
    _, reports = real_reports
    submissions = [
        stored(client, submit_body(source=source_of(case)), report, django_capture_on_commit_callbacks)
        for case, report in reports.items()
    ]
    if find_tool("nvcc") and find_tool("ptxas"):
        cuda = submit_body(language="cuda", gpu_types=["h100"], source=CUDA_WARNS)
        submissions.append(stored(client, cuda, cuda_compile_error_report(reports["import_error"]),
                                  django_capture_on_commit_callbacks))
        assert SECRET in json.dumps(submissions[-1].static_evidence)  # nvcc's warning and the kernel's name
    return submissions


def surfaces(submission_id: int) -> list[str]:
    return [f"/api/submissions/{submission_id}", f"/api/submissions/{submission_id}?wait=0.2",
            f"/api/submissions/{submission_id}/events", "/api/submissions", f"/submissions/{submission_id}/",
            f"/submissions/{submission_id}/status", "/api/leaderboards/vector_add/cpu",
            "/api/leaderboards/vector_add/h100", "/problems/vector_add/", "/users/alice/", "/integrity/", "/"]


def content(client: Client, path: str) -> str:
    response = client.get(path)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return body.decode(errors="replace")


def leaks(text: str, private_paths: list[str]) -> list[str]:
    return [needle for needle in (SECRET, RUNNER_PATH, *private_paths) if needle in text]


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_no_surface_shows_a_private_submissions_details_to_anyone_else(
        alice_private: list[Submission], bob: Any, real_reports: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = real_reports
    viewers = {"anonymous": APIClient(), "bob": client_for(bob)}
    found = [(viewer, path, leaks(content(client, path), [str(folder)]))
             for submission in alice_private for path in surfaces(submission.pk)
             for viewer, client in viewers.items()]
    assert [entry for entry in found if entry[2]] == []


def test_others_read_the_status_error_kind_failing_shape_and_exploit_class(
        alice_private: list[Submission], bob: Any) -> None:
    expected = {
        "import_error": ("COMPILE_ERROR", "import_error", None),
        "triton_like": ("RUNTIME_ERROR", "runtime_error", None),
        "runtime_error": ("RUNTIME_ERROR", "runtime_error", None),
        "timeout": ("TIMEOUT", "timeout", None),
        "wrong_answer": ("INCORRECT_NUMERICAL", "wrong_output", None),
        "rejected": ("REJECTED", "rejected", 16),
        "cuda": ("COMPILE_ERROR", "build_error", None),
    }
    seen = {}
    for case, submission in zip(expected, alice_private, strict=False):
        [evaluation] = client_for(bob).get(f"/api/submissions/{submission.pk}").json()["evaluations"]
        seen[case] = (evaluation["evaluator_status"], evaluation["error_kind"], evaluation["exploit_class"])
        assert evaluation["details"] == "owner only" and "owner only" in evaluation["message"]
        if case in ("triton_like", "runtime_error", "wrong_answer"):
            assert evaluation["failing_shape"], evaluation  # a catalogue shape id
    assert seen == {case: expected[case] for case in seen}


def test_the_owner_and_staff_read_every_detail(
    alice: Any, operator: Any, alice_private: list[Submission]
) -> None:
    for viewer in (client_for(alice), client_for(operator)):
        for submission in alice_private:
            body = viewer.get(f"/api/submissions/{submission.pk}").content.decode()
            assert SECRET in body and RUNNER_PATH in body, submission.pk
    page = Client()
    page.force_login(alice)
    assert SECRET in content(page, f"/submissions/{alice_private[0].pk}/")


def test_webhook_payloads_carry_what_anyone_may_read(alice_private: list[Submission]) -> None:
    payloads = [delivery.payload for delivery in WebhookDelivery.objects.all()]
    assert len(payloads) == len(alice_private)
    assert [payload for payload in payloads if leaks(json.dumps(payload), [])] == []
    assert {payload["error_kind"] for payload in payloads} >= {"import_error", "runtime_error", "timeout"}


def test_once_public_everyone_reads_the_details(alice_private: list[Submission]) -> None:
    submission = alice_private[0]
    Submission.objects.filter(pk=submission.pk).update(public=True)
    assert SECRET in APIClient().get(f"/api/submissions/{submission.pk}").content.decode()


@pytest.fixture(autouse=True)
def _no_webhook_sends(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Deliveries are owed (rows) but not queued to a broker here."""
    monkeypatch.setattr("leaderboard.api.webhooks.queue_delivery", lambda *args, **kwargs: None)
    yield
