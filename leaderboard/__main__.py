"""``python -m leaderboard ...`` is the ``solboard`` command (used by the dev supervisor)."""

from __future__ import annotations

import sys

from leaderboard.cli import main

sys.exit(main())
