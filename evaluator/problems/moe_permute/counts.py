"""Exact work of moe_permute: no flops (copies, a histogram and a scan of E counts, integer work).

Bytes: the hidden states read once (each row is read once and written K times: a kernel that
re-reads a row per copy moves more), the expert ids read once, the T*K permuted rows (bf16), the
E+1 offsets and the T*K destination rows (int32) written once. t_SOL is the memory term.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, INT32_BYTES = 2, 4


def counts(axes: dict[str, int]) -> Counts:
    t, h, e, k = axes["T"], axes["H"], axes["E"], axes["K"]
    return Counts(
        flops={},
        bytes=float((t * h + t * k * h) * BF16_BYTES + (2 * t * k + e + 1) * INT32_BYTES),
    )
