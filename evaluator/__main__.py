"""Entry point of ``python -m evaluator``; the command line lives in ``evaluator/cli.py``."""

from __future__ import annotations

import sys

from evaluator.cli import main

sys.exit(main())
