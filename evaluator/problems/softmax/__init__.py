"""softmax: row softmax, bf16 in and out, fp32 accumulation."""
