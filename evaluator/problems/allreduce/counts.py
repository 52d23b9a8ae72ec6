"""Exact work of allreduce at world size W over N bf16 elements per rank.

- flops: (W - 1) N fp32-SIMT adds in all (the W contributions of each element summed once).
- bytes (HBM, all ranks): each rank reads its N inputs and writes its N outputs once: 2 W N x 2 B.
- comm_bytes (per GPU): 2 (W - 1) / W x N x 2 B, the bandwidth lower bound of an all-reduce
  without in-network reduction (Patarasuk and Yuan 2009; NCCL's "bus bandwidth" factor): each GPU
  must send (W - 1) / W of its data to be reduced elsewhere and (W - 1) / W of the result to the
  others. NVLink multicast (NVLS, which reduces in the switch) is off on the lent machines.
"""

from __future__ import annotations

from evaluator.problems import WORLD_SIZE_AXIS, Counts

BF16_BYTES = 2


def counts(axes: dict[str, int]) -> Counts:
    n, w = axes["N"], axes[WORLD_SIZE_AXIS]
    return Counts(
        flops={"fp32_simt": float((w - 1) * n)},
        bytes=float(2 * w * n * BF16_BYTES),
        comm_bytes=2.0 * (w - 1) / w * n * BF16_BYTES,
    )
