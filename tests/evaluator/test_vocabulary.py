"""Languages, modes and stage limits are declared once (evaluator/vocabulary.py): every layer that
names them — the site's models, the job protocol, the report contract, the evaluator's request,
both command lines — accepts exactly those."""

from __future__ import annotations

import argparse
from typing import Any

from evaluator.commands import run_cmd
from evaluator.harness.request import Limits
from evaluator.report import EvaluationReport
from evaluator.vocabulary import COMPILE_LIMIT_S, LANGUAGES, MODES, RANKED_LIMIT_S, TEST_LIMIT_S, stage_limits
from leaderboard.models import Language, Mode
from solboard_client.commands import MODE_OF
from solboard_client.main import build_parser as client_parser
from solboard_common.protocol import Job, JobLimits


def enum_of(model: Any, field: str) -> list[str]:
    return list(model.model_json_schema()["properties"][field]["enum"])


def choices_of(parser: argparse.ArgumentParser, option: str) -> list[str]:
    action = next(action for action in parser._actions if option in action.option_strings)
    return list(action.choices or [])


def test_the_site_offers_exactly_the_evaluators_languages_and_modes() -> None:
    assert Language.values == list(LANGUAGES) and Mode.values == list(MODES)
    assert Language.CUDA.label == "CUDA C++" and Mode.RANKED == "ranked"


def test_the_job_protocol_and_the_report_contract_accept_exactly_those_words() -> None:
    for model in (Job, EvaluationReport):
        assert enum_of(model, "language") == list(LANGUAGES)
        assert enum_of(model, "mode") == list(MODES)


def test_both_command_lines_offer_exactly_those_words() -> None:
    evaluator = argparse.ArgumentParser()
    run_cmd.add_arguments(evaluator)
    assert choices_of(evaluator, "--language") == list(LANGUAGES) and choices_of(evaluator, "--mode") == list(MODES)
    submit = client_parser()._subparsers._group_actions[0].choices["submit"]  # type: ignore[union-attr]
    offered = choices_of(submit, "--mode")
    assert offered[:len(MODES)] == list(MODES)
    # the rest are popcorn-cli's names, each run as one of the site's modes
    assert set(offered) == set(MODE_OF) and set(MODE_OF.values()) == set(MODES)


def test_stage_limit_defaults_agree_between_the_protocol_the_request_and_the_cli() -> None:
    expected = (COMPILE_LIMIT_S, TEST_LIMIT_S, RANKED_LIMIT_S)
    job = JobLimits()
    request = Limits()
    assert (job.compile_seconds, job.test_seconds, job.ranked_seconds) == expected
    assert (request.compile_s, request.test_s, request.ranked_s) == expected
    evaluator = argparse.ArgumentParser()
    run_cmd.add_arguments(evaluator)
    ranked = run_cmd.build_request(evaluator.parse_args(["vector_add", "kernel.py", "--mode", "ranked"]))
    assert (ranked.limits.compile_s, ranked.limits.test_s, ranked.limits.ranked_s) == expected


def test_a_test_mode_job_gets_shorter_stage_limits_than_a_ranked_one() -> None:
    evaluator = argparse.ArgumentParser()
    run_cmd.add_arguments(evaluator)
    test = run_cmd.build_request(evaluator.parse_args(["vector_add", "kernel.py"]))
    assert (test.limits.compile_s, test.limits.test_s, test.limits.ranked_s) == stage_limits("test")
    assert sum(stage_limits("test")) < sum(stage_limits("ranked")) / 2
    asked = run_cmd.build_request(evaluator.parse_args(["vector_add", "kernel.py", "--time-limit-test", "7"]))
    assert asked.limits.test_s == 7.0 and asked.limits.ranked_s == stage_limits("test")[2]
