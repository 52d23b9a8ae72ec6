"""Exact work of grouped_gemm_bf16.

Every token meets exactly one expert, so flops = 2*T*N*K whatever the group sizes. Bytes: X, the
offsets and Y once, and the weights of the NON-EMPTY experts only (a kernel need not read an
empty expert's weights). How many groups are empty is a function of G alone (``empty_groups``),
which the input generator obeys, so the count stays exact for every seed.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, INT32_BYTES = 2, 4


def empty_groups(groups: int) -> int:
    """Number of empty groups in every generated input of G groups."""
    if groups < 3:
        return 0
    return max(1, groups // 8)


def counts(axes: dict[str, int]) -> Counts:
    t, g, n, k = axes["T"], axes["G"], axes["N"], axes["K"]
    used = g - empty_groups(g)
    return Counts(
        flops={"bf16_tensor": float(2 * t * n * k)},
        bytes=float((t * k + used * n * k + t * n) * BF16_BYTES + (g + 1) * INT32_BYTES),
    )
