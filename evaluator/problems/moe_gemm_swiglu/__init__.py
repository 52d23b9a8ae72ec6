"""moe_gemm_swiglu: the experts' gate and up projections of an MoE layer with SwiGLU fused (metadata in
problem.toml)."""
