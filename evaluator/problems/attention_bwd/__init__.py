"""attention_bwd: multi-head attention backward, head dim 128."""
