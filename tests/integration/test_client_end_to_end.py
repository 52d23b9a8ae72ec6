"""The ``solboard`` client end to end against a live ``make run`` (``solboard dev``: uvicorn, site
worker, CPU runner, embedded database and broker in a temporary folder): login, submit and wait,
report, leaderboard, check, and the exit statuses that tell a failed kernel from a failed service.

The cast: alice, created with her token by ``manage create_api_token``; her kernels run on the CPU
development device, whose results rank only among themselves.
"""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from solboard_client.commands import EXIT_SERVICE
from tests.integration.live_site import REPO, SOLBOARD, free_port, live_site, manage

pytestmark = pytest.mark.integration
WRONG = (REPO / "examples/python/vector_add.py").read_text().replace("torch.add(a, b", "torch.sub(a, b")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A live `make run` on a free port; yields the environment a client needs to reach it."""
    var = tmp_path_factory.mktemp("site")
    with live_site(var) as env:
        token = manage(env, "create_api_token", "alice", "--create-user")
        yield {**env, "SOLBOARD_TOKEN": token, "SOLBOARD_CREDENTIALS": str(var / "credentials.json")}


def solboard(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*SOLBOARD, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode == EXIT_SERVICE:  # say why the site went away: its log is in pytest's tmp dir
        run_log = Path(env["SOLBOARD_VAR"]) / "run.log"
        done.stderr += "\n--- tail of the site's run.log ---\n" + run_log.read_text(errors="replace")[-6000:]
    return done


def test_submit_and_wait_prints_the_per_shape_table_and_succeeds(site: dict[str, str]) -> None:
    done = solboard(site, "submit", str(REPO / "examples/python/vector_add.py"), "--problem", "vector_add",
                    "--gpu", "cpu", "--mode", "ranked", "--wait")
    assert done.returncode == 0, done.stderr
    assert "passed [PASSED]" in done.stdout and "median_us" in done.stdout
    assert "queued" in done.stderr or "running" in done.stderr  # plain progress lines (not a terminal)
    board = solboard(site, "leaderboard", "vector_add", "--gpu", "cpu", "--json")
    [ranking] = json.loads(board.stdout)
    assert ranking["count"] >= 1 and ranking["results"][0]["user"] == "alice"


def test_a_kernel_that_fails_exits_1_and_its_report_says_why(site: dict[str, str], tmp_path: Path) -> None:
    assert "torch.sub(a, b" in WRONG
    kernel = tmp_path / "wrong.py"
    kernel.write_text(WRONG)
    done = solboard(
        site, "submit", str(kernel), "--problem", "vector_add", "--gpu", "cpu", "--wait", "--json"
    )
    assert done.returncode == 1, done.stderr
    body = json.loads(done.stdout)
    [evaluation] = body["evaluations"]
    assert evaluation["status"] == "failed" and evaluation["evaluator_status"] == "INCORRECT_NUMERICAL"
    assert evaluation["shapes"][0]["worst_elements"], evaluation["shapes"][0]
    report = solboard(site, "report", str(body["id"]))
    assert report.returncode == 1 and "expected" in report.stdout


def test_check_refuses_python_that_does_not_parse_without_saving_it(
    site: dict[str, str], tmp_path: Path
) -> None:
    kernel = tmp_path / "broken.py"
    kernel.write_text("def kernel(:\n")
    done = solboard(site, "check", str(kernel), "--problem", "vector_add", "--gpu", "cpu")
    assert done.returncode == 1 and "syntax_error" in done.stderr and "line 1" in done.stderr


def test_login_stores_the_token_readable_by_its_owner_only(site: dict[str, str]) -> None:
    env = {key: value for key, value in site.items() if key != "SOLBOARD_TOKEN"}
    done = solboard(env, "login", "--server", site["SOLBOARD_SERVER"], "--token", site["SOLBOARD_TOKEN"])
    assert done.returncode == 0, done.stderr
    stored = Path(site["SOLBOARD_CREDENTIALS"])
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text())["token"] == site["SOLBOARD_TOKEN"]
    assert solboard(env, "problems").returncode == 0  # the stored login is used


def test_a_service_that_does_not_answer_exits_3_and_an_unknown_id_exits_2(site: dict[str, str]) -> None:
    assert (
        solboard({**site, "SOLBOARD_SERVER": f"http://127.0.0.1:{free_port()}"}, "problems").returncode == 3
    )
    missing = solboard(site, "status", "999999")
    assert missing.returncode == 2 and "not_found" in missing.stderr
