"""Tests of the runner nodes' parts: jail, sandbox, slots, credentials, forged results."""
