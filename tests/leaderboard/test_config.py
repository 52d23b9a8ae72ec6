"""Settings come from the environment through typed helpers that fail loudly on a bad value."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from solboard_common import config
from solboard_common.config import (
    ConfigError,
    celery_common_settings,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_path,
    env_str,
    sqlite_path_of,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("helper", "value", "message"),
    [
        (lambda: env_int("SOLBOARD_T", 1), "ten", "SOLBOARD_T='ten' is not an integer"),
        (lambda: env_int("SOLBOARD_T", 1, minimum=5), "3", "SOLBOARD_T=3 is below the minimum 5"),
        (lambda: env_float("SOLBOARD_T", 1.0), "fast", "SOLBOARD_T='fast' is not a number"),
        (lambda: env_float("SOLBOARD_T", 1.0), "nan", "not a finite number"),
        (lambda: env_bool("SOLBOARD_T", False), "maybe", "SOLBOARD_T='maybe' is not a boolean"),
        (lambda: env_list("SOLBOARD_T"), "a,,b", "SOLBOARD_T='a,,b' has an empty item"),
        (lambda: env_str("SOLBOARD_T", required=True), "", "SOLBOARD_T must be set"),
    ],
)
def test_a_bad_value_fails_loudly_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, helper, value, message
) -> None:
    monkeypatch.setenv("SOLBOARD_T", value)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        helper()


def test_good_values_parse_and_unset_ones_take_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SOLBOARD_T_INT", " 42 ")
    monkeypatch.setenv("SOLBOARD_T_BOOL", "Off")
    monkeypatch.setenv("SOLBOARD_T_LIST", "a.example, b.example")
    monkeypatch.setenv("SOLBOARD_T_PATH", str(tmp_path / "x"))
    monkeypatch.delenv("SOLBOARD_T_UNSET", raising=False)
    assert env_int("SOLBOARD_T_INT", 1) == 42
    assert env_bool("SOLBOARD_T_BOOL", True) is False
    assert env_list("SOLBOARD_T_LIST") == ["a.example", "b.example"]
    assert env_path("SOLBOARD_T_PATH", Path("/nowhere")) == tmp_path / "x"
    assert env_float("SOLBOARD_T_UNSET", 2.5) == 2.5 and env_bool("SOLBOARD_T_UNSET", True) is True


def test_var_dir_follows_solboard_var_and_is_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SOLBOARD_VAR", str(tmp_path / "state"))
    assert config.var_dir() == tmp_path / "state" and (tmp_path / "state").is_dir()
    assert config.default_broker_url() == f"sqla+sqlite:///{tmp_path / 'state' / 'broker.sqlite3'}"


def test_the_embedded_broker_gets_wal_and_a_busy_timeout_and_no_foreign_options(tmp_path: Path) -> None:
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    settings = celery_common_settings(url)
    # kombu hands these to sqlalchemy.create_engine: a visibility_timeout there would crash it.
    assert settings["broker_transport_options"] == {
        "connect_args": {"timeout": 30.0, "check_same_thread": False}
    }
    import sqlite3

    mode = sqlite3.connect(tmp_path / "broker.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_redis_gets_a_visibility_timeout_longer_than_the_longest_job() -> None:
    from solboard_common.protocol import JobLimits

    settings = celery_common_settings("redis://127.0.0.1:6379/0")
    assert settings["broker_transport_options"]["visibility_timeout"] > JobLimits().total_seconds * 2
    assert settings["accept_content"] == ["json"] and settings["task_serializer"] == "json"
    assert settings["task_acks_late"] and settings["task_reject_on_worker_lost"]
    assert settings["worker_prefetch_multiplier"] == 1


def test_sqlite_paths_are_read_from_every_url_form() -> None:
    assert sqlite_path_of("sqla+sqlite:////srv/var/broker.sqlite3") == Path("/srv/var/broker.sqlite3")
    assert sqlite_path_of("db+sqlite:///relative.db") == Path("relative.db")
    assert sqlite_path_of("redis://127.0.0.1:6379/0") is None
    assert sqlite_path_of("sqlite://") is None


def django_check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    return subprocess.run([sys.executable, "manage.py", "check", *args], cwd=REPO, env={**clean, **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_settings_refuse_to_start_without_a_secret_key_when_debug_is_off() -> None:
    result = django_check({"DEBUG": "0"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_settings_refuse_a_malformed_boolean() -> None:
    result = django_check({"DEBUG": "perhaps"})
    assert result.returncode != 0 and "DEBUG='perhaps' is not a boolean" in result.stderr


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("SOLBOARD_JOB_TEST_SECONDS", "soon", "SOLBOARD_JOB_TEST_SECONDS='soon' is not a number"),
    ("SOLBOARD_MAX_INFLIGHT_PER_USER", "0", "SOLBOARD_MAX_INFLIGHT_PER_USER=0 is below the minimum 1"),
    ("SOLBOARD_RUNNER_MESSAGE_WINDOW_SECONDS", "ages", "is not an integer"),
    ("SOLBOARD_SWEEP_SECONDS", "0.1", "SOLBOARD_SWEEP_SECONDS=0.1 is below the minimum 0.5"),
    ("SOLBOARD_BROKER_WAIT_MAX_SECONDS", "nan", "is not a finite number"),
    ("SOLBOARD_CACHE_URL", "/var/cache", "is neither redis://..., rediss://..., unix://... nor file:///dir"),
    ("SITE_URL", "solboard.example.org", "must start with http:// or https://"),
])
def test_settings_refuse_a_malformed_dispatch_setting_at_start(
    variable: str, value: str, message: str
) -> None:
    # Read at call time, these failed only inside a task or an on_commit hook, where they were logged.
    result = django_check({variable: value})
    assert result.returncode != 0 and message in result.stderr


def test_jobs_carry_the_stage_limits_the_settings_read(settings: Any) -> None:
    from leaderboard.dispatch.enqueue import job_limits

    settings.SOLBOARD_JOB_COMPILE_SECONDS, settings.SOLBOARD_JOB_TEST_SECONDS = 30.0, 5.0
    settings.SOLBOARD_JOB_RANKED_SECONDS = 60.0
    limits = job_limits()
    assert (limits.compile_seconds, limits.test_seconds, limits.ranked_seconds) == (30.0, 5.0, 60.0)


def test_production_settings_pass_check_deploy() -> None:
    env = {"DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "solboard.example.org"}
    result = django_check(env, "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_cache_url_picks_a_cache_shared_between_processes(tmp_path: Path) -> None:
    """make run's folder cache is shared by the web server and the site worker; no URL: local memory."""
    code = ("from django.conf import settings; c = settings.CACHES['default']; "
            "print(c['BACKEND'].rsplit('.', 1)[1], c.get('LOCATION', ''))")
    clean = {k: v for k, v in os.environ.items() if k != "SOLBOARD_CACHE_URL"}
    found = [subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], cwd=REPO,
                            env={**clean, "DJANGO_SETTINGS_MODULE": "leaderboard.settings", **extra},
                            capture_output=True, text=True, timeout=120, check=True).stdout.split()
             for extra in ({"SOLBOARD_CACHE_URL": f"file://{tmp_path}"}, {})]
    assert found == [["FileBasedCache", str(tmp_path)], ["LocMemCache"]]


def test_make_run_gives_its_children_one_folder_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from leaderboard.devserver import child_env

    monkeypatch.setenv("SOLBOARD_VAR", str(tmp_path))
    monkeypatch.delenv("SOLBOARD_CACHE_URL", raising=False)
    assert child_env()["SOLBOARD_CACHE_URL"] == f"file://{tmp_path}/cache"
