"""Optional Redis (SPEC §12): rate limits, turn caps and concurrency slots counted across
replicas, and change notifications.

Counting is one Lua script per hit (atomic, on Redis's clock, so replicas with skewed
clocks agree). Redis is an accelerator, never the source of truth: if it cannot be
reached within its timeout, every counter raises ``ConnectionError`` so the limiter
counts in the database (rate limits, when replicas share one) or in its own process
instead, with a log line and ``toolkeeper_redis_fallbacks_total``; definition changes
still propagate through the database's change counter.
"""

from __future__ import annotations

import logging
import threading
import uuid
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

# One turn's calls: counted only below the cap; the key lives ttl ms from the first call.
_TURN = """
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then
  return 0
end
if redis.call('INCR', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"""

# A group's leases: a sorted set scored by expiry (Redis's clock); expired ones are dropped.
_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[2])
redis.call('PEXPIRE', KEYS[1], lease)
return 1
"""


class RedisCounters:
    """Shared counters: rate limits (the ``RateLimiter``'s ``shared`` backend), turn caps
    and concurrency slots (the ``TurnCounter``'s and ``ConcurrencyGroups``')."""

    def __init__(self, url: str, *, timeout_s: float = 0.5, prefix: str = "tk:rate") -> None:
        self._client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                            socket_connect_timeout=timeout_s)
        self._script = self._client.register_script(_HIT)
        self._turn = self._client.register_script(_TURN)
        self._slot = self._client.register_script(_SLOT)
        self._prefix = prefix

    def count_turn(self, key: str, cap: int, ttl_s: float) -> bool:
        """Count one call of a turn; ``False`` (nothing counted) once ``cap`` were."""
        try:
            return bool(self._turn(keys=[f"{self._prefix}:turn:{key}"],
                                   args=[cap, max(1, int(ttl_s * 1000))]))
        except redis.RedisError as exc:
            raise ConnectionError(f"redis unreachable: {exc}") from None

    def acquire_slot(self, group: str, capacity: int, lease_s: float) -> str | None:
        """A lease id on one of ``group``'s slots, or ``None`` when all are held."""
        lease = uuid.uuid4().hex
        try:
            got = self._slot(keys=[f"{self._prefix}:slot:{group}"],
                             args=[capacity, lease, max(1, int(lease_s * 1000))])
        except redis.RedisError as exc:
            raise ConnectionError(f"redis unreachable: {exc}") from None
        return lease if got else None

    def release_slot(self, group: str, lease: str) -> None:
        try:
            self._client.zrem(f"{self._prefix}:slot:{group}", lease)
        except redis.RedisError as exc:
            raise ConnectionError(f"redis unreachable: {exc}") from None

    def hit(self, key: str, limit: int, window_s: float) -> float | None:
        """Count one call; ``None`` if allowed, else seconds to wait."""
        try:
            wait_ms = int(self._script(keys=[f"{self._prefix}:{key}"],
                                       args=[limit, max(1, int(window_s * 1000))]))
        except redis.RedisError as exc:
            raise ConnectionError(f"redis unreachable: {exc}") from None
        return None if wait_ms < 0 else max(0.001, wait_ms / 1000.0)

    def close(self) -> None:
        self._client.close()


class ChangeNotifier:
    """Publishes definition changes and calls ``on_change`` when another process does.

    Without Redis nothing is lost: every process also polls the database's change counter
    (about once a second), so a change still arrives, only later. Each fallback is logged
    and told to ``on_fallback`` (``change_announce``: a change not announced;
    ``change_listen``: the subscription lost, once per outage)."""

    def __init__(self, url: str, on_change: Callable[[], None], *,
                 timeout_s: float = 0.5,
                 on_fallback: Callable[[str], None] | None = None) -> None:
        self._client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                            socket_connect_timeout=timeout_s)
        self._on_change = on_change
        self._on_fallback = on_fallback or (lambda use: None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="toolkeeper-redis",
                                        daemon=True)
        self._thread.start()

    def publish(self) -> None:
        try:
            self._client.publish(CHANNEL, b"definitions")
        except redis.RedisError as exc:
            log.warning("redis unreachable, change not announced (other processes see it "
                        "through the database's change counter): %s", exc)
            self._on_fallback("change_announce")

    def _listen(self) -> None:
        lost = False
        while not self._stop.is_set():
            pubsub: Any = None
            try:
                pubsub = self._client.pubsub(  # type: ignore[no-untyped-call]
                    ignore_subscribe_messages=True)
                pubsub.subscribe(CHANNEL)
                if lost:
                    lost = False
                    log.info("redis reachable again: listening for changes through it")
                while not self._stop.is_set():
                    if pubsub.get_message(timeout=0.2) is not None:
                        self._notify()
            except redis.RedisError as exc:
                if not lost:
                    lost = True
                    log.warning("redis unreachable, changes of other processes are read "
                                "from the database's change counter until it is back: %s", exc)
                    self._on_fallback("change_listen")
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
