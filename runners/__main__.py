"""``python -m runners ...``: the same as ``solboard runner ...``."""

from __future__ import annotations

import sys

from runners.cli import main

sys.exit(main())
