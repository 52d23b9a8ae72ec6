"""w4a16_gemm: y = x @ dequant(W)^T, int4 weights (groups of 128 along K, bf16 scales) and bf16 activations
(metadata in problem.toml)."""
