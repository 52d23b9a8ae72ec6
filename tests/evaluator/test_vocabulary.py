"""Languages, modes, devices, stages, statuses, verdicts and stage limits are declared once
(evaluator/vocabulary.py): every layer that names them — the site's models, the job protocol, the
report contract, the evaluator's request, both command lines — accepts exactly those, and no module
spells a status itself."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import evaluator.report
from evaluator.commands import run_cmd
from evaluator.harness.request import Limits
from evaluator.report import DeviceInfo, EvaluationReport
from evaluator.vocabulary import (
    COMPILE_LIMIT_S,
    DEVICES,
    LANGUAGES,
    MODES,
    RANKED_LIMIT_S,
    STATUS_SEVERITY,
    TEST_LIMIT_S,
    Stage,
    Status,
    Verdict,
    language_of_file,
    stage_limits,
    worst_status,
)
from leaderboard.api.serializers import language_for_filename
from leaderboard.models import EvaluationStatus, Language, Mode
from solboard_client.commands import MODE_OF
from solboard_client.commands import language_of as client_language_of
from solboard_client.main import build_parser as client_parser
from solboard_common.protocol import Job, JobLimits
from tests.harness_helpers import REPO


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
    assert choices_of(evaluator, "--language") == list(LANGUAGES) and choices_of(evaluator, "--mode") == list(
        MODES
    )
    commands = client_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert choices_of(commands["run"], "--mode") == list(MODES)
    # submit also takes popcorn-cli's names, each one of the site's modes.
    submitted = choices_of(commands["submit"], "--mode")
    assert submitted[:len(MODES)] == list(MODES) and {MODE_OF[mode] for mode in submitted} == set(MODES)


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


# ---------------------------------------------------------------- statuses and verdicts

#: The packages whose words must come from evaluator/vocabulary.py.
PACKAGES = ("evaluator", "runners", "leaderboard", "solboard_common", "solboard_client")
STATUS_LITERAL = re.compile("[\"'](" + "|".join(status.value for status in Status) + ")[\"']")


def test_every_status_has_one_verdict_one_severity_and_the_report_schemas_word() -> None:
    assert evaluator.report.Status is Status
    assert sorted(STATUS_SEVERITY) == sorted(Status) and STATUS_SEVERITY[-1] is Status.PASSED
    assert {status.verdict for status in Status} == set(Verdict)
    schema = json.loads((REPO / "docs" / "report-schema.json").read_text())
    assert schema["$defs"]["Status"]["enum"] == [status.value for status in Status]


def test_the_worst_status_decides_and_passed_needs_every_one_to_pass() -> None:
    assert worst_status([]) is Status.PASSED
    assert worst_status([Status.PASSED, Status.INCORRECT_NUMERICAL, Status.TIMEOUT]) is Status.TIMEOUT
    assert worst_status([Status.RUNTIME_ERROR, Status.REJECTED]) is Status.REJECTED


def test_the_sites_evaluation_statuses_are_the_verdicts_and_its_own_states() -> None:
    assert set(Verdict) <= set(EvaluationStatus.values)
    assert set(EvaluationStatus.values) - set(Verdict) == {"queued", "running", "cancelled"}


def test_a_status_travels_as_its_word() -> None:
    # The child sends statuses over its JSON channel and f-strings put them in messages.
    assert json.dumps({"status": Status.REJECTED}) == '{"status": "REJECTED"}'
    assert f"{Status.TIMEOUT}: {Verdict.TIMEOUT}" == "TIMEOUT: timeout"


def test_no_module_spells_a_status_itself() -> None:
    spelled = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path == REPO / "evaluator" / "vocabulary.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if STATUS_LITERAL.search(line):
                    spelled.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert spelled == [], "statuses come from evaluator.vocabulary.Status:\n" + "\n".join(spelled)


def test_a_files_extension_names_its_language_everywhere() -> None:
    for name, language in [("k.py", "python"), ("k.PTX", "ptx"), ("k.cu", "cuda"), ("k.cuh", "cuda"),
                           ("kernel", "python"), ("k.txt", "python")]:
        assert language_of_file(name) == language
        assert language_for_filename(name) == language
        assert run_cmd.language_of(Path(name)) == language
        assert client_language_of(Path(name), None) == language
    assert client_language_of(Path("k.cu"), "ptx") == "ptx"  # the user's word wins


def test_devices_and_stages_are_the_words_the_command_lines_and_the_report_use() -> None:
    evaluator_cli = argparse.ArgumentParser()
    run_cmd.add_arguments(evaluator_cli)
    assert choices_of(evaluator_cli, "--device") == list(DEVICES)
    assert enum_of(DeviceInfo, "kind") == list(DEVICES)
    assert [stage.value for stage in Stage][2:] == ["compile", "test", "ranked"]  # Limits.compile_s ...
