"""What compiling an upload on the site may cost, and who may compile at once.

nvcc and ptxas run jailed in a process of their own (``evaluator/ptx/jailed.py``), but the web
request waits for them, and a source can be built to make them work for minutes: six nested
``#define``s expanding to 10^8 tokens kept nvcc busy for 103 s. So, on the upload path:

- **Macro bombs are refused before any tool runs** (``macro_expansion``): the size every
  ``#define`` expands to is estimated from the source text alone; over
  ``SOLBOARD_MAX_MACRO_TOKENS`` the upload is refused in microseconds.
- **Each tool run has the site's limits** (``site_tool_limits``): ``SOLBOARD_COMPILE_SECONDS`` of
  wall and CPU time (the runner keeps the evaluator's own, longer ones).
- **Compiles are few at once** (``compile_slot``): at most ``SOLBOARD_COMPILE_SLOTS`` per host and
  ``SOLBOARD_COMPILE_SLOTS_PER_USER`` per user. A request waits up to
  ``SOLBOARD_COMPILE_WAIT_SECONDS`` for a slot, then is refused with a time to retry. Slots are
  ``flock``s on files under ``$SOLBOARD_VAR/compile-slots``: shared by every web process of the
  host, and released by the kernel when a process dies.
- **Compile time is charged** to the user (``COMPILE_TIME``): ``SOLBOARD_COMPILE_SECONDS_PER_HOUR``
  of compiler wall time per user per hour, whatever the endpoint (create, batch, validate).

None of it runs inside a database transaction: ``leaderboard.submissions.check_submission`` does
the compiling, and saving happens afterwards.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.exceptions import ValidationError

from evaluator.ptx.jailed import ToolLimits
from leaderboard.api.errors import ApiError
from leaderboard.throttling import RateLimit

_CONTINUATION = re.compile(r"\\\r?\n")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?(.*)$", re.MULTILINE)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\S")
POLL_SECONDS = 0.1
#: Compile wall time charged to a user per hour (leaderboard.throttling.RateLimit, in seconds).
COMPILE_TIME = RateLimit("compile-seconds", "SOLBOARD_COMPILE_SECONDS_PER_HOUR", 3600)


class CompileBusy(ValidationError):
    """No compile now (``code``: ``compile_busy`` the user's slots, ``site_busy`` the host's,
    ``rate_limited`` the user's compile time): refused, nothing saved, retry after ``retry_after``
    s. A ValidationError on ``source``, so the upload form shows it beside the source."""

    def __init__(self, code: str, message: str, retry_after: int) -> None:
        super().__init__({"source": message})
        self.code, self.text, self.retry_after = code, message, retry_after


def macro_expansion(source: str, limit: int) -> tuple[str, int] | None:
    """The first macro whose expansion exceeds ``limit`` tokens and its estimated size, else None.

    The estimate expands object-like and function-like bodies through the other macros they name
    (parameters count as one token, a macro does not expand inside itself, as in the preprocessor);
    it is cut at ``limit + 1``, so even 10^100 costs no more than the text's size to compute."""
    text = _LITERAL.sub('""', _COMMENT.sub(" ", _CONTINUATION.sub("", source)))
    bodies = {match.group(1): _TOKEN.findall(match.group(3)) for match in _DEFINE.finditer(text)}
    sizes: dict[str, int] = {}

    def size(name: str, expanding: frozenset[str]) -> int:
        if name not in bodies or name in expanding:
            return 1
        if name not in sizes:
            inner = expanding | {name}
            total = 0
            for token in bodies[name]:
                total = min(limit + 1, total + size(token, inner))
            sizes[name] = total
        return sizes[name]

    for name in bodies:
        if size(name, frozenset()) > limit:
            return name, sizes[name]
    return None


def check_macro_bomb(source: str) -> None:
    limit = int(settings.SOLBOARD_MAX_MACRO_TOKENS)
    found = macro_expansion(source, limit)
    if found is not None:
        raise ValidationError({"source": f"the macro {found[0]} expands to more than {limit:,} tokens; "
                                         "the site does not run the preprocessor on such a source"})


def site_tool_limits() -> ToolLimits:
    seconds = float(settings.SOLBOARD_COMPILE_SECONDS)
    return ToolLimits(wall_seconds=seconds, cpu_seconds=max(1, int(seconds)))


def _slot_folder() -> Path:
    folder = Path(settings.VAR_DIR) / "compile-slots"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _try_lock(paths: list[Path]) -> IO[bytes] | None:
    """An exclusive lock on the first free file of ``paths`` (kept open while held), else None."""
    for path in paths:
        handle = open(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+b")  # noqa: SIM115 - held by the caller
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            handle.close()
    return None


def _acquire(paths: list[Path], deadline: float) -> IO[bytes] | None:
    while True:
        held = _try_lock(paths)
        if held is not None or time.monotonic() >= deadline:
            return held
        time.sleep(POLL_SECONDS)


@contextmanager
def compile_slot(user_id: int) -> Iterator[None]:
    """Hold one of the user's slots and one of the host's while compiling; CompileBusy when none
    frees up within ``SOLBOARD_COMPILE_WAIT_SECONDS``. Compile time is charged to the user."""
    try:
        COMPILE_TIME.ensure_left(user_id)
    except ApiError as spent:
        raise CompileBusy("rate_limited", f"your compile time is spent: {spent.message}",
                          int(spent.extra["retry_after"])) from None
    folder, wait = _slot_folder(), float(settings.SOLBOARD_COMPILE_WAIT_SECONDS)
    deadline = time.monotonic() + wait
    retry = max(1, int(settings.SOLBOARD_COMPILE_SECONDS))
    mine = _acquire(
        [folder / f"user-{user_id}-{k}" for k in range(int(settings.SOLBOARD_COMPILE_SLOTS_PER_USER))],
        deadline,
    )
    if mine is None:
        raise CompileBusy(
            "compile_busy",
            f"you already have {settings.SOLBOARD_COMPILE_SLOTS_PER_USER} upload(s) "
            f"compiling; retry when it has finished (in at most {retry} s)",
            retry,
        )
    try:
        site = _acquire([folder / f"site-{k}" for k in range(int(settings.SOLBOARD_COMPILE_SLOTS))], deadline)
        if site is None:
            raise CompileBusy(
                "site_busy",
                f"the site is compiling {settings.SOLBOARD_COMPILE_SLOTS} upload(s) "
                f"already; retry in {retry} s",
                retry,
            )
        started = time.monotonic()
        try:
            yield
        finally:
            site.close()
            COMPILE_TIME.add(user_id, max(1, round(time.monotonic() - started)))
    finally:
        mine.close()
