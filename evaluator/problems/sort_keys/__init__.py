"""sort_keys: each row of int32 keys in ascending order (metadata in problem.toml)."""
