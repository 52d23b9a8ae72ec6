"""top_k_sampling: one token per row from the top_k[row] most probable tokens of softmax(logits), by a given
uniform (metadata in problem.toml)."""
