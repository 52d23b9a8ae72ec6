"""layernorm: LayerNorm forward with weight and bias, bf16 in and out, fp32 statistics."""
