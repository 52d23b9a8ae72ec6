"""Tests of the evaluator: harness, PTX/CUDA toolchain, catalogue, speed of light, vocabulary."""
