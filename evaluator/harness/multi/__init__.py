"""The judge of a multi-GPU job and its untrusted ranks (docs/multigpu.md).

``multi_judge`` runs the stage script (``evaluator/harness/stages.py``) against every rank at once;
``rank_group`` is the ranks as the judge sees them, ``rank_child`` one rank's process,
``rank_context`` the ``ctx`` a kernel receives, ``rank_env`` the environment every rank gets,
``rank_timers`` one timed iteration on one rank, ``link_bandwidth`` the calibrated link ceiling.
"""
