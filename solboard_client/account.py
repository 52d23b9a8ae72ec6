"""Subcommands about you: ``login``, ``whoami``, ``submissions`` (yours), ``quota``.

``login`` asks for the username and password only on a terminal; a program gives ``--username``
and the password on standard input (``--password-stdin``) or in ``SOLBOARD_PASSWORD``, or a
``--token``. A refused password is said as such, not as a token problem.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys

from solboard_client import config, render
from solboard_client.commands import EXIT_OK, client
from solboard_client.output import Output
from solboard_client.transport import ApiFailure, Client


class NeedsTerminal(ApiFailure):
    """An answer the command would ask for, with no terminal to ask on."""

    def __init__(self, what: str, how: str) -> None:
        super().__init__(0, "no_terminal", f"no terminal to ask for the {what} on: {how}")


def _username(args: argparse.Namespace) -> str:
    given = args.username or os.environ.get("SOLBOARD_USERNAME")
    if given:
        return str(given)
    if not sys.stdin.isatty():
        raise NeedsTerminal("username", "give --username (or SOLBOARD_USERNAME), or --token")
    return input("username: ")


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if os.environ.get("SOLBOARD_PASSWORD"):
        return os.environ["SOLBOARD_PASSWORD"]
    if not sys.stdin.isatty():
        raise NeedsTerminal("password", "pipe it with --password-stdin, or set SOLBOARD_PASSWORD")
    return getpass.getpass("password: ")


def _token_for(api: Client, server: str, username: str, password: str) -> str:
    name = f"solboard-cli@{socket.gethostname()}"[:100]
    try:
        created = api.post("/api/tokens", {"name": name}, basic=(username, password))
    except ApiFailure as failure:
        if failure.status == 401:
            raise ApiFailure(
                401,
                "wrong_password",
                f"{server} refused username {username!r} with this password (wrong username or password)",
            ) from None
        raise
    return str(created["token"])


def login(args: argparse.Namespace, out: Output) -> int:
    server = (args.server or config.current().server).rstrip("/")
    api = Client(server, args.token)
    if args.token:
        if not api.get("/api/").get("user"):
            raise ApiFailure(401, "invalid_token", "the server does not accept this token")
        token = args.token
    else:
        username = _username(args)
        token = _token_for(api, server, username, _password(args))
    path = config.save(server, token)
    out.result("login", {"server": server, "credentials": str(path)},
               lambda: print(f"logged in to {server}; token stored in {path} (mode 0600)"))
    return EXIT_OK


def whoami(args: argparse.Namespace, out: Output) -> int:
    login_found = config.current(getattr(args, "server", None))
    user = client(args).get("/api/").get("user")
    source = "SOLBOARD_TOKEN" if os.environ.get("SOLBOARD_TOKEN") else (
        str(config.credentials_path()) if login_found.token else None)
    if not user:
        raise ApiFailure(0, "not_logged_in", f"not logged in to {login_found.server}: solboard login, or set "
                         "SOLBOARD_TOKEN (a token from the website's API tokens page)")
    body = {"user": user, "server": login_found.server, "token_from": source}
    out.result("whoami", body, lambda: print(f"{user} on {login_found.server} (token from {source})"))
    return EXIT_OK


def submissions(args: argparse.Namespace, out: Output) -> int:
    query = f"?page={args.page}&page_size={args.limit}" + (f"&problem={args.problem}" if args.problem else "")
    page = client(args).get(f"/api/submissions{query}")
    out.result("submissions", page, lambda: render.submission_rows(page))
    return EXIT_OK


def quota(args: argparse.Namespace, out: Output) -> int:
    body = client(args).get("/api/quota")
    out.result("quota", body, lambda: render.quotas(body))
    return EXIT_OK

