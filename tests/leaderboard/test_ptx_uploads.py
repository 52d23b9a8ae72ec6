"""PTX and CUDA uploads through the site: validated with the real ptxas/nvcc before anything is saved
or queued, their static evidence stored, and the required-feature filter of the rankings.

The cast (tests/conftest.py): alice and bob submit kernels; gpu_types and problems are the real
evaluator/gpus.toml and catalogue. Reports are built with the evaluator's own pydantic models,
their evidence taken from what upload validation found, and stored by the function the site
worker runs (``dispatch.store_result``).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from evaluator import HARNESS_VERSION
from evaluator.gpu_specs import get_gpu_spec
from evaluator.problems import get_problem
from evaluator.ptx import jailed
from evaluator.ptx.toolchain import find_tool
from evaluator.report import (
    DeviceInfo,
    EvaluationReport,
    FeatureEvidence,
    ShapeReport,
    Status,
    TimingStats,
    Witness,
)
from evaluator.scoring import sol_figures
from evaluator.sol import t_sol
from leaderboard import dispatch
from leaderboard.models import Evaluation, Submission
from leaderboard.ranking_maintenance import ranking_rows
from leaderboard.submissions import create_submission, source_from_upload
from solboard_common.protocol import JobResult, gpu_queue
from tests.runner_helpers import messages_on

pytestmark = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas is not installed")

REPO = Path(__file__).resolve().parents[2]
VADD = (REPO / "examples/ptx/vector_add.ptx").read_text()
VADD_CU = (REPO / "examples/cuda/vector_add.cu").read_text()
GEMM_MMA = (REPO / "examples/ptx/gemm_bf16_mma.ptx").read_text()
GEMM_WGMMA = (REPO / "examples/ptx/gemm_bf16_wgmma_tma.ptx").read_text()
SPEC = """
entry = "vector_add_v4"
grid = ["cdiv(N, 1024)", 1, 1]
block = [256, 1, 1]
params = [
    {kind="ptr", tensor="a"}, {kind="ptr", tensor="b"}, {kind="ptr", tensor="c"}, {kind="u64", axis="N"},
]
"""


@pytest.fixture
def site(gpu_types: Any, problems: Any, broker: str, django_capture_on_commit_callbacks: Any) -> Any:
    """Runs on-commit work (hand-over to the broker, ranking refresh) as a committed request would."""
    return lambda: django_capture_on_commit_callbacks(execute=True)




def submit(user: Any, source: str, gpus: list[str], problem: str = "vector_add", language: str = "ptx",
           launch_spec: str | None = None, mode: str = "test") -> Submission:
    return create_submission(user, problem, language, source, gpus, mode, launch_spec=launch_spec)


def refusal(site: Any, broker: str, user: Any, source: str, gpus: list[str], **kwargs: Any) -> str:
    """The refusal's text; asserts that nothing was saved and nothing queued."""
    with site(), pytest.raises(ValidationError) as refused:
        submit(user, source, gpus, **kwargs)
    assert not Submission.objects.exists() and not Evaluation.objects.exists()
    assert all(messages_on(broker, gpu_queue(gpu)) == [] for gpu in gpus)
    return "\n".join(refused.value.messages)


def test_a_valid_ptx_upload_is_saved_with_its_evidence_and_queued(alice: Any, site: Any, broker: str) -> None:
    with site():
        submission = submit(alice, VADD, ["h100", "h200"])
    [arch] = submission.static_evidence["archs"]  # H100 and H200 share one target
    found = submission.static_evidence["archs"][arch]
    kernel = found["kernels"][0]
    assert (
        arch == "sm_90a"
        and found["entry"] == "vector_add_v4"
        and "ptxas" in submission.static_evidence["tools"]
    )
    assert kernel["registers"] > 0 and kernel["spill_store_bytes"] == 0
    assert found["evidence"]["missing"] == [] and found["evidence"]["registers"] == kernel["registers"]
    submission.refresh_from_db()  # stored, not only held on the instance
    assert submission.static_evidence["archs"]["sm_90a"]["entry"] == "vector_add_v4"
    for gpu in ("h100", "h200"):
        [job] = messages_on(broker, gpu_queue(gpu))
        assert job["language"] == "ptx" and job["source"] == VADD
        assert Evaluation.objects.get(pk=job["evaluation_id"]).enqueued_at is not None


def test_it_refuses_ptx_that_does_not_assemble_with_the_ptxas_line_number(alice: Any, site: Any,
                                                                           broker: str) -> None:
    broken = VADD.replace("add.rn.f32          %f9, %f1, %f5;", "add.rn.f32          %f9, %f1, %q5;")
    line = next(n for n, text in enumerate(broken.splitlines(), start=1) if "%q5" in text)
    message = refusal(site, broker, alice, broken, ["h100"])
    assert f"[sm_90a] ptxas: line {line}: " in message and "%q5" in message


def test_it_refuses_a_spec_whose_params_do_not_match_the_entry(alice: Any, site: Any, broker: str) -> None:
    three = SPEC.replace(', {kind="u64", axis="N"}', "")
    message = refusal(site, broker, alice, VADD, ["h200"], launch_spec=three)
    assert "[sm_90a] abi: entry 'vector_add_v4' takes 4 parameter(s)" in message
    assert message.endswith("the spec gives 3")


def test_it_refuses_ptx_for_the_cpu_development_device_naming_it(alice: Any, site: Any, broker: str) -> None:
    message = refusal(site, broker, alice, VADD, ["h100", "cpu"])
    assert "cpu (CPU development device) has no GPU architecture and cannot run PTX submissions" in message


def test_a_separately_given_launch_spec_is_used_and_sent_with_the_job(
    alice: Any, site: Any, broker: str
) -> None:
    bare = "\n".join(line for line in VADD.splitlines() if not line.startswith("//"))
    assert "solboard-launch" not in bare
    assert "no launch spec" in refusal(site, broker, alice, bare, ["h100"])
    with site():
        submission = submit(alice, bare, ["h100"], launch_spec=SPEC)
    assert (
        submission.launch_spec == SPEC
        and submission.static_evidence["archs"]["sm_90a"]["entry"] == "vector_add_v4"
    )
    [job] = messages_on(broker, gpu_queue("h100"))
    assert job["launch_spec"] == SPEC


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
def test_a_cuda_upload_is_compiled_by_nvcc_and_its_errors_refused_with_line_numbers(alice: Any, site: Any,
                                                                                   broker: str) -> None:
    broken = VADD_CU.replace("extern \"C\" __global__", "extern \"C\" __global__ not_a_type", 1)
    line = next(n for n, text in enumerate(broken.splitlines(), start=1) if "not_a_type" in text)
    message = refusal(site, broker, alice, broken, ["b200"], language="cuda")
    assert f"[sm_100a] nvcc: line {line}: " in message
    with site():
        submission = submit(alice, VADD_CU, ["b200"], language="cuda")
    assert list(submission.static_evidence["archs"]) == ["sm_100a"]


# ---------------------------------------------------------------- required-feature filter


def _timing(median_us: float) -> TimingStats:
    return TimingStats(
        method="cupti",
        median_us=median_us,
        mean_us=median_us,
        min_us=median_us,
        max_us=median_us,
        std_us=0.0,
        n=100,
        ci95_low_us=median_us,
        ci95_high_us=median_us,
        ci95_half_width_rel=0.0,
        converged=True,
        ranked_source="device_span",
    )


def _shape(problem: Any, shape: Any, gpu: str, score: float) -> ShapeReport:
    """A passed, witnessed shape whose medians give exactly ``score`` (baseline at 2 x t_SOL)."""
    counts = problem.counts(shape.axes)
    t_sol_us = t_sol(counts, get_gpu_spec(gpu)).t_sol_us
    baseline_us = 2 * t_sol_us
    kernel_us = t_sol_us + (baseline_us - t_sol_us) * (1 / score - 1)
    sol = sol_figures(counts, get_gpu_spec(gpu), kernel_us * 1e-6, baseline_us * 1e-6)
    witness = Witness(source="ncu", median_us=kernel_us, n=3, kernels_per_call=1, floor_us=0.9 * kernel_us,
                      confirmed=True)
    return ShapeReport(
        shape_id=shape.shape_id,
        axes=dict(shape.axes),
        ranked=shape.ranked,
        status=Status.PASSED,
        timing=_timing(kernel_us),
        baseline_timing=_timing(baseline_us),
        sol=sol,
        witness=witness,
    )


def ranked_report(
    submission: Submission, gpu: str, evidence: FeatureEvidence | None, score: float
) -> EvaluationReport:
    """A passed, witnessed, rank-eligible report as a runner would send it: every shape scores
    ``score``, so the problem score the site recomputes is ``score``."""
    problem = get_problem(submission.problem.name)
    shapes = [_shape(problem, shape, gpu, score) for shape in problem.select_shapes("all", "cuda")]
    return EvaluationReport(
        harness_version=HARNESS_VERSION, problem=submission.problem.name,
        problem_version=submission.problem_version, language=submission.language,  # type: ignore[arg-type]
        mode="ranked", status=Status.PASSED, problem_score=score, rank_eligible=True, witnessed=True,
        evidence=evidence, shapes=shapes,
        device=DeviceInfo(kind="cuda", name="NVIDIA H100 80GB HBM3", gpu_type=gpu, development_device=False),
        started_at="2026-11-29T19:00:00Z", finished_at="2026-11-29T19:01:00Z", wall_seconds=60.0,
    )


def upload_evidence(submission: Submission, arch: str) -> FeatureEvidence:
    """The evidence a runner without ncu reports: the static evidence found at upload."""
    return FeatureEvidence.model_validate(submission.static_evidence["archs"][arch]["evidence"])


def evaluate(site: Any, submission: Submission, report: EvaluationReport) -> Evaluation:
    evaluation = submission.evaluations.get()
    result = JobResult(job_id=str(evaluation.job_id), evaluation_id=evaluation.pk, runner="node-a:h100",
                       outcome="completed", report=report)
    with site():
        assert dispatch.store_result(result) == "stored passed"
    evaluation.refresh_from_db()
    return evaluation


def test_features_met_is_stored_from_the_evidence_and_the_filter_hides_what_misses_them(
    alice: Any, bob: Any, site: Any, problems: Any, gpu_types: Any
) -> None:
    with site():
        mma = submit(alice, GEMM_MMA, ["h100"], problem="gemm_bf16", mode="ranked")
        wgmma = submit(bob, GEMM_WGMMA, ["h100"], problem="gemm_bf16", mode="ranked")
    assert upload_evidence(mma, "sm_90a").missing == ["wgmma", "tma"]
    fast = evaluate(site, mma, ranked_report(mma, "h100", upload_evidence(mma, "sm_90a"), 0.6))
    slow = evaluate(site, wgmma, ranked_report(wgmma, "h100", upload_evidence(wgmma, "sm_90a"), 0.5))
    assert (fast.features_met, slow.features_met) == (False, True)
    problem, h100 = problems["gemm_bf16"], gpu_types["h100"]
    everyone = ranking_rows(problem, h100)
    assert [(row.user.username, row.features_met) for row in everyone] == [("alice", False), ("bob", True)]
    filtered = ranking_rows(problem, h100, require_features=True)
    assert [(row.user.username, row.rank) for row in filtered] == [("bob", 1)]


def test_a_users_slower_result_that_meets_the_features_is_their_row_in_the_filtered_ranking(
    alice: Any, site: Any, problems: Any, gpu_types: Any
) -> None:
    with site():
        mma = submit(alice, GEMM_MMA, ["h100"], problem="gemm_bf16", mode="ranked")
        wgmma = submit(alice, GEMM_WGMMA, ["h100"], problem="gemm_bf16", mode="ranked")
    fast = evaluate(site, mma, ranked_report(mma, "h100", upload_evidence(mma, "sm_90a"), 0.6))
    slow = evaluate(site, wgmma, ranked_report(wgmma, "h100", upload_evidence(wgmma, "sm_90a"), 0.5))
    problem, h100 = problems["gemm_bf16"], gpu_types["h100"]
    assert [row.evaluation_id for row in ranking_rows(problem, h100)] == [fast.pk]
    assert [row.evaluation_id for row in ranking_rows(problem, h100, require_features=True)] == [slow.pk]


def test_where_nothing_is_required_the_filter_keeps_results_without_evidence(
    alice: Any, bob: Any, site: Any, problems: Any, gpu_types: Any
) -> None:
    with site():  # the hand-over to the broker runs on commit
        ptx = submit(alice, VADD, ["h100"], mode="ranked")
        python = submit(
            bob,
            (REPO / "examples/python/vector_add.py").read_text(),
            ["h100"],
            language="python",
            mode="ranked",
        )
    assert (
        evaluate(site, ptx, ranked_report(ptx, "h100", upload_evidence(ptx, "sm_90a"), 0.7)).features_met
        is None
    )
    assert evaluate(site, python, ranked_report(python, "h100", None, 0.6)).features_met is None
    rows = ranking_rows(problems["vector_add"], gpu_types["h100"], require_features=True)
    assert [row.user.username for row in rows] == ["alice", "bob"]


def test_where_features_are_required_a_result_without_evidence_is_filtered_out(
    alice: Any, site: Any, problems: Any, gpu_types: Any
) -> None:
    source = "def kernel(A, B, C):\n    C.copy_(A @ B)\n"
    with site():
        python = submit(alice, source, ["h100"], problem="gemm_bf16", language="python", mode="ranked")
    assert evaluate(site, python, ranked_report(python, "h100", None, 0.9)).features_met is None
    problem, h100 = problems["gemm_bf16"], gpu_types["h100"]
    assert [row.user.username for row in ranking_rows(problem, h100)] == ["alice"]
    assert ranking_rows(problem, h100, require_features=True) == []


# ---------------------------------------------------------------- text that is not UTF-8, host files


PYTHON_VADD = (REPO / "examples/python/vector_add.py").read_text()
SOURCES = {"python": PYTHON_VADD, "ptx": VADD, "cuda": VADD_CU}


@pytest.mark.parametrize("language", SOURCES)
def test_it_refuses_a_source_that_is_not_utf8_naming_the_byte_offset(alice: Any, site: Any, broker: str,
                                                                    language: str) -> None:
    source = SOURCES[language] + "\udcff"  # an undecodable byte, as surrogateescape keeps it
    offset = len(SOURCES[language].encode())
    message = refusal(site, broker, alice, source, ["h100"], language=language)
    assert message == f"the source is not UTF-8 text: byte 0xff at byte offset {offset}"


@pytest.mark.parametrize("language", SOURCES)
def test_it_refuses_a_source_with_a_nul_byte_naming_its_offset(alice: Any, site: Any, broker: str,
                                                              language: str) -> None:
    message = refusal(site, broker, alice, "\0" + SOURCES[language], ["h100"], language=language)
    assert message == "the source contains a NUL byte at byte offset 0"


def test_an_uploaded_file_that_is_not_utf8_is_a_validation_error() -> None:
    assert source_from_upload("é".encode()) == "é"
    with pytest.raises(ValidationError) as refused:
        source_from_upload(b"ok\n\xc3(")
    assert refused.value.message_dict == {
        "source": ["the source is not UTF-8 text: byte 0xc3 at byte offset 3"]
    }


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("jail", [True, False], ids=["jailed", "include check alone"])
def test_a_cuda_upload_that_includes_a_host_file_is_refused_without_its_content(
    alice: Any, site: Any, broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jail: bool
) -> None:
    if jail and not jailed.jail_namespaces():
        pytest.skip("this machine refuses the namespaces the jail needs")
    monkeypatch.setattr(jailed, "jail_namespaces", lambda: jail)
    secret = Path(tempfile.mkdtemp(prefix="solboard-secret-")) / "hostname"
    secret.parent.chmod(0o755)
    secret.write_text("private_host_content_4f1c\n")
    secret.chmod(0o644)
    try:
        message = refusal(
            site, broker, alice, f'/**/#include "{secret}"\n' + VADD_CU, ["h100"], language="cuda"
        )
    finally:
        shutil.rmtree(secret.parent)
    assert "private_host_content_4f1c" not in message
    assert ("No such file or directory" if jail else "outside the CUDA toolkit's") in message
