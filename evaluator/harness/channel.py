"""Messages between the parent and the child: length-prefixed JSON frames over pipes.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (an object with a
``type``). The judge reads frames without blocking so it can enforce stage deadlines; the child
reads and writes blocking. Nothing on the channel is authenticated: whatever the child writes is
a claim the judge checks (docs/security.md).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
#: Largest frame either side accepts; a larger length means garbage on the channel.
MAX_FRAME = 64 * 1024 * 1024


class ChannelError(RuntimeError):
    """The other side closed the channel or wrote something that is not a frame."""


class ChannelTimeout(RuntimeError):
    """No complete frame arrived before the deadline."""


def own_run_queue_ns() -> int:
    """Time the calling thread has spent runnable but waiting for a CPU (the kernel's accounting
    in /proc/thread-self/schedstat, ns; 0 where unreadable)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as handle:
            return int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    return HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_exact(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            raise ChannelError("channel closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict[str, Any]:
    """Blocking read of one frame (the child's side)."""
    (length,) = HEADER.unpack(read_exact(fd, HEADER.size))
    if length > MAX_FRAME:
        raise ChannelError(f"frame of {length} bytes")
    return _decode(read_exact(fd, length))


def _decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ChannelError(f"not JSON: {error}") from error
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ChannelError("a frame without a type")
    return message


class FrameReader:
    """Non-blocking frame reader with a deadline (the parent's side)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False
        #: How long the reader's thread sat in the run queue between the last readable wake-up of
        #: ``next`` and its return: the judge's own wake-up delay after the frame arrived (ns).
        self.wake_queue_ns = 0

    def _pop_frame(self) -> dict[str, Any] | None:
        if len(self.buffer) < HEADER.size:
            return None
        (length,) = HEADER.unpack(self.buffer[: HEADER.size])
        if length > MAX_FRAME:
            raise ChannelError(f"frame of {length} bytes")
        end = HEADER.size + length
        if len(self.buffer) < end:
            return None
        body, self.buffer = self.buffer[HEADER.size : end], self.buffer[end:]
        return _decode(body)

    def next(self, deadline: float) -> dict[str, Any]:
        """The next frame; ChannelTimeout after ``deadline`` (time.monotonic), ChannelError on EOF."""
        self.wake_queue_ns = 0
        while True:
            frame = self._pop_frame()
            if frame is not None:
                return frame
            if self.closed:
                raise ChannelError("channel closed" + (" mid-frame" if self.buffer else ""))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelTimeout()
            # Read just before the wait and just after: the queue time of the blocking select is
            # time after the other side wrote (a sleeping thread is not in the run queue), never
            # time the reader was preempted while the other side still worked.
            queued = own_run_queue_ns()
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 1.0))
            if ready:
                self.wake_queue_ns = own_run_queue_ns() - queued
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    self.closed = True
                self.buffer += chunk

    def poll(self) -> dict[str, Any] | None:
        """A complete frame if one is buffered or readable now, else None; never blocks (the judge
        of a multi-GPU job waits on every rank's channel at once with ``select``).
        ChannelError on EOF or garbage."""
        while True:
            frame = self._pop_frame()
            if frame is not None:
                return frame
            if self.closed:
                raise ChannelError("channel closed" + (" mid-frame" if self.buffer else ""))
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready:
                return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.closed = True
            self.buffer += chunk

    def drain(self, wait_s: float = 0.2) -> bytes:
        """Whatever else arrives until EOF (or ``wait_s``): anything here is unexpected."""
        deadline = time.monotonic() + wait_s
        while not self.closed and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                break
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.closed = True
            self.buffer += chunk
        return self.buffer
