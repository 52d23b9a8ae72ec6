"""The ``solboard`` command-line client: the HTTP API only, standard library only, no Django.

``leaderboard/cli.py`` hands every client subcommand (login, problems, submit, status, ...) to
``solboard_client.main.main``; docs/api.md describes the commands and their exit statuses.
"""
