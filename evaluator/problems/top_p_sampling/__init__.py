"""top_p_sampling: one token per row from the top-p nucleus of softmax(logits), by a given uniform (metadata
in problem.toml)."""
