"""Import-compatible name for the job protocol, which lives in ``solboard_common.protocol``.

Kept only because a test helper of the website (tests/leaderboard/web_helpers.py) still imports it from here;
new code imports ``solboard_common.protocol``.
"""

from __future__ import annotations

from solboard_common.protocol import JobResult, JobStarted

__all__ = ["JobResult", "JobStarted"]
