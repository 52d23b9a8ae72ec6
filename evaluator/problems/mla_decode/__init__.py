"""mla_decode: one decode step of DeepSeek's multi-head latent attention, absorbed form (metadata in
problem.toml)."""
