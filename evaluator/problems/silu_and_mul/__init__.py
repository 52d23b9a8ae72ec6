"""silu_and_mul: y = silu(gate) * up for x = [gate | up], bf16 (metadata in problem.toml)."""
