"""Rate limits, per-turn call caps and concurrency groups; every wait is bounded.

All three are safe to use from any thread and any event loop (the sync wrapper runs one
loop per calling thread), so they use ``threading`` locks, never asyncio primitives.
Each counts in its own process unless given a shared backend (the database's or Redis's),
so that replicas agree (SPEC §12); a shared turn cap or concurrency slot whose backend
raises ``ConnectionError`` (Redis unreachable) is counted in the process instead.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("toolkeeper.limits")

TURN_TTL_S = 86_400.0
"""How long a shared turn counter lives after the turn's first call."""


class SharedCounters(Protocol):
    """Counters shared by every process: the database's or Redis's."""

    def hit(self, key: str, limit: int, window_s: float) -> float | None: ...


class SharedCaps(Protocol):
    """Turn counters and concurrency leases shared by every process: the database's
    (``store.caps``) or Redis's."""

    def count_turn(self, key: str, cap: int, ttl_s: float) -> bool: ...

    def acquire_slot(self, group: str, capacity: int, lease_s: float) -> str | None: ...

    def release_slot(self, group: str, lease: str) -> None: ...


class RateLimiter:
    """Sliding-window counters (two fixed windows, weighted), per process by default.

    With ``shared`` set, counts live in the database or in Redis, so every process and
    replica shares them.
    """

    def __init__(self, shared: SharedCounters | None = None, max_keys: int = 100_000, *,
                 fallback: SharedCounters | None = None,
                 on_fallback: Callable[[], None] | None = None) -> None:
        """``fallback`` counts when ``shared`` raises ``ConnectionError`` (Redis down: the
        database's counters), else this process does; ``on_fallback`` is told each time."""
        self.fallback, self._on_fallback = fallback, on_fallback
        self._lock = threading.Lock()
        self._windows: OrderedDict[str, tuple[float, int, int]] = OrderedDict()
        self.shared = shared
        self._max_keys = max_keys

    def hit(self, key: str, limit: int, window_s: float, now: float | None = None) -> float | None:
        """Count one call. ``None`` if allowed, else seconds to wait."""
        if self.shared is not None:
            try:
                return self.shared.hit(key, limit, window_s)
            except ConnectionError as exc:
                where = "this process" if self.fallback is None else "the database"
                log.warning("rate limit counted in %s: %s", where, exc)
                if self._on_fallback is not None:
                    self._on_fallback()
                if self.fallback is not None:
                    return self.fallback.hit(key, limit, window_s)
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
    """Calls per turn group, bounded in memory (least recently used turns are forgotten);
    with ``shared`` set, counted by the database or Redis."""

    def __init__(self, shared: SharedCaps | None = None, max_turns: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._max = max_turns
        self.shared = shared

    def hit(self, key: str, cap: int) -> bool:
        """Count one call; ``False`` (not counted) once ``cap`` calls were."""
        if self.shared is not None:
            try:
                return self.shared.count_turn(key, cap, TURN_TTL_S)
            except ConnectionError as exc:
                log.warning("turn cap counted in this process only: %s", exc)
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
    """Named capacity groups; a caller waits (polling, bounded) for a free slot.

    With ``shared`` set, a slot is a lease in the database or Redis that expires after
    ``lease_s`` (a crashed holder's slot comes back); released when the call ends.
    """

    def __init__(self, shared: SharedCaps | None = None) -> None:
        self._lock = threading.Lock()
        self._used: dict[str, int] = {}
        self.shared = shared

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

    def _try(self, group: str, capacity: int, lease_s: float) -> Callable[[], None] | None:
        """A release callback for a slot taken now, else ``None``."""
        if self.shared is not None:
            try:
                lease = self.shared.acquire_slot(group, capacity, lease_s)
            except ConnectionError as exc:
                log.warning("concurrency group counted in this process only: %s", exc)
            else:
                return None if lease is None else self._shared_release(group, lease)
        if not self.try_acquire(group, capacity):
            return None
        return lambda: self.release(group)

    def _shared_release(self, group: str, lease: str) -> Callable[[], None]:
        shared = self.shared
        assert shared is not None

        def release() -> None:
            try:
                shared.release_slot(group, lease)
            except Exception:  # the lease expires by itself; the call's result stands
                log.warning("concurrency slot of %s not released (it expires)", group,
                            exc_info=True)
        return release

    async def acquire(self, group: str, capacity: int, timeout_s: float,
                      lease_s: float | None = None) -> Callable[[], None] | None:
        """A release callback, or ``None`` when no slot freed up within ``timeout_s``.
        A shared slot is leased for ``lease_s`` (default: ``timeout_s``)."""
        lease_s = timeout_s if lease_s is None else lease_s
        deadline = time.monotonic() + timeout_s
        delay, longest = (0.005, 0.1) if self.shared is not None else (0.001, 0.05)
        while (release := self._try(group, capacity, lease_s)) is None:
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, longest)
        return release

    def in_use(self, group: str) -> int:
        return self._used.get(group, 0)
