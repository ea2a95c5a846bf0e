"""Rate limits, per-turn call caps and concurrency groups; every wait is bounded.

All three are safe to use from any thread and any event loop (the sync wrapper runs one
loop per calling thread), so they use ``threading`` locks, never asyncio primitives.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol


class SharedCounters(Protocol):
    """Counters shared by every process: the database's or Redis's."""

    def hit(self, key: str, limit: int, window_s: float) -> float | None: ...


class RateLimiter:
    """Sliding-window counters (two fixed windows, weighted), per process by default.

    With ``shared`` set, counts live in the database or in Redis, so every process and
    replica shares them.
    """

    def __init__(self, shared: SharedCounters | None = None, max_keys: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._windows: OrderedDict[str, tuple[float, int, int]] = OrderedDict()
        self.shared = shared
        self._max_keys = max_keys

    def hit(self, key: str, limit: int, window_s: float, now: float | None = None) -> float | None:
        """Count one call. ``None`` if allowed, else seconds to wait."""
        if self.shared is not None:
            return self.shared.hit(key, limit, window_s)
        now = time.monotonic() if now is None else now
        with self._lock:
            start, prev, cur = self._windows.get(key, (now, 0, 0))
            elapsed = now - start
            if elapsed >= window_s:
                periods = int(elapsed // window_s)
                prev = cur if periods == 1 else 0
                cur, start = 0, start + periods * window_s
                elapsed = now - start
            weighted = prev * (1.0 - elapsed / window_s) + cur
            if weighted + 1 > limit:
                self._windows[key] = (start, prev, cur)
                return max(0.001, window_s - elapsed)
            self._windows[key] = (start, prev, cur + 1)
            self._windows.move_to_end(key)
            if len(self._windows) > self._max_keys:
                self._windows.popitem(last=False)
            return None


class TurnCounter:
    """Calls per turn group, bounded in memory (least recently used turns are forgotten)."""

    def __init__(self, max_turns: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._max = max_turns

    def hit(self, key: str, cap: int) -> bool:
        with self._lock:
            n = self._counts.get(key, 0)
            if n >= cap:
                return False
            self._counts[key] = n + 1
            self._counts.move_to_end(key)
            if len(self._counts) > self._max:
                self._counts.popitem(last=False)
            return True


class ConcurrencyGroups:
    """Named capacity groups; a caller waits (polling, bounded) for a free slot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: dict[str, int] = {}

    def try_acquire(self, group: str, capacity: int) -> bool:
        with self._lock:
            n = self._used.get(group, 0)
            if n >= capacity:
                return False
            self._used[group] = n + 1
            return True

    def release(self, group: str) -> None:
        with self._lock:
            self._used[group] = max(0, self._used.get(group, 1) - 1)

    async def acquire(self, group: str, capacity: int,
                      timeout_s: float) -> Callable[[], None] | None:
        """A release callback, or ``None`` when no slot freed up within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        delay = 0.001
        while not self.try_acquire(group, capacity):
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.05)
        return lambda: self.release(group)

    def in_use(self, group: str) -> int:
        return self._used.get(group, 0)
