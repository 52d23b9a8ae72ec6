"""rmsnorm: fused residual add + RMSNorm, bf16."""
