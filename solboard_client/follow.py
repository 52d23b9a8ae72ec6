"""Following a submission to its end (``submit --wait``, ``status --wait``, ``rerun --wait``): long
polls, each as long as the server allows, with a live line, plain lines or JSON events.

Waiting is bounded where it would otherwise never end: when every evaluation still to finish is
queued on a GPU type no live runner serves (``runners_online`` 0) for ``no_runner_s`` seconds, and
after ``total_s`` seconds if given. The submission stays queued on the server; ``stopped`` says why.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from solboard_client import render
from solboard_client.output import Output
from solboard_client.transport import Client


@dataclass(frozen=True)
class Limits:
    no_runner_s: float
    total_s: float | None = None


@dataclass
class Outcome:
    body: dict[str, Any]
    stopped: str | None = None  # why waiting ended before the submission did: no_runner or timeout


def stranded(body: dict[str, Any]) -> list[str]:
    """The GPU types it waits on that no runner serves, when nothing else is left; else []."""
    left = [e for e in body["evaluations"] if e["status"] in ("queued", "running")]
    if not left or any(e["status"] != "queued" or e.get("runners_online") != 0 for e in left):
        return []
    return sorted({e["gpu_type"] for e in left})


class Reporter:
    """Shows each new state once: a live line (text), nothing (json), or a status event (jsonl)."""

    def __init__(self, out: Output) -> None:
        self.out, self.progress, self.started, self.last_state = out, render.Progress(), time.monotonic(), ""
        self.warned: set[str] = set()

    def show(self, body: dict[str, Any]) -> None:
        for warning in body.get("warnings", []):
            if warning["gpu_type"] not in self.warned:
                self.warned.add(warning["gpu_type"])
                self.out.warning(warning["code"], warning["message"], gpu_type=warning["gpu_type"],
                                 submission_id=body["id"])
        if self.out.text:
            lines = "; ".join(render.evaluation_line(e) for e in body["evaluations"])
            self.progress.show(f"[{time.monotonic() - self.started:5.0f}s] {lines}")
        elif body["state"] != self.last_state:
            self.out.event("status", submission_id=body["id"], status=body["status"], state=body["state"],
                           evaluations=[render.evaluation_summary(e) for e in body["evaluations"]])
        self.last_state = body["state"]

    def done(self) -> None:
        self.progress.done()


def follow(api: Client, body: dict[str, Any], out: Output, limits: Limits) -> Outcome:
    server_max = int(api.get("/api/").get("max_wait_seconds", 60))
    reporter, started, stranded_since = Reporter(out), time.monotonic(), None
    reporter.show(body)
    try:
        while body["status"] != "finished":
            now = time.monotonic()
            stranded_since = (stranded_since or now) if stranded(body) else None
            deadlines: list[float] = [server_max]
            if stranded_since is not None:
                if now - stranded_since >= limits.no_runner_s:
                    return Outcome(body, "no_runner")
                deadlines.append(limits.no_runner_s - (now - stranded_since))
            if limits.total_s is not None:
                if now - started >= limits.total_s:
                    return Outcome(body, "timeout")
                deadlines.append(limits.total_s - (now - started))
            wait = max(1, math.ceil(min(deadlines)))
            body = api.get(
                f"/api/submissions/{body['id']}?wait={wait}&since={body['state']}", timeout=wait + 30
            )
            reporter.show(body)
    finally:
        reporter.done()
    return Outcome(body)


def stopped_message(outcome: Outcome, limits: Limits) -> str:
    submission = outcome.body["id"]
    if outcome.stopped == "no_runner":
        gpus = ", ".join(stranded(outcome.body))
        why = f"no runner for {gpus} was online for {limits.no_runner_s:g} s"
    else:
        why = f"--timeout {limits.total_s:g} s passed"
    return (f"stopped waiting: {why}; submission {submission} stays queued on the server "
            f"(solboard status {submission} --wait to follow it, solboard cancel {submission} to drop it)")
