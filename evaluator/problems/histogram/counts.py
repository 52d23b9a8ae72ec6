"""Exact work of histogram: no floating-point arithmetic (increments and address computations are
integer work, like a selection's comparisons), so t_SOL is the memory term alone.
Bytes: x (N,) int32 read once and counts (B,) int32 written once: 4N + 4B.
"""

from __future__ import annotations

from evaluator.problems import Counts

INT32_BYTES = 4


def counts(axes: dict[str, int]) -> Counts:
    return Counts(flops={}, bytes=float(INT32_BYTES * (axes["N"] + axes["B"])))
