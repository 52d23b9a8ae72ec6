"""The upload limit in words: one sentence for the API, the website and the command-line client.

Standard library only (the client imports it).
"""

from __future__ import annotations


def kib(size: int) -> str:
    """512 KiB, 1.5 KiB: how people read a byte count."""
    return f"{size / 1024:.4g} KiB"


def source_limit(limit: int) -> str:
    """'524288 bytes (512 KiB)': the source limit as every refusal states it."""
    return f"{limit} bytes ({kib(limit)})"


def source_too_large(size: int | None, limit: int) -> str:
    """The refusal of a source over the limit; ``size`` None when only 'more than the limit' is known
    (an upload that was not read to its end)."""
    if size is None:
        return f"the source is over the limit of {source_limit(limit)}"
    return f"the source is {size} bytes; the limit is {source_limit(limit)}"
