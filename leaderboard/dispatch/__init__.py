"""The site side of runner nodes: enqueue jobs fairly, take what runners send back, sweep.

- ``enqueue``: build a Job from an Evaluation; hand evaluations to the broker on commit, at most
  ``SOLBOARD_MAX_INFLIGHT_PER_USER`` per user and GPU type at a time (fair scheduling); cancel.
- ``messages``: job_started (attempt counting, stale deliveries), results (validated, stored
  once), provisional reports (before the witness: shown, never ranked), heartbeats (RunnerNode rows).
- ``sweep``: re-enqueue what was never handed over, requeue or fail the jobs of lost runners.

Runners hold no database credentials: everything they say arrives here as a message and is
checked against the evaluation it claims to be about.
"""

from __future__ import annotations

from leaderboard.dispatch.enqueue import (
    CancelNotAllowed,
    build_job,
    cancel_evaluation,
    enqueue_on_commit,
    max_inflight_per_user,
    release_pending,
    send_control,
)
from leaderboard.dispatch.messages import record_heartbeat, record_started, store_provisional, store_result
from leaderboard.dispatch.sweep import SweepReport, maybe_sweep, sweep

__all__ = [
    "CancelNotAllowed",
    "SweepReport",
    "build_job",
    "cancel_evaluation",
    "enqueue_on_commit",
    "max_inflight_per_user",
    "maybe_sweep",
    "record_heartbeat",
    "record_started",
    "release_pending",
    "send_control",
    "store_provisional",
    "store_result",
    "sweep",
]
