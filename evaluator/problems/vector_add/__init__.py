"""vector_add: fp32 c = a + b (metadata in problem.toml)."""
