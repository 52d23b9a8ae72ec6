"""allreduce: bf16 sum all-reduce across the ranks (metadata in problem.toml)."""
