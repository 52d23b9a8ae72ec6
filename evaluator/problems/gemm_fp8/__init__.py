"""gemm_fp8: C = (A*sa) @ (B*sb)^T, e4m3 inputs with per-tensor scales, bf16 out."""
