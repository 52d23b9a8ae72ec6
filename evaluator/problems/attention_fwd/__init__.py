"""attention_fwd: multi-head attention forward with log-sum-exp, head dim 128."""
