"""Optional Redis (SPEC §12): rate limits counted across replicas, and change notifications.

Counting is one Lua script per hit (atomic, on Redis's clock, so replicas with skewed
clocks agree). Redis is an accelerator, never the source of truth: if it cannot be
reached within its timeout, a hit is allowed (and logged) rather than failing every call,
and definition changes still propagate through the database's change counter.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import redis

log = logging.getLogger("toolkeeper.redis")
CHANNEL = "toolkeeper:definitions"

# Two fixed windows, the previous one weighted by how much of it still overlaps.
_HIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local start = now - (now % window)
local cur_key = KEYS[1] .. ':' .. start
local cur = tonumber(redis.call('GET', cur_key) or '0')
local prev = tonumber(redis.call('GET', KEYS[1] .. ':' .. (start - window)) or '0')
local elapsed = now - start
if prev * (window - elapsed) / window + cur + 1 > limit then
  return window - elapsed
end
redis.call('INCR', cur_key)
redis.call('PEXPIRE', cur_key, window * 2)
return -1
"""


class RedisCounters:
    """Shared rate-limit counters (the ``RateLimiter``'s ``shared`` backend)."""

    def __init__(self, url: str, *, timeout_s: float = 0.5, prefix: str = "tk:rate") -> None:
        self._client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                            socket_connect_timeout=timeout_s)
        self._script = self._client.register_script(_HIT)
        self._prefix = prefix

    def hit(self, key: str, limit: int, window_s: float) -> float | None:
        """Count one call; ``None`` if allowed, else seconds to wait."""
        try:
            wait_ms = int(self._script(keys=[f"{self._prefix}:{key}"],
                                       args=[limit, max(1, int(window_s * 1000))]))
        except redis.RedisError as exc:
            log.warning("redis unreachable, rate limit not counted: %s", exc)
            return None
        return None if wait_ms < 0 else max(0.001, wait_ms / 1000.0)

    def close(self) -> None:
        self._client.close()


class ChangeNotifier:
    """Publishes definition changes and calls ``on_change`` when another process does."""

    def __init__(self, url: str, on_change: Callable[[], None], *,
                 timeout_s: float = 0.5) -> None:
        self._client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                            socket_connect_timeout=timeout_s)
        self._on_change = on_change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="toolkeeper-redis",
                                        daemon=True)
        self._thread.start()

    def publish(self) -> None:
        try:
            self._client.publish(CHANNEL, b"definitions")
        except redis.RedisError as exc:
            log.warning("redis unreachable, change not announced: %s", exc)

    def _listen(self) -> None:
        while not self._stop.is_set():
            pubsub: Any = None
            try:
                pubsub = self._client.pubsub(  # type: ignore[no-untyped-call]
                    ignore_subscribe_messages=True)
                pubsub.subscribe(CHANNEL)
                while not self._stop.is_set():
                    if pubsub.get_message(timeout=0.2) is not None:
                        self._notify()
            except redis.RedisError:
                self._stop.wait(1.0)  # reconnect after a pause; the DB counter still works
            finally:
                if pubsub is not None:
                    pubsub.close()

    def _notify(self) -> None:
        try:
            self._on_change()
        except Exception:  # a failed reload must not end the listener
            log.exception("reload after a change announcement failed")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._client.close()
