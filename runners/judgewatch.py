"""The runner's watch over a running job, from outside every process of it.

The judge enforces each stage's deadline with a watchdog thread; a process that could stop the
judge (SIGSTOP, or a tracer) would stop that thread with it. The child cannot (another real uid,
``runners/jail_ids.py``), but the runner does not rely on it: while a job runs it reads the
judge's state in /proc every poll, and a judge stopped for ``STOPPED_GRACE_S`` ends the job at
once, as the submission's failure. Once a second it also asks the Spec's own watch (the job's
GPU memory against its budget, ``runners/execute.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runners import procs

#: A judge stopped this long is not coming back by itself (nothing of ours ever stops it).
STOPPED_GRACE_S = 2.0
WATCH_EVERY_S = 1.0
STOPPED_STATES = {"T": "stopped by a signal", "t": "stopped by a tracer"}


def find_judge(jail: dict[str, Any]) -> int | None:
    """The judge's pid as this process sees it: init's child whose pid in the job's namespace is
    the one init reported (init's other children are orphans of the job)."""
    init_pid, job_pid = jail.get("init_pid"), jail.get("job_pid")
    if not isinstance(init_pid, int) or not isinstance(job_pid, int):
        return None
    if "pid" not in (jail.get("namespaces") or []):
        return job_pid  # init is in our pid namespace: fork() gave it our number
    for pid in procs.children(init_pid):
        if procs.namespace_pid(pid) == job_pid:
            return pid
    return None


class JudgeWatch:
    def __init__(self, jail_facts: Callable[[], dict[str, Any]], watch: Callable[[], str | None]) -> None:
        self.jail_facts = jail_facts
        self.watch = watch
        self.judge: int | None = None
        self.stopped_since: float | None = None
        self.next_watch = time.monotonic() + WATCH_EVERY_S

    def check(self) -> str | None:
        """Why the job must end now for what it did itself, or None."""
        now = time.monotonic()
        if self.judge is None:
            self.judge = find_judge(self.jail_facts())
        state = procs.state(self.judge) if self.judge is not None else None
        if state in STOPPED_STATES:
            self.stopped_since = self.stopped_since or now
            if now - self.stopped_since >= STOPPED_GRACE_S:
                return (
                    f"its judge was {STOPPED_STATES[state]} for {STOPPED_GRACE_S:g} s (nothing but a process "
                    "of the job stops it); the job was ended"
                )
        else:
            self.stopped_since = None
        if now >= self.next_watch:
            self.next_watch = now + WATCH_EVERY_S
            return self.watch()
        return None
