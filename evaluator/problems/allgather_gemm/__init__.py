"""allgather_gemm: tensor-parallel column GEMM, all-gather A then A @ B_r^T (metadata in problem.toml)."""
