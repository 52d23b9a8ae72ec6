"""ring_attention_fwd: context-parallel attention forward over a ring of ranks (metadata in problem.toml)."""
