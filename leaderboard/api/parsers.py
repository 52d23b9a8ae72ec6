"""The API's JSON parser, with limits on nesting and on the number of values.

The body's size in bytes is limited before it is read (``DATA_UPLOAD_MAX_MEMORY_SIZE``, 413); a
small body can still be a problem: ``[[[[...]]]]`` 200,000 deep made the decoder (and anything
that walks the result afterwards) raise RecursionError, a 500; half a million tiny values make
every serializer field validate each one. No request of the API needs more than a few levels or a
few thousand values, so both are refused with a 400 and a code of their own.
"""

from __future__ import annotations

from typing import Any

from rest_framework.parsers import JSONParser

from leaderboard.api.errors import ApiError

#: Deepest nesting of objects and arrays a request body may have (a batch item is 3 levels deep).
MAX_JSON_DEPTH = 32
#: Most values (objects, arrays, strings, numbers...) a request body may hold.
MAX_JSON_VALUES = 10_000


def check_structure(value: Any, max_depth: int = MAX_JSON_DEPTH, max_values: int = MAX_JSON_VALUES) -> None:
    """Raise ApiError when ``value`` nests deeper or holds more values than allowed. Iterative:
    it must not itself recurse on what it checks."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while pending:
        item, depth = pending.pop()
        seen += 1
        if seen > max_values:
            raise ApiError("json_too_many_values", f"the JSON body holds more than {max_values} values",
                           limit=max_values)
        if depth > max_depth:
            raise too_deep(max_depth)
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)


def too_deep(max_depth: int = MAX_JSON_DEPTH) -> ApiError:
    return ApiError("json_too_deep", f"the JSON body nests objects and arrays deeper than {max_depth} levels",
                    limit=max_depth)


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser (same media type, same errors for bad JSON) plus the limits above."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            value = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise too_deep() from None
        check_structure(value)
        return value
