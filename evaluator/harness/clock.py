"""A start-up's split by part: seconds between successive marks (standard library only)."""

from __future__ import annotations

from time import monotonic


class PartClock:
    """Seconds between successive marks, by the name of the part that just ended."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self._last = monotonic()

    def mark(self, name: str) -> None:
        now = monotonic()
        self.parts[name] = round(now - self._last, 3)
        self._last = now
