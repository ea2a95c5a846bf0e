"""Tool health and the circuit breaker: consecutive failures make a tool degraded, then
unavailable for a cool-down; after it, one probe call is let through (half-open).

Listings ask :meth:`HealthBoard.blocked` the question the limits step asks
:meth:`HealthBoard.admit`, so a tool is hidden exactly while its calls are refused
(``tool_unavailable``) and listed again once the breaker half-opens."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolkeeper.model.enums import Health

_HEALTHY, _UNAVAILABLE = Health.HEALTHY, Health.UNAVAILABLE
"""Read once: an enum member read through its class costs ~60 ns on Python 3.11 (its
metaclass has ``__getattr__``), and every call asks both."""


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
                 cooldown_s: float = 30.0, on_change: HealthListener | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, ToolHealth] = {}
        self.degrade_after, self.open_after, self.cooldown_s = degrade_after, open_after, cooldown_s
        self.on_change = on_change
        self.clock = clock
        """Seconds, monotonic: when breakers open and half-open (tests set their own)."""
        self.version = 0
        """Bumped whenever what :meth:`blocked` answers may change other than by time
        passing (listings cached by it are rebuilt)."""

    def get(self, tool: str) -> ToolHealth:
        return self._tools.get(tool) or ToolHealth()

    def blocked(self, tool: str) -> float | None:
        """What :meth:`admit` would answer now, without taking the half-open probe:
        ``None`` if a call may go ahead (the tool is listed), else seconds to wait."""
        h = self._tools.get(tool)
        if h is None or h.status is not Health.UNAVAILABLE:
            return None
        now = self.clock()
        if now < h.open_until:
            return h.open_until - now
        return self.cooldown_s / 10 if h.probing else None

    def admit(self, tool: str) -> float | None:
        """``None`` if a call may go ahead, else seconds until the breaker half-opens."""
        return self.admit_call(tool)[0]

    def admit_call(self, tool: str) -> tuple[float | None, bool]:
        """:meth:`admit`, and whether this call took the half-open probe (then the caller
        must :meth:`end_probe` when the call ends, however it ends)."""
        h = self._tools.get(tool)
        if h is None or h.status is not _UNAVAILABLE:
            return None, False
        now = self.clock()
        with self._lock:
            if now < h.open_until:
                return h.open_until - now, False
            if h.probing:
                return self.cooldown_s / 10, False
            h.probing = True
            self.version += 1
            return None, True

    def end_probe(self, tool: str) -> None:
        """The probe call ended. If it recorded neither a success nor a failure (it stopped
        before running, at the gate say, or failed in a way that says nothing of the tool's
        health), the next call may probe: a breaker never stays stuck half-open."""
        h = self._tools.get(tool)
        if h is None or not h.probing:
            return
        with self._lock:
            h.probing = False
            self.version += 1

    def success(self, tool: str) -> None:
        h = self._tools.get(tool)
        if h is None:
            with self._lock:
                h = self._tools.setdefault(tool, ToolHealth())
        if h.status is _HEALTHY and not h.consecutive_errors and not h.probing:
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
                h.status, h.open_until = Health.UNAVAILABLE, self.clock() + self.cooldown_s
                self.version += 1  # (re)opened: a new cool-down
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
            h.open_until = self.clock() + retry_after_s
            self.version += 1
        if old is not status:
            self._changed(tool, old, status, None)

    def _changed(self, tool: str, old: Health, new: Health, error: str | None) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change(tool, old, new, error)
