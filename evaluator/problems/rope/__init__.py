"""rope: rotary position embedding (NeoX / Llama rotate_half) of q and k, bf16, fp32 tables."""
