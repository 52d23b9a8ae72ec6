"""moe_dispatch_combine: expert-parallel MoE, all-to-all dispatch, expert GEMMs, gated combine
(problem.toml)."""
