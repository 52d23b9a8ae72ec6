"""moe_permute: the permute step of a MoE layer, token rows copied into expert-sorted order with per-expert
offsets (metadata in problem.toml)."""
