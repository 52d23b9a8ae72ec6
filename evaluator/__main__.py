"""Entry point of ``python -m evaluator``; the command line lives in ``evaluator/cli.py``."""

from __future__ import annotations

import sys

from evaluator.harness.identity import IdentityError, take_judge_identity

# First, before anything else is imported or started: a runner's judge takes its own uids, out of
# reach of the processes that will run submitted code (evaluator/harness/identity.py).
try:
    take_judge_identity()
except IdentityError as error:
    print(f"solboard-identity: {error}", file=sys.stderr)
    sys.exit(71)  # EX_OSERR: the job ran nothing

from evaluator.cli import main

sys.exit(main())
