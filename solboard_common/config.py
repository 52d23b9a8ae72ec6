"""Configuration shared by the web, the site worker and runner nodes. No Django, no torch.

Everything is read from the environment through small typed helpers that fail loudly: a value
that does not parse stops the process with a message naming the variable, instead of silently
turning into a default. Defaults suit local development (``make run``): SQLite files and a broker
that needs no server, all under ``var/``.
"""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path
from typing import Any

from solboard_common.private_state import create_private_file
from solboard_common.protocol import SITE_QUEUE

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Longer than the longest job (JobLimits' stages add up to ~25 min; multi-GPU jobs and queueing
#: behind a busy runner stretch that): a message not acked within this is redelivered by Redis/SQS.
BROKER_VISIBILITY_TIMEOUT_S = 4 * 3600

#: SQLite busy timeout for every file shared by several processes (web, workers, broker).
SQLITE_BUSY_TIMEOUT_S = 30.0

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """An environment variable holds a value that cannot be used; the message names it."""


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str | None = None, *, required: bool = False) -> str | None:
    value = _raw(name)
    if value:
        return value
    if required:
        raise ConfigError(f"{name} must be set (it has no default)")
    return default


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _raw(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ConfigError(f"{name}={number} is below the minimum {minimum}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = _raw(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a number") from None
    if not math.isfinite(number):
        raise ConfigError(f"{name}={value!r} is not a finite number")
    if minimum is not None and number < minimum:
        raise ConfigError(f"{name}={number} is below the minimum {minimum}")
    return number


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name}={value!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)")


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    """Comma-separated; blanks around items are ignored, empty items are an error."""
    value = _raw(name)
    if value is None:
        return list(default or [])
    if not value:
        return []
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ConfigError(f"{name}={value!r} has an empty item (check for a stray comma)")
    return items


def env_path(name: str, default: Path) -> Path:
    value = _raw(name)
    if not value:
        return default
    if "\0" in value:
        raise ConfigError(f"{name} contains a NUL byte")
    return Path(value).expanduser().resolve()


def var_dir() -> Path:
    """Where local state lives (SQLite files, broker, caches): SOLBOARD_VAR, default ./var."""
    path = env_path("SOLBOARD_VAR", REPO_ROOT / "var")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)  # private: database, broker, keys
    except OSError as error:
        raise ConfigError(f"SOLBOARD_VAR={str(path)!r} cannot be created: {error}") from None
    return path


def default_broker_url() -> str:
    """The embedded broker: kombu's SQLAlchemy transport on a SQLite file, no server needed."""
    return f"sqla+sqlite:///{var_dir() / 'broker.sqlite3'}"


def default_result_backend() -> str:
    """Celery results in a SQLite file (diagnostics only: the job flow never reads results)."""
    return f"db+sqlite:///{var_dir() / 'results.sqlite3'}"


#: A 0600 file holding the broker URL, for hosts that keep its password out of the environment.
BROKER_URL_FILE_VARIABLE = "SOLBOARD_BROKER_URL_FILE"


def broker_url() -> str:
    """CELERY_BROKER_URL, else the URL in the file SOLBOARD_BROKER_URL_FILE names, else the
    embedded broker."""
    named = env_str(BROKER_URL_FILE_VARIABLE)
    return env_str("CELERY_BROKER_URL") or (
        broker_url_from_file(Path(named)) if named else default_broker_url()
    )


def broker_url_from_file(path: Path) -> str:
    """The URL in a file only its owner may read (a broker password must not leak to the host)."""
    from solboard_common.signing import CredentialError, read_private_file

    try:
        url = read_private_file(path, "broker URL")
    except CredentialError as error:
        raise ConfigError(str(error)) from None
    if "://" not in url:
        raise ConfigError(f"broker URL file {path} does not hold a URL (scheme://...)")
    return url


def default_credential_file() -> Path:
    """Where ``make run`` writes its runner's credential and where a runner looks last."""
    return var_dir() / "runner-credential"


def sqlite_path_of(url: str) -> Path | None:
    """The file behind a ``sqla+sqlite:///`` / ``db+sqlite:///`` / ``sqlite:///`` URL, else None.

    SQLAlchemy's convention: three slashes then a relative path, four for an absolute one.
    """
    scheme, separator, rest = url.partition("://")
    if not separator or "sqlite" not in scheme.split("+"):
        return None
    path = rest[1:].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def prepare_sqlite(path: Path) -> None:
    """Create the file and switch it to WAL: readers never block the writer, and the mode is
    stored in the file, so every later connection (kombu's, SQLAlchemy's, Django's) gets it."""
    create_private_file(path)  # 0600 before SQLite creates it (its -wal/-shm files copy the mode)
    connection = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def _sqlite_engine_options() -> dict[str, Any]:
    # pysqlite's ``timeout`` is SQLite's busy timeout: wait for a lock instead of failing at once.
    return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}}


def broker_transport_options(url: str) -> dict[str, Any]:
    """Per transport: kombu's SQLAlchemy transport passes its options straight to
    ``sqlalchemy.create_engine`` (so nothing else may go in there); Redis/SQS take a visibility
    timeout, which must outlast the longest job or the message is delivered twice."""
    path = sqlite_path_of(url)
    if url.startswith(("sqla+", "sqlalchemy+")):
        if path is not None:
            prepare_sqlite(path)
            return _sqlite_engine_options()
        return {}
    return {"visibility_timeout": BROKER_VISIBILITY_TIMEOUT_S}


def celery_common_settings(broker_url: str, result_backend: str | None = None) -> dict[str, Any]:
    """What the site's and the runner's Celery apps share (lower-case Celery setting names)."""
    settings: dict[str, Any] = {
        "broker_url": broker_url,
        "broker_transport_options": broker_transport_options(broker_url),
        "broker_connection_retry_on_startup": True,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": SITE_QUEUE,
        "task_track_started": True,
        "enable_utc": True,
        "timezone": "UTC",
    }
    if result_backend:
        settings.update(result_backend_settings(result_backend))
    return settings


def result_backend_settings(url: str) -> dict[str, Any]:
    settings: dict[str, Any] = {"result_backend": url, "result_expires": 24 * 3600}
    path = sqlite_path_of(url)
    if path is not None:
        prepare_sqlite(path)
        settings["database_engine_options"] = _sqlite_engine_options()
    return settings
