"""A middleware that runs in either chain: in an async one (uvicorn) a sync middleware would put
every request, the API's long-polls included, in a thread of its own."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest


class HybridMiddleware(ABC):
    """Subclasses write ``call`` (sync chain) and ``acall`` (async chain)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        return self.acall(request) if self.async_mode else self.call(request)

    @abstractmethod
    def call(self, request: HttpRequest) -> Any: ...

    @abstractmethod
    async def acall(self, request: HttpRequest) -> Any: ...
