"""A real HTTP server on localhost that answers from a script: each request gets the next
(status, headers, body) and is recorded, for the client's tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Script:
    answers: list[tuple[int, dict[str, str], bytes]]
    seen: list[Seen] = field(default_factory=list)

    def next(self) -> tuple[int, dict[str, str], bytes]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def answer(status: int, body: Any = None, **headers: str) -> tuple[int, dict[str, str], bytes]:
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    return status, {"Content-Type": "application/json", **headers}, raw


@contextmanager
def serving(*answers: tuple[int, dict[str, str], bytes]) -> Iterator[tuple[str, Script]]:
    script = Script(list(answers))

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            script.seen.append(Seen(self.command, self.path, dict(self.headers), self.rfile.read(length)))
            status, headers, body = script.next()
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()
