"""fp8_blockscaled_gemm: DeepSeek-V3's fp8 GEMM, e4m3 operands with 1x128 activation and 128x128 weight scales
(metadata in problem.toml)."""
