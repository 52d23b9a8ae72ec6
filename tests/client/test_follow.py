"""Following a submission: long polls as long as the server allows, each asking for changes since
the state it has; waiting stops when every evaluation left is queued where no runner serves for
``no_runner_s``, or after ``total_s``, and says how to go on. Against a real local server."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from solboard_client.follow import Limits, follow, stopped_message, stranded
from solboard_client.output import Output
from solboard_client.transport import Client
from tests.client.server import answer, serving


def evaluation(status: str, gpu_type: str = "h200", runners_online: int | None = 1) -> dict[str, Any]:
    return {"id": 5, "gpu_type": gpu_type, "mode": "ranked", "run_number": 1, "status": status,
            "runners_online": runners_online}


def submission(status: str, state: str, *evaluations: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": 12, "status": status, "state": state, "evaluations": list(evaluations), **extra}


def test_a_submission_is_stranded_only_when_everything_left_is_queued_where_no_runner_serves() -> None:
    assert stranded(submission("running", "s1", evaluation("queued", "b200", 0), evaluation("passed"))) == [
        "b200"
    ]
    assert stranded(submission("running", "s1", evaluation("queued", "b200", 0), evaluation("running"))) == []
    assert stranded(submission("running", "s1", evaluation("queued", "h200", 1))) == []
    assert stranded(submission("finished", "s2", evaluation("passed"))) == []


def test_it_long_polls_since_its_state_until_the_submission_finishes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = submission("running", "s1", evaluation("running"))
    done = submission("finished", "s2", evaluation("passed"))
    with serving(answer(200, {"max_wait_seconds": 20}), answer(200, done)) as (url, script):
        outcome = follow(Client(url, "t"), first, Output("jsonl"), Limits(no_runner_s=60))
    assert outcome.body == done and outcome.stopped is None
    poll = urlparse(script.seen[1].path)
    assert poll.path == "/api/submissions/12" and parse_qs(poll.query) == {"wait": ["20"], "since": ["s1"]}
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(event["event"], event["state"]) for event in events] == [("status", "s1"), ("status", "s2")]
    assert events[1]["evaluations"][0]["status"] == "passed" and "time" in events[1]


def test_it_stops_waiting_where_no_runner_serves_and_says_how_to_go_on() -> None:
    stuck = submission("running", "s1", evaluation("queued", "b200", 0),
                       warnings=[{"code": "no_runner", "message": "no b200 runner", "gpu_type": "b200"}])
    limits = Limits(no_runner_s=0.5)
    with serving(answer(200, {"max_wait_seconds": 20}), answer(200, stuck)) as (url, script):
        outcome = follow(Client(url, "t"), stuck, Output("json"), limits)
    assert outcome.stopped == "no_runner"
    assert parse_qs(urlparse(script.seen[1].path).query)["wait"] == ["1"]  # never longer than the limit left
    message = stopped_message(outcome, limits)
    assert "no runner for b200 was online for 0.5 s" in message and "solboard status 12 --wait" in message


def test_it_stops_after_the_total_timeout() -> None:
    running = submission("running", "s1", evaluation("running"))
    limits = Limits(no_runner_s=60, total_s=0.5)
    with serving(answer(200, {"max_wait_seconds": 20}), answer(200, running)) as (url, _):
        outcome = follow(Client(url, "t"), running, Output("json"), limits)
    assert outcome.stopped == "timeout"
    assert "--timeout 0.5 s passed" in stopped_message(outcome, limits)
