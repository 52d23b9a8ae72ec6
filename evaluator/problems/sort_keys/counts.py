"""Exact work of sort_keys: no floating-point arithmetic (a sort compares or extracts digits), so
t_SOL is the memory term alone: x (R, N) int32 read once and y (R, N) int32 written once, 8RN
bytes. A radix sort moves the keys once per digit pass (four 8-bit passes: ~4x that traffic) and
a merge sort log2(N / tile) times: t_SOL is the bound no sort reaches, the distance to it is the
lesson.
"""

from __future__ import annotations

from evaluator.problems import Counts

INT32_BYTES = 4


def counts(axes: dict[str, int]) -> Counts:
    return Counts(flops={}, bytes=float(2 * INT32_BYTES * axes["R"] * axes["N"]))
