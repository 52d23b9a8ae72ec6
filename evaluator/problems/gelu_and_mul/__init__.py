"""gelu_and_mul: y = gelu_tanh(gate) * up for x = [gate | up], bf16 (metadata in problem.toml)."""
