"""Exact work of w4a16_gemm.

Tensor flops: 2*M*N*K, counted as bf16 tensor flops (the weights are dequantised to bf16 and the
products run on bf16 tensor cores, as Marlin-style kernels do). Dequantising (a subtract and a
multiply per weight, N*K per call however many tokens) is not counted: 2 flops per weight against
2*M per weight on the tensor cores, and it overlaps them on other units.
Bytes: x (bf16), the packed weights (half a byte per weight), the scales (bf16, one per group of
128 along K) and y (bf16), each once. At M <= 128 streaming the packed weights dominates.
"""

from __future__ import annotations

from evaluator.problems import Counts

BF16_BYTES, INT32_BYTES = 2, 4
#: Weights per scale, along K.
GROUP = 128
#: int4 values per int32 word of the packed weight.
PACK = 8


def counts(axes: dict[str, int]) -> Counts:
    m, n, k = axes["M"], axes["N"], axes["K"]
    return Counts(
        flops={"bf16_tensor": float(2 * m * n * k)},
        bytes=float(
            (m * k + m * n) * BF16_BYTES + n * (k // PACK) * INT32_BYTES + n * (k // GROUP) * BF16_BYTES
        ),
    )
