"""histogram: counts (B,) int32 of the keys x (N,) int32 in [0, B) (metadata in problem.toml)."""
