"""moe_router_topk: softmax top-k routing of MoE router logits, renormalised weights and expert ids (metadata
in problem.toml)."""
