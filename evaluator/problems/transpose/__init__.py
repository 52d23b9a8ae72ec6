"""transpose: out = x^T, bf16, contiguous (metadata in problem.toml)."""
