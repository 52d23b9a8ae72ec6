"""paged_decode_attention: one query token per sequence over a paged KV cache, GQA, head dim 128 (metadata in
problem.toml)."""
