"""Status names used inside the child (plain strings: the child never needs pydantic)."""

from __future__ import annotations

PASSED = "PASSED"
COMPILE_ERROR = "COMPILE_ERROR"
RUNTIME_ERROR = "RUNTIME_ERROR"
INCORRECT_SHAPE = "INCORRECT_SHAPE"
INCORRECT_DTYPE = "INCORRECT_DTYPE"
INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
TIMEOUT = "TIMEOUT"
REJECTED = "REJECTED"


class CheckFailure(Exception):
    """A check decided the shape's status; ``status`` is one of the names above."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
