"""The untrusted ranks of a multi-GPU job as the judge sees them: n ``ChildProcess``es, spoken to
together, waited on together.

The judge waits on every rank's channel at once (``select``), so a rank that died, raised, spoke out
of turn or hung is known as soon as it happens, not when the judge gets round to reading that rank:
the others may be blocked forever in a collective with it. Each child keeps its own watchdog (its
process group killed at the stage deadline); ``close`` kills every rank's group.
"""

from __future__ import annotations

import select
import time
from pathlib import Path
from typing import Any

from evaluator.harness import channel
from evaluator.harness.parent import ChildProcess


class RankFailure(Exception):
    """One rank ended the job; ``rank`` says which (None: several, or the job's stage as a whole)."""

    def __init__(self, rank: int | None, message: str) -> None:
        super().__init__(message)
        self.rank = rank
        self.message = message


class RankTimeout(RankFailure):
    """The stage's deadline passed before these ranks answered."""


class RankDied(RankFailure):
    """A rank's channel closed: it exited or was killed."""


class RankRaised(RankFailure):
    """A rank's kernel (or implementation) raised: its peers may be blocked in a collective with it."""


class RankProtocolViolation(RankFailure):
    """A rank sent what the protocol does not allow now (forged or out of turn, class 16)."""


class RankGroup:
    """Spawn, address and reap the ranks of one job."""

    def __init__(self, world_size: int, scratch: Path, log_cap: int, env_overrides: dict[str, str]) -> None:
        self.children = [
            ChildProcess(["-m", "evaluator.harness.multi.rank_child"], scratch, log_cap, env_overrides)
            for _ in range(world_size)
        ]
        #: The first failure: from then on no rank is asked anything (the judge kills them all).
        self.failure: RankFailure | None = None
        #: The judge's run-queue time after the wake-up that completed the last gather (ns).
        self.wake_queue_ns = 0

    @property
    def world_size(self) -> int:
        return len(self.children)

    def spawn(self, start_limit_s: float, configs: list[dict[str, Any]]) -> None:
        for child, config in zip(self.children, configs, strict=True):
            child.spawn(start_limit_s)
            child.send(config)

    def enter(self, stage: str, limit_s: float, shape: str | None = None) -> None:
        for child in self.children:
            child.enter(stage, limit_s, shape)

    @property
    def stage(self) -> Any:
        return self.children[0].stage

    def send(self, rank: int, message: dict[str, Any]) -> None:
        self.children[rank].send(message)

    def send_all(self, message: dict[str, Any]) -> None:
        for child in self.children:
            child.send(message)

    def gather(self, *expected: str) -> list[dict[str, Any]]:
        """Every rank's next message, each one of ``expected``, waiting on all ranks at once.

        An answer that carries an ``error`` (the kernel raised) ends the wait at once: RankRaised."""
        if self.failure is not None:
            raise self.failure
        try:
            return self._gather(expected)
        except RankFailure as failure:
            self.failure = failure
            raise

    def _gather(self, expected: tuple[str, ...]) -> list[dict[str, Any]]:
        answers: dict[int, dict[str, Any]] = {}
        self.wake_queue_ns = 0
        deadline = min(child.deadline for child in self.children)
        while len(answers) < self.world_size:
            pending = [rank for rank in range(self.world_size) if rank not in answers]
            for rank in pending:
                message = self._poll(rank)
                if message is None:
                    continue
                if message["type"] not in expected:
                    raise RankProtocolViolation(
                        rank,
                        f"rank {rank} sent an unexpected {message['type']!r} message "
                        f"(expected {'/'.join(expected)})",
                    )
                if message.get("error"):
                    raise RankRaised(rank, f"rank {rank}: {str(message['error'])[:4000]}")
                answers[rank] = message
            if len(answers) == self.world_size:
                break
            self._wait([rank for rank in pending if rank not in answers], deadline)
        return [answers[rank] for rank in range(self.world_size)]

    def _poll(self, rank: int) -> dict[str, Any] | None:
        child = self.children[rank]
        try:
            return child.reader.poll()
        except channel.ChannelError as error:
            child.broken = True
            if child.timed_out is not None:  # its watchdog killed it at the stage deadline
                raise RankTimeout(rank, f"rank {rank} ran past the stage limit") from None
            if child.reader.buffer and not child.reader.closed:
                raise RankProtocolViolation(
                    rank, f"rank {rank} wrote garbage on its channel ({error})"
                ) from None
            raise RankDied(rank, f"rank {rank} died ({child.exit_description()})") from None

    def _wait(self, pending: list[int], deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or any(self.children[rank].timed_out for rank in pending):
            for child in self.children:
                child.timed_out = child.timed_out or child.stage
            raise RankTimeout(pending[0] if len(pending) == 1 else None,
                              f"rank(s) {', '.join(map(str, pending))} did not answer")
        descriptors = [self.children[rank].from_child for rank in pending]
        queued = channel.own_run_queue_ns()
        ready, _, _ = select.select(descriptors, [], [], min(remaining, 0.5))
        if ready:  # the last wake-up of a gather is the judge's delay after the last answer
            self.wake_queue_ns = channel.own_run_queue_ns() - queued

    def pids(self) -> list[int]:
        return [child.process.pid for child in self.children if hasattr(child, "process")]

    def close(self) -> str:
        """Kill every rank's process group and return their logs, each line under its rank."""
        logs = []
        for rank, child in enumerate(self.children):
            if not hasattr(child, "process"):
                continue
            text = child.close()
            if text.strip():
                logs.append("".join(f"[rank {rank}] {line}\n" for line in text.splitlines()))
        return "".join(logs)

