"""Where a command's answer goes: text for people, one JSON document (``--json``), or one JSON
event per line as things happen (``--jsonl``, for agents: a program reads each line as it comes).

Events (each a JSON object with ``event`` and a ``time``): ``submitted``, ``status`` (on every change
of state), ``warning`` (e.g. ``no_runner``), ``finished`` (the whole submission and the exit
status), ``stopped`` (waiting ended before the submission did: ``reason`` and the exit status),
``result`` (a command that does not wait: its answer as ``data``) and ``error`` (``code``,
``message``, ``exit_status``). Messages for people go to standard error in every mode.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from solboard_client import render


@dataclass
class Output:
    mode: str  # text, json or jsonl

    @classmethod
    def of(cls, args: argparse.Namespace) -> Output:
        return cls(
            "jsonl" if getattr(args, "jsonl", False) else "json" if getattr(args, "json", False) else "text"
        )

    @property
    def text(self) -> bool:
        return self.mode == "text"

    @property
    def streaming(self) -> bool:
        return self.mode == "jsonl"

    def event(self, name: str, **fields: Any) -> None:
        if self.streaming:
            line = {"event": name, "time": datetime.now(UTC).isoformat(timespec="milliseconds"), **fields}
            print(json.dumps(line, default=str), flush=True)

    def result(self, command: str, data: Any, for_people: Callable[[], None]) -> None:
        """A command's whole answer: printed for people, as one document, or as one event."""
        if self.mode == "json":
            render.as_json(data)
        elif self.streaming:
            self.event("result", command=command, data=data)
        else:
            for_people()

    def warning(self, code: str, message: str, **fields: Any) -> None:
        print(f"warning: {message}", file=sys.stderr, flush=True)
        self.event("warning", code=code, message=message, **fields)

    def error(self, command: str, code: str, message: str, exit_status: int, hint: str = "") -> int:
        print(f"solboard {command}: {message}", file=sys.stderr)
        if hint:
            print(hint, file=sys.stderr)
        self.event("error", command=command, code=code, message=message, exit_status=exit_status)
        return exit_status
