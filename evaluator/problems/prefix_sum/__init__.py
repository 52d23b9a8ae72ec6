"""prefix_sum: inclusive scan along the last axis, fp32 in and out (metadata in problem.toml)."""
