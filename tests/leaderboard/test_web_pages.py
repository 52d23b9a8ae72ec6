"""The website's pages: rankings per GPU type and shape, the baseline row, provisional results,
the report, the owner's buttons, the user page, the integrity log and the tokens page.

The cast (tests/conftest.py): alice and bob submit; neither may see the other's private source.
Results are stored through the site's own path (tests/leaderboard/web_helpers.py).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from evaluator.report import Status
from leaderboard.models import ApiToken, Evaluation, RunnerNode, Submission
from tests.leaderboard.web_helpers import RUNNER, evaluate, gpu_report, ranked, submit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_pages(settings: Any) -> None:
    """Every request renders from the database (the page cache is tested on its own)."""
    settings.SOLBOARD_WEB_CACHE_SECONDS = 0


def rows_of(html: str, board: str = 'data-board="problem"') -> list[str]:
    """The data-row / data-user markers of one board, in page order."""
    table = html[html.index(board):]
    table = table[: table.index("</table>")]
    return [user or kind for kind, user in re.findall(r'data-row="(\w+)"(?: data-user="([^"]*)")?', table)]


@pytest.fixture
def catalogue(problems: Any, gpu_types: Any) -> None:
    """The real problem catalogue and GPU table, synced."""


def test_the_problem_page_ranks_by_score_with_the_baseline_between_faster_and_slower(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    ranked(alice, "vector_add", "h200", 1.4)
    ranked(bob, "vector_add", "h200", 0.7)
    page = client.get("/problems/vector_add/?gpu=h200").content.decode()
    assert rows_of(page) == ["alice", "baseline", "bob"]
    assert "torch.add(a, b, out=c)" in page


def test_each_ranked_shape_has_its_own_board_ordered_by_median_time(
        client: Client, alice: Any, bob: Any, catalogue: None, problems: Any) -> None:
    ranked(alice, "vector_add", "h200", 0.9)
    ranked(bob, "vector_add", "h200", 1.2)
    page = client.get("/problems/vector_add/?gpu=h200").content.decode()
    for shape in problems["vector_add"].shapes.filter(ranked=True):
        assert rows_of(page, f'data-shape="{shape.shape_id}"') == ["bob", "baseline", "alice"]


def test_a_result_no_witness_confirmed_is_shown_as_provisional_and_not_ranked(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    ranked(alice, "vector_add", "h200", 1.1)
    unconfirmed = ranked(bob, "vector_add", "h200", 1.9, witnessed=False)
    assert not unconfirmed.rank_eligible
    page = client.get("/problems/vector_add/?gpu=h200").content.decode()
    assert "bob" not in rows_of(page)
    provisional = page[page.index('id="provisional-table"'):]
    assert 'data-user="bob"' in provisional[: provisional.index("</table>")]


def test_gpu_types_are_tabs_and_rankings_never_mix(
    client: Client, alice: Any, bob: Any, catalogue: None
) -> None:
    ranked(alice, "vector_add", "h200", 1.2)
    ranked(bob, "vector_add", "h100", 1.2)
    h100 = client.get("/problems/vector_add/?gpu=h100").content.decode()
    assert rows_of(h100)[0] == "bob" and "alice" not in rows_of(h100)
    assert 'aria-current="page">NVIDIA H100' in h100 or 'aria-current="page">H100' in h100
    assert client.get("/problems/vector_add/?gpu=nope").status_code == 404


def test_the_required_features_filter_keeps_only_results_that_show_them(
        client: Client, alice: Any, catalogue: None) -> None:
    ranked(alice, "gemm_bf16", "h100", 1.2)  # Python: no evidence of wgmma/TMA, which sm_90a requires here
    everything = client.get("/problems/gemm_bf16/?gpu=h100").content.decode()
    assert rows_of(everything) == ["alice", "baseline"]
    assert 'name="features"' in everything
    features_only = client.get("/problems/gemm_bf16/?gpu=h100&features=1").content.decode()
    assert rows_of(features_only) == ["baseline"]


def test_the_record_chart_marks_each_record(client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    ranked(alice, "vector_add", "h200", 0.9)
    ranked(bob, "vector_add", "h200", 1.3)
    ranked(alice, "vector_add", "h200", 1.1)  # not a record: bob's is better
    page = client.get("/problems/vector_add/?gpu=h200").content.decode()
    chart = page[page.index('id="history-chart"'):page.index("</svg>", page.index('id="history-chart"'))]
    assert chart.count("<circle") == 2
    assert 'class="record"' in chart and "alice&#x27;s best" in chart


def test_a_board_is_served_from_the_cache_for_the_interval_then_rebuilt(
        client: Client, alice: Any, bob: Any, catalogue: None, settings: Any) -> None:
    from django.core.cache import cache

    settings.SOLBOARD_WEB_CACHE_SECONDS = 60
    cache.clear()
    ranked(alice, "vector_add", "h200", 1.2)
    assert rows_of(client.get("/problems/vector_add/?gpu=h200").content.decode()) == ["alice", "baseline"]
    ranked(bob, "vector_add", "h200", 1.5)
    assert rows_of(client.get("/problems/vector_add/?gpu=h200").content.decode()) == ["alice", "baseline"]
    cache.clear()  # as the interval running out does
    assert rows_of(client.get("/problems/vector_add/?gpu=h200").content.decode()) == [
        "bob",
        "alice",
        "baseline",
    ]


def test_the_shape_table_gives_t_sol_per_gpu_type(client: Client, catalogue: None) -> None:
    page = client.get("/problems/vector_add/").content.decode()
    table = page[page.index('id="shape-table"'):]
    # vector_add N = 2^24 on an H200: 12 x 2^24 B / 4.8 TB/s = 41.94 us (docs/scoring.md).
    row = table[table.index("n16777216</code>"):]
    assert "41.9 µs" in row[: row.index("</tr>")]


# ---------------------------------------------------------------- the report


def test_the_report_shows_each_shape_with_its_figures_and_a_roofline(
        client: Client, alice: Any, catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.25)
    page = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    assert "<strong>Ranked</strong> with score" in page
    assert page.count('data-shape="n') == evaluation.shape_results.count()
    assert 'id="' + str(evaluation.pk) + '-roofline"' in page
    assert "memory" in page and "confirmed" in page
    assert page.count("data-witness-calls") == evaluation.shape_results.count()  # each witnessed call's time


def test_a_multi_gpu_report_shows_each_ranks_median_and_the_calibrated_link_fraction(
        client: Client, alice: Any, catalogue: None) -> None:
    # The runner's last heartbeat gave its x2 slot's measured bus bandwidth (two H200s: 331 GB/s).
    RunnerNode.objects.update_or_create(
        name=RUNNER,
        defaults={
            "calibration": {
                "ceilings.bf16_tensor_tflops": 760.0,
                "ceilings.nvlink_gbps_per_direction": 331.4,
                "link.world_size": 2,
            }
        },
    )
    evaluation = ranked(alice, "allreduce", "h200", 1.25)
    page = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    ranked_shapes = evaluation.shape_results.count()
    assert page.count("<small data-ranks>ranks ") == ranked_shapes
    assert page.count("<small data-calibrated") == ranked_shapes
    shape = evaluation.report["shapes"][0]
    medians = shape["timing"]["rank_median_us"]
    assert len(medians) == 2 and shape["sol"]["sol_fraction_attainable"] > shape["sol"]["sol_fraction"]
    # allreduce is link-bound: against 331.4 GB/s instead of the datasheet's 450, 450 / 331.4 x the fraction.
    assert shape["sol"]["sol_fraction_attainable"] == pytest.approx(
        shape["sol"]["sol_fraction"] * 450 / 331.4
    )
    # The score stays the datasheet's (t_SOL, not the calibrated bound).
    from evaluator.scoring import shape_score

    expected = shape_score(shape["timing"]["median_us"] * 1e-6, shape["baseline_timing"]["median_us"] * 1e-6,
                           shape["sol"]["t_sol_us"] * 1e-6)
    assert shape["sol"]["score"] == pytest.approx(expected)
    assert shape["sol"]["t_sol_attainable_us"] > shape["sol"]["t_sol_us"]


def test_a_rejected_result_says_why_it_is_not_ranked(client: Client, alice: Any, catalogue: None) -> None:
    evaluation = submit(alice, "vector_add", "h200")
    report = gpu_report("vector_add", "h200", 1.0, status=Status.REJECTED,
                        message="non-default stream work detected (class 1)")
    evaluate(evaluation, report)
    page = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    reason = page[page.index("data-not-ranked"):]
    assert (
        "rejected by an anti-cheat check (REJECTED): exploit class 1" in reason[:400]
    )  # a visitor: fixed words
    client.force_login(alice)
    page = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    reason = page[page.index("data-not-ranked"):]
    assert "rejected by an anti-cheat check (REJECTED): non-default stream work detected" in reason[:400]


def test_a_test_run_is_not_ranked_and_says_so(client: Client, alice: Any, catalogue: None) -> None:
    evaluation = submit(alice, "vector_add", "h200")
    Evaluation.objects.filter(pk=evaluation.pk).update(mode="test")
    evaluation.refresh_from_db()
    report = gpu_report("vector_add", "h200", 1.0).model_copy(update={"mode": "test", "rank_eligible": False,
                                                                        "problem_score": None})
    assert evaluate(evaluation, report) == "stored passed"
    page = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    assert "a test run: only ranked mode ranks" in page


def test_private_sources_and_logs_are_shown_to_their_owner_only(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.0, log="alice-log-line")
    url = f"/submissions/{evaluation.submission_id}/"
    for viewer in (None, bob):
        if viewer:
            client.force_login(viewer)
        page = client.get(url).content.decode()
        assert "torch</span>" not in page and "alice-log-line" not in page
        assert 'id="source-private"' in page
    client.force_login(alice)
    page = client.get(url).content.decode()
    assert "torch</span>" in page and "alice-log-line" in page


def test_making_a_submission_public_shows_its_source_to_everyone(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.0)
    url = f"/submissions/{evaluation.submission_id}/"
    client.force_login(bob)
    assert client.post(url + "publish", {"confirm": "public"}).status_code == 403
    client.force_login(alice)
    page = client.get(url).content.decode()
    assert "This cannot be undone" in page and 'name="confirm" value="public"' in page
    client.post(url + "publish")  # a POST without the page's confirmation changes nothing
    assert not Submission.objects.get(pk=evaluation.submission_id).public
    assert client.post(url + "publish", {"confirm": "public"}).status_code == 302
    client.logout()
    assert "torch</span>" in client.get(url).content.decode()


def test_logs_and_messages_are_rendered_escaped(client: Client, alice: Any, catalogue: None) -> None:
    evaluation = ranked(alice, "vector_add", "h200", 1.0, log="<script>alert('log')</script>")
    Evaluation.objects.filter(pk=evaluation.pk).update(message="<img src=x onerror=alert(1)>")
    client.force_login(alice)
    page = client.get(f"/submissions/{evaluation.submission_id}/").content.decode()
    assert "<script>alert(" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#x27;log&#x27;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_queued_evaluation_shows_its_place_in_the_queue_and_polls(client: Client, alice: Any, bob: Any,
                                                                  catalogue: None) -> None:
    submit(bob, "vector_add", "h200")
    mine = submit(alice, "vector_add", "h200")
    page = client.get(f"/submissions/{mine.submission_id}/").content.decode()
    assert "position 2 in the h200 queue" in page
    assert f'hx-get="/submissions/{mine.submission_id}/status"' in page
    fragment = client.get(f"/submissions/{mine.submission_id}/status", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "hx-trigger" in fragment.content.decode()


def test_the_status_fragment_asks_for_a_reload_once_everything_has_ended(
        client: Client, alice: Any, catalogue: None) -> None:
    evaluation = submit(alice, "vector_add", "h200")
    RunnerNode.objects.filter(name=RUNNER).delete()
    evaluate(evaluation, gpu_report("vector_add", "h200", 1.0))
    response = client.get(f"/submissions/{evaluation.submission_id}/status", HTTP_HX_REQUEST="true")
    assert response.headers.get("HX-Refresh") == "true"


def test_the_owner_can_cancel_and_then_re_run(client: Client, alice: Any, bob: Any, catalogue: None,
                                              settings: Any, tmp_path: Any, monkeypatch: Any) -> None:
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    monkeypatch.setenv("CELERY_BROKER_URL", settings.CELERY_BROKER_URL)
    evaluation = submit(alice, "vector_add", "h200")
    url = f"/submissions/{evaluation.submission_id}/"
    client.force_login(bob)
    assert client.post(url + "cancel").status_code == 403
    client.force_login(alice)
    client.post(url + "cancel")
    evaluation.refresh_from_db()
    assert evaluation.status == "cancelled"
    client.post(url + "rerun")
    runs = list(evaluation.submission.evaluations.order_by("run_number").values_list("run_number", "status"))
    assert runs == [(1, "cancelled"), (2, "queued")]
    client.post(url + "rerun")  # still queued: refused, nothing added
    assert evaluation.submission.evaluations.count() == 2


# ---------------------------------------------------------------- other pages


def test_the_home_page_shows_the_best_score_per_gpu_type_and_the_queues(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    ranked(alice, "vector_add", "h200", 1.4)
    ranked(bob, "vector_add", "h200", 1.1)
    submit(bob, "softmax", "h100")
    page = client.get("/").content.decode()
    row = page[page.index('data-problem="vector_add"'):]
    assert "alice" in row[: row.index("</tr>")] and "bob" not in row[: row.index("</tr>")]
    queue = page[page.index('data-gpu-type="h100"'):]
    assert re.search(r'<td class="num">1</td>', queue[: queue.index("</tr>")])
    assert "development board: ranked only among CPU results" in page


def test_the_user_page_lists_submissions_and_best_ranks(client: Client, alice: Any, bob: Any,
                                                        catalogue: None) -> None:
    ranked(alice, "vector_add", "h200", 1.4)
    ranked(bob, "vector_add", "h200", 1.6)
    page = client.get("/users/alice/").content.decode()
    ranks = page[page.index('id="best-ranks"'):]
    assert re.search(r'<td>h200</td><td class="num">2</td>', ranks)
    assert client.get("/users/nobody/").status_code == 404


def test_the_integrity_log_lists_rejected_and_flagged_results_with_the_reason(
        client: Client, alice: Any, bob: Any, catalogue: None) -> None:
    rejected = submit(alice, "vector_add", "h200")
    evaluate(rejected, gpu_report("vector_add", "h200", 1.0, status=Status.REJECTED,
                                  message="result read from freed memory (class 6)"))
    ranked(bob, "vector_add", "h200", 1.0, flags=["faster than light on n16777216"])
    ranked(bob, "vector_add", "h200", 1.0)  # honest: not listed
    page = client.get("/integrity/").content.decode()
    assert "REJECTED: exploit class 6" in page  # a private submission's rejection, in fixed words
    assert "result read from freed memory" not in page  # its own words are its owner's (audience.py)
    assert "faster than light on n16777216" in page
    assert page.count("data-evaluation=") == 2


def test_a_token_is_shown_once_listed_by_prefix_and_revocable(client: Client, alice: Any, bob: Any) -> None:
    client.force_login(alice)
    page = client.post("/account/tokens/", {"name": "my-agent"}).content.decode()
    plain = re.search(r"data-token>(sol_[^<]+)<", page)
    assert plain is not None
    token = ApiToken.objects.get(user=alice)
    assert ApiToken.authenticate(plain.group(1)) == alice
    listing = client.get("/account/tokens/").content.decode()
    assert plain.group(1) not in listing and f"{token.prefix}…" in listing and "my-agent" in listing
    client.force_login(bob)
    assert client.post(f"/account/tokens/{token.pk}/revoke").status_code == 404
    client.force_login(alice)
    client.post(f"/account/tokens/{token.pk}/revoke")
    assert ApiToken.authenticate(plain.group(1)) is None
