"""cross_entropy: per-token cross-entropy loss from bf16 logits, fp32 log-sum-exp (metadata in
problem.toml)."""
