"""gemm_reducescatter: tensor-parallel row GEMM, A_r @ B_r^T then reduce-scatter (metadata in
problem.toml)."""
