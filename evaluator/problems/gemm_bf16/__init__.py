"""gemm_bf16: C = A @ B^T in bf16 with fp32 accumulation (metadata in problem.toml)."""
