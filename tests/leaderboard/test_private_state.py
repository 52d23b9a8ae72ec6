"""var/ (database, embedded broker, results, keys) is the site user's alone: the folder 0700, every
file 0600, from the first start of ``solboard dev`` and after it on a checkout an older version
left world-readable. The runner's own state folder keeps the modes the runner gives it."""

from __future__ import annotations

import argparse
import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leaderboard import devserver
from solboard_common import config
from solboard_common.private_state import create_private_file, make_private_dir, tighten_var


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask 022, under which files came out world-readable before."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def dev_env(var: Path) -> dict[str, str]:
    return {"SOLBOARD_VAR": str(var), "CELERY_BROKER_URL": f"sqla+sqlite:///{var / 'broker.sqlite3'}",
            "CELERY_RESULT_BACKEND": f"db+sqlite:///{var / 'results.sqlite3'}"}


def test_solboard_dev_creates_var_and_its_sqlite_files_private(tmp_path: Path, open_umask: None) -> None:
    var = tmp_path / "var"
    devserver.prepare_var(dev_env(var))
    assert mode_of(var) == 0o700
    for name in ("db.sqlite3", "broker.sqlite3", "results.sqlite3"):
        assert mode_of(var / name) == 0o600, name


def test_sqlites_journal_files_inherit_the_private_mode(tmp_path: Path, open_umask: None) -> None:
    var = tmp_path / "var"
    devserver.prepare_var(dev_env(var))
    connection = sqlite3.connect(var / "db.sqlite3")
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE secrets (value TEXT)")
    connection.execute("INSERT INTO secrets VALUES ('pbkdf2_sha256$...')")
    connection.commit()
    try:
        assert {path.name: mode_of(path) for path in var.glob("db.sqlite3*")} == {
            "db.sqlite3": 0o600, "db.sqlite3-wal": 0o600, "db.sqlite3-shm": 0o600,
        }
    finally:
        connection.close()


def test_solboard_dev_tightens_what_an_older_checkout_left_readable(tmp_path: Path) -> None:
    var = tmp_path / "var"
    (var / "staticfiles").mkdir(parents=True)
    var.chmod(0o755)
    leftovers = [
        var / "db.sqlite3",
        var / "broker.sqlite3-wal",
        var / "runner-credential",
        var / "staticfiles" / "a.css",
    ]
    for path in leftovers:
        path.write_text("x")
        path.chmod(0o644)
    scratch = var / "runner" / "node" / "scratch"
    scratch.mkdir(parents=True)
    scratch.chmod(0o711)  # the runner's: a job user must traverse it
    devserver.prepare_var(dev_env(var))
    assert mode_of(var) == 0o700 and mode_of(var / "staticfiles") == 0o700
    assert all(mode_of(path) == 0o600 for path in leftovers)
    assert mode_of(scratch) == 0o711


def test_tighten_var_reports_what_it_changed_and_nothing_twice(tmp_path: Path) -> None:
    make_private_dir(tmp_path / "var")
    leftover = tmp_path / "var" / "results.sqlite3"
    leftover.write_text("x")
    leftover.chmod(0o640)
    assert tighten_var(tmp_path / "var") == [leftover]
    assert tighten_var(tmp_path / "var") == []


def test_an_existing_file_keeps_its_content_and_loses_group_and_other(tmp_path: Path) -> None:
    path = tmp_path / "broker.sqlite3"
    path.write_text("queued jobs")
    path.chmod(0o664)
    create_private_file(path)
    assert mode_of(path) == 0o600 and path.read_text() == "queued jobs"


def test_the_runners_embedded_broker_file_is_created_private(tmp_path: Path, open_umask: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``solboard runner`` alone (no ``solboard dev``) goes through prepare_sqlite and var_dir."""
    monkeypatch.setenv("SOLBOARD_VAR", str(tmp_path / "state"))
    config.prepare_sqlite(config.var_dir() / "broker.sqlite3")
    assert mode_of(tmp_path / "state") == 0o700
    assert mode_of(tmp_path / "state" / "broker.sqlite3") == 0o600


def test_the_web_and_site_worker_create_private_files_and_the_runner_does_not(tmp_path: Path) -> None:
    """The runner keeps umask 022: as root it writes each job's inputs for the job user."""
    procs = devserver.children(argparse.Namespace(host="127.0.0.1", port=8000, device="cpu", no_runner=False))
    umasks = {child.name: child.umask for child in procs}
    assert umasks["web"] == umasks["site-worker"] == 0o077
    assert umasks.get("runner", 0o022) == 0o022
    written = tmp_path / "written"
    probe = devserver.Child("probe", [sys.executable, "-c", f"open({str(written)!r}, 'w').close()"])
    devserver.start(probe, dict(os.environ))
    assert probe.process is not None and probe.process.wait(timeout=30) == 0
    assert mode_of(written) == 0o600

