"""Tests that run several parts together in real processes: workers, brokers, runner nodes, a browser."""
