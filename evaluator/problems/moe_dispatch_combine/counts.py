"""Exact work of moe_dispatch_combine: T tokens x (T, H), each routed to K distinct experts of E,
every expert one linear map H -> N (W (E, N, H)); rank r holds tokens r (T/W of them) with their
routing and experts r (E/W of them), and receives y (T/W, N) of its tokens.

- flops: 2 T K N H bf16 tensor-core flops in all: each of the T K (token, expert) pairs is one row
  of an expert's GEMM, whatever the routing. Scaling each pair's row by its gate weight and summing
  the K rows of a token (T K N multiply-adds, or none apart if the K experts' GEMMs share one
  accumulator) is epilogue work, not counted (as gemm_fp8's scales).
- bytes (HBM, all ranks): x read once (2TH), the routing read once (T K x (8 + 4): int64 ids, fp32
  gate weights), every expert's weight read once (2ENH: the generator lets no expert go unchosen,
  so a kernel cannot skip one) and y written once (2TN). Dispatched tokens and expert outputs may
  stream from the links into the GEMM and out again, so they are not counted.
- comm_bytes (per GPU): min(2 (H + N) T / W, 2 N H). Routing is data, so the bound rests on what
  the generator guarantees every input: each token has at least one expert on another rank. Each
  rank must then get, for each of its T/W tokens, the output of a remote expert: send the token
  and get its (summed) row back, 2 (H + N) bytes a token; or fetch that expert's weights, 2 N H
  bytes, which all its tokens may share (a routing may send them all to one remote expert). What
  all ranks receive, some rank sent, so on average each GPU sends the least of the two. A real
  routing moves far more (each token's K experts mostly elsewhere); the bound is what no routing
  can avoid.
"""

from __future__ import annotations

from evaluator.problems import WORLD_SIZE_AXIS, Counts

BF16_BYTES, FP32_BYTES, INT64_BYTES = 2, 4, 8


def comm_bytes(t: int, h: int, n: int, w: int) -> float:
    send_tokens_and_rows = (t // w) * (h + n)
    fetch_one_expert = n * h
    return float(min(send_tokens_and_rows, fetch_one_expert) * BF16_BYTES)


def counts(axes: dict[str, int]) -> Counts:
    t, h, n, e, k, w = axes["T"], axes["H"], axes["N"], axes["E"], axes["K"], axes[WORLD_SIZE_AXIS]
    return Counts(
        flops={"bf16_tensor": float(2 * t * k * n * h)},
        bytes=float((t * h + e * n * h + t * n) * BF16_BYTES + t * k * (INT64_BYTES + FP32_BYTES)),
        comm_bytes=comm_bytes(t, h, n, w),
    )
