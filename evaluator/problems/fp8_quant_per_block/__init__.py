"""fp8_quant_per_block: bf16 activations to float8_e4m3fn with one fp32 scale per 1 x 128 group (metadata in
problem.toml)."""
