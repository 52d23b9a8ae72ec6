"""Is a submitted source plain UTF-8 text? The answer names the first bad byte's offset.

A ``str`` can hold what no UTF-8 file can: lone surrogates (``"\\udcff"`` from a JSON escape, or
the ``surrogateescape`` trace of an undecodable byte). Writing one for a compiler, storing it or
measuring its size raises ``UnicodeEncodeError`` far from the upload; these checks refuse it at
the door instead. NUL bytes are refused too: no tool reads past one and the database cannot store
one in a text column.
"""

from __future__ import annotations

_ESCAPED_BYTES = range(0xDC80, 0xDD00)  # surrogateescape: byte b became U+DC00 + b


def text_problem(source: str) -> str | None:
    """Why ``source`` is not UTF-8 text without NUL, or None."""
    try:
        encoded = source.encode("utf-8")
    except UnicodeEncodeError as error:
        offset = len(source[: error.start].encode("utf-8"))
        char = ord(source[error.start])
        if char in _ESCAPED_BYTES:
            return f"the source is not UTF-8 text: byte 0x{char - 0xDC00:02x} at byte offset {offset}"
        return f"the source is not UTF-8 text: an unpaired surrogate U+{char:04X} at byte offset {offset}"
    nul = encoded.find(b"\0")
    if nul >= 0:
        return f"the source contains a NUL byte at byte offset {nul}"
    return None


def decode_source(data: bytes) -> str:
    """Uploaded bytes as text; raises ValueError naming the first byte that is not UTF-8 or NUL."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"the source is not UTF-8 text: byte 0x{data[error.start]:02x} at byte offset {error.start}"
        ) from None
    problem = text_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text
