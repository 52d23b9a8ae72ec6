"""reduction_sum: y[r] = the sum of row r of x, fp32 (metadata in problem.toml)."""
