"""WhiteNoise for an async middleware chain.

WhiteNoise's own middleware is sync-only; one sync middleware makes Django run every request,
async views included, in a thread of its own, so a long-polling API client would hold a thread
for its whole wait. This subclass serves files the same way (a lookup in memory, or on disk with
autorefresh in DEBUG) and otherwise awaits the rest of the chain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware as SyncWhiteNoiseMiddleware


class WhiteNoiseMiddleware(SyncWhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any], **kwargs: Any) -> None:
        super().__init__(get_response, **kwargs)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self._serve_or_await(request)
        return super().__call__(request)

    async def _serve_or_await(self, request: HttpRequest) -> HttpResponseBase:
        static_file = (
            self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        )
        if static_file is not None:
            return self.serve(static_file, request)
        response: Awaitable[HttpResponseBase] = self.get_response(request)
        return await response
