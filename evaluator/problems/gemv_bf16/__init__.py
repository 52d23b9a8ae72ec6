"""gemv_bf16: decode-time y = x @ W^T, bf16 with fp32 accumulation (metadata in problem.toml)."""
