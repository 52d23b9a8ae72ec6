"""The REST API for programs (agents, optimiser loops, CI jobs): docs/api.md describes it."""
