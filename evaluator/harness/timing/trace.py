"""Device spans of timed calls, from the kernel timestamps torch.profiler (CUPTI) records.

The timing loop wraps each call in a user range ``sb#c<i>`` and the marker that follows it in
``sb#m<i>``; harness work (input refresh, flush, poison, checks) runs in ``sb#h`` ranges. Every
device operation (kernel, memcpy, memset) is attributed to the range in which the host launched it:
the launch is found through the CUPTI correlation id of the runtime/driver call, and where none is
recorded, the operation's own start time is used. So operations launched from other threads while
a call runs still count towards that call, and operations launched outside every range mean a
background thread is working (class 2).

A call's time is its device span: the end of its last operation minus the start of its first, on
any stream. An operation of the call that is still running on another stream when the marker
(launched on the current stream right after the call returned) starts was not joined back to the
current stream (class 1).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

PREFIX = "sb#"
#: Device events that are no operations of their own (range shadows, synchronisation records).
_NOT_OPERATIONS = ("Event Sync", "Stream Sync", "Context Sync", "Stream Wait Event", "Device Sync")


@dataclass
class Op:
    name: str
    start_ns: int
    end_ns: int
    stream: int
    launch_ns: int


@dataclass
class CallTrace:
    ops: list[Op] = field(default_factory=list)
    marker: Op | None = None

    @property
    def span_ns(self) -> int:
        if not self.ops:
            return 0
        return max(op.end_ns for op in self.ops) - min(op.start_ns for op in self.ops)

    @property
    def names(self) -> list[str]:
        return [op.name for op in sorted(self.ops, key=lambda op: op.start_ns)]

    def unjoined(self) -> list[Op]:
        """Operations on other streams still running when the marker started."""
        if self.marker is None:
            return []
        return [op for op in self.ops if op.stream != self.marker.stream and op.end_ns > self.marker.start_ns]


@dataclass
class BatchTrace:
    calls: dict[int, CallTrace]
    strays: list[Op]


def _is_cuda(event: Any) -> bool:
    return "CUDA" in str(event.device_type())


@dataclass
class _HostTimes:
    """Host start times: runtime/driver calls by CUPTI correlation id, torch ops by their id."""

    launches: dict[int, int] = field(default_factory=dict)
    ops: dict[int, int] = field(default_factory=dict)

    def launch_time(self, event: Any) -> int:
        launch = self.launches.get(event.correlation_id())
        if launch is None:
            launch = self.ops.get(event.linked_correlation_id())
        return event.start_ns() if launch is None else launch


def _ranges(events: list[Any]) -> tuple[list[tuple[int, int, str]], _HostTimes]:
    """User ranges (start, end, name) sorted by start, and the host times of launches."""
    ranges = []
    times = _HostTimes()
    for event in events:
        if _is_cuda(event):
            continue
        name = event.name()
        if name.startswith(PREFIX):
            ranges.append((event.start_ns(), event.end_ns(), name))
        if event.correlation_id() > 0:
            table = times.launches if name.startswith(("cuda", "cu")) else times.ops
            table[event.correlation_id()] = event.start_ns()
    ranges.sort()
    return ranges, times


def _device_ops(events: list[Any], times: _HostTimes) -> list[Op]:
    ops = []
    for event in events:
        if not _is_cuda(event):
            continue
        name = event.name()
        if name.startswith(PREFIX) or name in _NOT_OPERATIONS:
            continue
        ops.append(
            Op(
                name,
                event.start_ns(),
                event.end_ns(),
                int(event.device_resource_id()),
                times.launch_time(event),
            )
        )
    return ops


def _owner(ranges: list[tuple[int, int, str]], starts: list[int], t: int) -> str | None:
    """The range that contains host time ``t`` (ranges are sequential on one thread, never nested)."""
    index = bisect.bisect_right(starts, t) - 1
    if index >= 0 and ranges[index][1] >= t:
        return ranges[index][2]
    return None


def attribute(events: list[Any]) -> BatchTrace:
    """Split one profiled batch into per-call traces (keyed by call index) and stray operations."""
    ranges, times = _ranges(events)
    starts = [r[0] for r in ranges]
    calls: dict[int, CallTrace] = {}
    strays: list[Op] = []
    for _, _, name in ranges:
        if name[3:4] in ("c", "m"):
            calls.setdefault(int(name[4:]), CallTrace())
    for op in sorted(_device_ops(events, times), key=lambda op: op.start_ns):
        owner = _owner(ranges, starts, op.launch_ns)
        if owner is None:
            strays.append(op)
        elif owner[3] == "c":
            calls[int(owner[4:])].ops.append(op)
        elif owner[3] == "m":
            trace = calls[int(owner[4:])]
            trace.marker = trace.marker or op
    return BatchTrace(calls, strays)
