"""Exact work of transpose: no arithmetic at all (no flop class), so t_SOL is the memory term alone.
Bytes: x (M, N) read once and out (N, M) written once, bf16: 2 * 2MN.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    m, n = axes["M"], axes["N"]
    return Counts(flops={}, bytes=float(2 * m * n * BF16_BYTES))
