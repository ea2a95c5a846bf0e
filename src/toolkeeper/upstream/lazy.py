"""The gateway's handle on the upstream pool: the pool is created on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from toolkeeper.upstream.pool import UpstreamPool


class LazyPool:
    """The pool, created on first use (a gateway without upstream servers never starts
    its thread)."""

    def __init__(self, make: Callable[[], UpstreamPool], *, tokens: Any = None) -> None:
        self._make = make
        self.tokens = tokens
        """OAuth tokens for upstreams (``toolkeeper.identity.upstream.UpstreamTokens``)."""
        self._pool: UpstreamPool | None = None
        self._lock = threading.Lock()

    def get(self) -> UpstreamPool:
        pool = self._pool  # made once: every call after the first skips the lock
        if pool is not None:
            return pool
        with self._lock:
            if self._pool is None:
                self._pool = self._make()
            return self._pool

    async def call(self, server: str, tool: str, arguments: dict[str, Any], *,
                   timeout_s: float, bearer: Any = None, **more: Any) -> Any:
        """``more``: ``extra`` (a retry's input responses), ``param_headers``."""
        return await self.get().call(server, tool, arguments, timeout_s=timeout_s,
                                     bearer=bearer, **more)

    async def request(self, server: str, method: str, params: dict[str, Any], *,
                      timeout_s: float) -> dict[str, Any]:
        return await self.get().request(server, method, params, timeout_s=timeout_s)

    def config(self, server: str) -> Any:
        return self.get().config(server)

    def list_tools(self, server: str, timeout_s: float = 30.0) -> list[Any]:
        return self.get().list_tools(server, timeout_s)

    def list_extras(self, server: str, timeout_s: float = 30.0) -> Any:
        return self.get().list_extras(server, timeout_s)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
