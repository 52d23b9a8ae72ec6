"""moe_unpermute: the combine step after the experts, a weighted gather of K rows per token (metadata in
problem.toml)."""
