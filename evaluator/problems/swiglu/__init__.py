"""swiglu: the gated MLP up-projection silu(x W1^T) * (x W3^T), both GEMMs included."""
