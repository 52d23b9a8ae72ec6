"""Reachability checks for /healthz: the database and the broker, each with a short timeout."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection
from kombu import Connection

from solboard_common.protocol import SITE_QUEUE

BROKER_TIMEOUT_S = 3.0


def check_database() -> dict[str, Any]:
    started = time.monotonic()
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:  # any failure means "not reachable"; the message says which
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}
    return {"ok": True, "vendor": connection.vendor, "latency_ms": _ms_since(started)}


def check_broker(url: str) -> dict[str, Any]:
    started = time.monotonic()
    try:
        with Connection(url, connect_timeout=BROKER_TIMEOUT_S, transport_options=_options(url)) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_S)
            depth = _site_queue_depth(conn)
            transport = conn.transport_cls
    except Exception as error:  # transports raise their own error types
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}
    result: dict[str, Any] = {"ok": True, "transport": str(transport), "latency_ms": _ms_since(started)}
    if depth is not None:
        result["site_queue_depth"] = depth
    return result


def _options(url: str) -> dict[str, Any]:
    from solboard_common.config import broker_transport_options

    return broker_transport_options(url)


def _site_queue_depth(conn: Connection) -> int | None:
    # Virtual transports (Redis, the SQLite broker) connect lazily: asking for a queue's length is
    # what actually touches the server or the file. AMQP connected in ensure_connection already.
    channel = conn.default_channel
    size = getattr(channel, "_size", None)
    return int(size(SITE_QUEUE)) if size is not None else None


def _ms_since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
