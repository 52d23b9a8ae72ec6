"""SOLboard's tests, grouped by the package they test (tests/README.md)."""
