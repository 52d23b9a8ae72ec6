"""Where a command's answer goes: text for people, one JSON document, or one JSON event per line;
messages for people always on standard error, so a program reading standard output reads JSON only.
Output goes to the standard output of the moment (``contextlib.redirect_stdout`` included)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json

import pytest

from solboard_client.output import Output


def lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_the_mode_comes_from_the_flags_and_jsonl_wins() -> None:
    assert Output.of(argparse.Namespace()).text
    assert Output.of(argparse.Namespace(json=True)).mode == "json"
    assert Output.of(argparse.Namespace(json=True, jsonl=True)).streaming


def test_a_result_is_for_people_one_document_or_one_event(capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    Output("text").result("quota", {"left": 3}, lambda: shown.append("table"))
    assert shown == ["table"] and capsys.readouterr().out == ""
    Output("json").result("quota", {"left": 3}, lambda: shown.append("never"))
    assert json.loads(capsys.readouterr().out) == {"left": 3}
    Output("jsonl").result("quota", {"left": 3}, lambda: shown.append("never"))
    event = lines(capsys.readouterr().out)[0]
    assert (event["event"], event["command"], event["data"]) == ("result", "quota", {"left": 3})
    assert shown == ["table"]


def test_a_document_follows_a_redirected_standard_output() -> None:
    redirected = io.StringIO()
    with contextlib.redirect_stdout(redirected):
        Output("json").result("whoami", {"user": "alice"}, lambda: None)
    assert json.loads(redirected.getvalue()) == {"user": "alice"}


def test_events_exist_only_in_jsonl_and_carry_a_time(capsys: pytest.CaptureFixture[str]) -> None:
    Output("json").event("submitted", submission_id=3)
    Output("text").event("submitted", submission_id=3)
    assert capsys.readouterr().out == ""
    Output("jsonl").event("submitted", submission_id=3)
    event = lines(capsys.readouterr().out)[0]
    assert (
        event["event"] == "submitted"
        and event["submission_id"] == 3
        and str(event["time"]).endswith("+00:00")
    )


def test_warnings_and_errors_go_to_people_on_stderr_and_to_programs_as_events(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = Output("jsonl")
    out.warning("no_runner", "no b200 runner is online", gpu_type="b200")
    assert out.error("submit", "not_found", "no such problem", 2, hint="solboard problems lists them") == 2
    captured = capsys.readouterr()
    assert "warning: no b200 runner is online" in captured.err
    assert (
        "solboard submit: no such problem" in captured.err and "solboard problems lists them" in captured.err
    )
    warning, error = lines(captured.out)
    assert (warning["event"], warning["code"], warning["gpu_type"]) == ("warning", "no_runner", "b200")
    assert (error["event"], error["code"], error["exit_status"]) == ("error", "not_found", 2)
    Output("text").error("submit", "not_found", "no such problem", 2)
    assert capsys.readouterr().out == ""
