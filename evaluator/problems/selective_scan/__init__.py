"""selective_scan: the Mamba-2 (SSD) selective state-space scan, chunked, fp32 state (metadata in
problem.toml)."""
