"""A newcomer's first hour with the ``solboard`` client against a live ``make run`` (its CPU runner
and its site worker): what they trip over is said in words, with a clear exit status.

The cast: walker, a user with a password (``createsuperuser``: staff are not needed, only a
password), and his token; the runner serves the ``cpu`` queues only, so ``h100`` has none.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from solboard_client.helptext import COMMAND_HELP
from tests.integration.live_site import REPO, SOLBOARD, live_site, manage

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
VECTOR_ADD = REPO / "examples/python/vector_add.py"
PASSWORD = "a-long-pass-phrase-9"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    var = tmp_path_factory.mktemp("first-hour")
    with live_site(var, DJANGO_SUPERUSER_PASSWORD=PASSWORD) as env:
        manage(env, "createsuperuser", "--noinput", "--username", "walker", "--email", "walker@example.org")
        token = manage(env, "create_api_token", "walker")
        yield {**env, "SOLBOARD_TOKEN": token, "SOLBOARD_CREDENTIALS": str(var / "credentials.json")}


def solboard(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*SOLBOARD, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def anonymous_get(env: dict[str, str], path: str) -> str:
    with urllib.request.urlopen(env["SOLBOARD_SERVER"] + path, timeout=30) as answer:
        return str(answer.read().decode())


def test_a_binary_file_is_refused_in_words_with_exit_1(site: dict[str, str], tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.so"
    kernel.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    done = solboard(
        site, "submit", str(kernel), "--problem", "vector_add", "--gpu", "cpu", "--language", "python"
    )
    assert done.returncode == 1
    assert "not UTF-8 text: byte 0x80 at byte offset 136" in done.stderr and "source text" in done.stderr


def test_login_without_a_terminal_says_how_and_a_wrong_password_is_said_as_such(site: dict[str, str]) -> None:
    env = {key: value for key, value in site.items() if key != "SOLBOARD_TOKEN"}
    no_terminal = solboard(env, "login")
    assert no_terminal.returncode == 2 and "no terminal to ask for the username" in no_terminal.stderr
    no_password = solboard(env, "login", "--username", "walker")
    assert no_password.returncode == 2 and "--password-stdin" in no_password.stderr
    wrong = solboard(env, "login", "--username", "walker", "--password-stdin", stdin="not-his-password\n")
    assert wrong.returncode == 2 and "wrong username or password" in wrong.stderr
    assert "invalid_token" not in wrong.stderr
    right = solboard(env, "login", "--username", "walker", "--password-stdin", stdin=PASSWORD + "\n")
    assert right.returncode == 0, right.stderr
    whoami = solboard(env, "whoami")
    assert whoami.returncode == 0 and whoami.stdout.startswith(f"walker on {site['SOLBOARD_SERVER']}")


def test_every_subcommand_help_has_a_description_examples_defaults_and_exit_statuses(
    site: dict[str, str],
) -> None:
    for command, text in COMMAND_HELP.items():
        done = solboard(site, command, "--help")
        assert done.returncode == 0, command
        assert text.description.split(".")[0] in " ".join(done.stdout.split()), command
        assert "examples:\n  solboard " + command in done.stdout, command
        assert "exit statuses:" in done.stdout and "5  stopped waiting" in done.stdout, command
    submit_help = solboard(site, "submit", "--help").stdout
    assert "(default: test)" in submit_help and "(default: 120.0)" in submit_help
    assert "benchmark = test" in submit_help and "profile = ranked" in submit_help


def test_a_source_over_the_limit_gets_one_message_and_exit_1_whatever_its_size(site: dict[str, str],
                                                                                tmp_path: Path) -> None:
    for size in (600 * 1024, 2 * 1024 * 1024):
        kernel = tmp_path / f"big{size}.py"
        kernel.write_text("#" * size)
        done = solboard(site, "submit", str(kernel), "--problem", "vector_add", "--gpu", "cpu")
        assert done.returncode == 1, done.stderr
        assert f"the source is {size} bytes; the limit is 524288 bytes (512 KiB)" in done.stderr


def test_check_refuses_a_file_with_no_kernel_function(site: dict[str, str], tmp_path: Path) -> None:
    kernel = tmp_path / "add.py"
    kernel.write_text("import torch\n\ndef add(a, b, c):\n    torch.add(a, b, out=c)\n")
    done = solboard(site, "check", str(kernel), "--problem", "vector_add", "--gpu", "cpu")
    assert done.returncode == 1 and "defines no `kernel` function" in done.stderr


def test_waiting_for_a_gpu_type_no_runner_serves_stops_with_exit_5(site: dict[str, str]) -> None:
    started = time.monotonic()
    done = solboard(site, "submit", str(VECTOR_ADD), "--problem", "vector_add", "--gpu", "h100", "--wait",
                    "--no-runner-timeout", "3", "--jsonl")
    assert done.returncode == 5 and time.monotonic() - started < 60
    found = events(done.stdout)
    kinds = [event["event"] for event in found]
    assert kinds[0] == "submitted" and "warning" in kinds and kinds[-1] == "stopped", kinds
    submission = found[0]["submission_id"]
    assert found[-1]["reason"] == "no_runner" and found[-1]["exit_status"] == 5
    assert f"submission {submission} stays queued" in found[-1]["message"]
    assert done.stderr.count("warning: no runner for h100 is online") == 1  # said once, not per poll
    assert [event["gpu_type"] for event in found if event["event"] == "warning"] == ["h100"]
    status = solboard(site, "status", str(submission))
    assert f"submission {submission}, h100 test run 1: queued (position 1 in the h100 queue)" in status.stdout
    assert "no h100 runner online" in status.stdout
    assert solboard(site, "cancel", str(submission)).returncode == 0


def test_a_profile_run_streams_its_events_ranks_and_reaches_the_anonymous_page_at_once(
    site: dict[str, str],
) -> None:
    """--mode profile (popcorn-cli's name): a ranked run, followed with --jsonl; the site worker
    stores it and the anonymous problem page, cached before, shows it on the next visit."""
    assert "Nothing ranked" in anonymous_get(site, "/problems/vector_add/?gpu=cpu")
    done = solboard(
        site,
        "submit",
        str(VECTOR_ADD),
        "--problem",
        "vector_add",
        "--gpu",
        "cpu",
        "--mode",
        "profile",
        "--jsonl",
    )
    assert done.returncode == 0, done.stderr
    found = events(done.stdout)
    assert found[0]["event"] == "submitted" and found[-1]["event"] == "finished"
    statuses = [event["evaluations"][0]["status"] for event in found if event["event"] == "status"]
    assert statuses[-1] == "passed" and len(statuses) >= 2, statuses
    submission = found[-1]["submission"]
    assert found[-1]["exit_status"] == 0 and submission["evaluations"][0]["mode"] == "ranked"
    assert found[0]["evaluations"][0]["label"] == f"submission {submission['id']}, cpu ranked run 1"
    page = anonymous_get(site, "/problems/vector_add/?gpu=cpu")
    assert re.search(r'data-row="ranked" data-user="walker"', page), "the page did not show the new result"
    text = solboard(site, "report", str(submission["id"]))
    assert "Ranked" not in text.stderr and "(CPU development board)" in text.stdout


def test_my_submissions_and_my_quota(site: dict[str, str]) -> None:
    mine = solboard(site, "submissions", "--limit", "5")
    assert mine.returncode == 0 and "vector_add" in mine.stdout and "submission(s)" in mine.stdout
    quota = solboard(site, "quota")
    assert quota.returncode == 0 and "queued or running at once:" in quota.stdout
    assert "GPU time" in quota.stdout and "s charged today" in quota.stdout
    listed = json.loads(solboard(site, "submissions", "--json").stdout)
    assert listed["count"] >= 1
    line = events(solboard(site, "quota", "--jsonl").stdout)
    assert line[0]["event"] == "result" and line[0]["command"] == "quota"
