"""fp8_quant_per_token: bf16 activations to float8_e4m3fn with one fp32 scale per token (metadata in
problem.toml)."""
