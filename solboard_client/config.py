"""Where the client finds its server and token: ``SOLBOARD_SERVER`` / ``SOLBOARD_TOKEN`` first (CI,
agents), then the file ``solboard login`` wrote (mode 0600), then the local development server."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SERVER = "http://127.0.0.1:8000"


def credentials_path() -> Path:
    explicit = os.environ.get("SOLBOARD_CREDENTIALS")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "solboard" / "credentials.json"


@dataclass(frozen=True)
class Login:
    server: str
    token: str | None


def stored() -> dict[str, str]:
    try:
        data = json.loads(credentials_path().read_text())
    except (OSError, ValueError):
        return {}
    return {key: str(value) for key, value in data.items()} if isinstance(data, dict) else {}


def current(server_flag: str | None = None) -> Login:
    saved = stored()
    server = server_flag or os.environ.get("SOLBOARD_SERVER") or saved.get("server") or DEFAULT_SERVER
    token = os.environ.get("SOLBOARD_TOKEN") or saved.get("token")
    return Login(server.rstrip("/"), token or None)


def save(server: str, token: str) -> Path:
    """Write the login readable by its owner only (created 0600, never world-readable on the way)."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"server": server.rstrip("/"), "token": token}, handle)
    os.chmod(path, 0o600)
    return path
