"""What a job's evaluator process prints for its runner: one JSON object per line (``--stream``).

Standard library only: the runner reads it without importing torch. The judge alone writes this
stream (its stdout); the untrusted child and the witness process write into log files, never here,
and the judge is not dumpable, so no process of the job can reach its descriptors through /proc.

Events, in the order they can appear:

- ``staged``: a warm spare (``python -m evaluator serve-spare``) started its judge, its child and
  (on a GPU) its witness session and imported what they need, without touching the device; it
  waits for ``{"warm": true}`` on stdin, which the runner sends once no job runs on the GPU.
- ``ready``: the spare warmed its device (CUDA contexts, profiler, BLAS handles) and waits for its
  one job on stdin. It knows nothing of that job yet.
- ``not_ready``: a spare that cannot take a job (its child died, its idle limit passed, the job's
  request does not fit it); it exits without running anything of the job.
- ``provisional``: ranked mode, when the ranked stage ended and before the witness: the report as
  it stands, ``witnessed`` false (shown, never ranked). The final report replaces it.
- ``report``: the final report; the process exits right after it (``leave``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any, Literal

Event = Literal["staged", "ready", "not_ready", "provisional", "report"]
EVENTS: tuple[Event, ...] = ("staged", "ready", "not_ready", "provisional", "report")
#: A spare that could not take its job exits with this status (EX_TEMPFAIL): the runner runs the
#: job as a fresh process instead. Nothing of the job ran in the spare.
EXIT_NOT_READY = 75


def emit(event: Event, **fields: Any) -> None:
    """One event line on stdout, written whole (a reader never sees half of one)."""
    _write_line(json.dumps({"event": event, **fields}, separators=(",", ":"), allow_nan=False))


def emit_report(event: Event, report_json: str) -> None:
    """A report event; ``report_json`` is the report as its model serialises it (pydantic writes
    NaN and infinities as null, which ``json.dumps`` would refuse)."""
    if "\n" in report_json:
        raise ValueError("a report on the stream must be one line")
    _write_line(f'{{"event":{json.dumps(event)},"report":{report_json}}}')


def leave(code: int) -> None:
    """End the process right after its final report, skipping the interpreter's teardown (torch's
    and CUDA's atexit work): the runner waits for the exit before it delivers the result, and that teardown
    took ~0.3 s on the CPU device, ~1 s between the report and its delivery on the H200 (docs/runners.md, fast
    feedback). Nothing is left to do by then: the child, the witness and the artifacts ended before the report
    was written, and the runner kills and removes whatever the job leaves."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _write_line(line: str) -> None:
    data = (line + "\n").encode()
    sys.stdout.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(sys.stdout.fileno(), view):]


def parse_line(line: bytes) -> dict[str, Any] | None:
    """One event, or None when the line is not one (the reader decides what that means)."""
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("event") not in EVENTS:
        return None
    return value


def complete_lines(data: bytes) -> list[bytes]:
    """The complete lines of ``data`` (a last line without its newline is still being written)."""
    return data.split(b"\n")[:-1]


def last_event(data: bytes, event: Event) -> dict[str, Any] | None:
    for line in reversed(complete_lines(data)):
        parsed = parse_line(line)
        if parsed is not None and parsed["event"] == event:
            return parsed
    return None
