"""grouped_gemm_bf16: MoE grouped GEMM over ragged groups of tokens."""
