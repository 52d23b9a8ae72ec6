"""Tests of the command-line client's parts (solboard_client) and the pieces it shares with the site
(solboard_common), against real local HTTP servers; the client against a whole site is in
tests/integration/test_client_*.py."""
