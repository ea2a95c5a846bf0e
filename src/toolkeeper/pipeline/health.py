"""Tool health and the circuit breaker: consecutive failures make a tool degraded, then
unavailable for a cool-down; after it, one probe call is let through (half-open)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolkeeper.model.enums import Health


@dataclass(slots=True)
class ToolHealth:
    status: Health = Health.HEALTHY
    consecutive_errors: int = 0
    last_error: str | None = None
    last_success_at: float | None = None
    open_until: float = 0.0
    probing: bool = False


HealthListener = Callable[[str, Health, Health, str | None], None]


class HealthBoard:
    def __init__(self, *, degrade_after: int = 3, open_after: int = 5,
                 cooldown_s: float = 30.0, on_change: HealthListener | None = None) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, ToolHealth] = {}
        self.degrade_after, self.open_after, self.cooldown_s = degrade_after, open_after, cooldown_s
        self.on_change = on_change

    def get(self, tool: str) -> ToolHealth:
        return self._tools.get(tool) or ToolHealth()

    def admit(self, tool: str) -> float | None:
        """``None`` if a call may go ahead, else seconds until the breaker half-opens."""
        h = self._tools.get(tool)
        if h is None or h.status is not Health.UNAVAILABLE:
            return None
        now = time.monotonic()
        with self._lock:
            if now < h.open_until:
                return h.open_until - now
            if h.probing:
                return self.cooldown_s / 10
            h.probing = True
            return None

    def success(self, tool: str) -> None:
        h = self._tools.get(tool)
        if h is None:
            with self._lock:
                h = self._tools.setdefault(tool, ToolHealth())
        if h.status is Health.HEALTHY and not h.consecutive_errors and not h.probing:
            h.last_success_at = time.time()  # the common case: one store, no lock
            return
        with self._lock:
            old = h.status
            h.consecutive_errors, h.status, h.probing = 0, Health.HEALTHY, False
            h.last_success_at = time.time()
        if old is not Health.HEALTHY:
            self._changed(tool, old, Health.HEALTHY, None)

    def failure(self, tool: str, error: str) -> None:
        with self._lock:
            h = self._tools.setdefault(tool, ToolHealth())
            old = h.status
            h.consecutive_errors += 1
            h.last_error, h.probing = error, False
            if h.consecutive_errors >= self.open_after:
                h.status, h.open_until = Health.UNAVAILABLE, time.monotonic() + self.cooldown_s
            elif h.consecutive_errors >= self.degrade_after:
                h.status = Health.DEGRADED
            new = h.status
        if new is not old:
            self._changed(tool, old, new, error)

    def set(self, tool: str, status: Health, retry_after_s: float = 0.0) -> None:
        """Set health from outside (an upstream health check)."""
        with self._lock:
            h = self._tools.setdefault(tool, ToolHealth())
            old, h.status = h.status, status
            h.open_until = time.monotonic() + retry_after_s
        if old is not status:
            self._changed(tool, old, status, None)

    def _changed(self, tool: str, old: Health, new: Health, error: str | None) -> None:
        if self.on_change is not None:
            self.on_change(tool, old, new, error)
