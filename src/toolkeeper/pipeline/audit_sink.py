"""Batched, bounded background writer for audit events of calls that record no outcome.

Calls that record an outcome write their events inside the outcome's own transactions
(durable with it). Everything else (pure calls, stops) is queued here and written in
batches within ``max_delay_s``; ``flush()`` writes synchronously and ``close()`` drains.
A full queue makes the caller wait (bounded) rather than drop events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from toolkeeper import heap
from toolkeeper.store.audit import AuditRepo
from toolkeeper.store.records import AuditDraft

log = logging.getLogger("toolkeeper.audit")


class PendingEvents(Protocol):
    """Something whose events become drafts when written (a finished call's state)."""

    def drafts(self) -> list[AuditDraft]: ...


MAX_PENDING = 10_000
"""Calls (or events) queued at most; past it callers wait for the writer. A queued call takes
~2.6 KB of process memory until written, so the bound is also the backlog's memory (~26 MB):
at 100,000 a saturated REST worker grew by ~90 MB, and the backlog was debt the writer paid
later."""


TRIM_AFTER_BACKLOG = 2_000
"""A backlog at least this long, once written, has its freed memory returned to the system
(:mod:`toolkeeper.heap`); a steady trickle never triggers it."""


class AuditSink:
    def __init__(self, repo: AuditRepo, *, max_delay_s: float = 0.05, batch: int = 2000,
                 max_pending: int = MAX_PENDING, housekeeping: Callable[[], None] | None = None,
                 housekeeping_every_s: float = 1.0) -> None:
        self._repo = repo
        self._max_delay = max_delay_s
        self._batch = batch
        self._max_pending = max_pending
        self._wake_at = min(batch, max_pending)
        """Queued items that wake the writer early: a batch, or a full queue (callers wait)."""
        self._backlog_peak = 0
        """The longest backlog the writer found since memory was last trimmed."""
        self.trims = 0
        """Times freed memory was returned to the system (see :meth:`_maybe_trim`)."""
        self._pending: list[AuditDraft | PendingEvents] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        """Guards ``_pending``; :meth:`_enqueue` takes its lock directly (a C lock: no
        Python frame per call, as ``with self._cond`` costs)."""
        self._write_lock = threading.Lock()
        self._closed = False
        self._failures = 0
        self._housekeeping_every = housekeeping_every_s
        self._housekeeping = None if housekeeping is None else _Periodic(
            housekeeping, housekeeping_every_s, "store housekeeping")
        self._upkeep: _Periodic | None = None
        self._thread = threading.Thread(target=self._run, name="toolkeeper-audit", daemon=True)
        self._thread.start()

    def submit_later(self, pending: PendingEvents) -> None:
        """Queue a finished call; its drafts are built on the writer thread."""
        self._enqueue((pending,))

    def submit(self, events: Sequence[AuditDraft]) -> None:
        self._enqueue(events)

    def _enqueue(self, events: Sequence[AuditDraft | PendingEvents]) -> None:
        pending = self._pending  # one list for the sink's life
        if len(pending) + len(events) < self._wake_at:
            # the common case, far from waking the writer or a full queue: no lock (a
            # list's extend by a sequence is one step under the GIL, as the writer's take
            # of the first entries is); the writer finds these within max_delay_s
            pending.extend(events)
            return
        with self._lock:
            if len(self._pending) >= self._max_pending:
                self._cond.notify()
                self._cond.wait_for(lambda: len(self._pending) < self._max_pending or
                                    self._closed, timeout=30.0)
            self._pending.extend(events)
            if len(self._pending) >= self._wake_at:
                self._cond.notify()

    def flush(self) -> None:
        """Write everything queued so far, now, on the calling thread, ``batch`` calls or
        events at a time (a backlog's drafts are never all built at once)."""
        with self._write_lock:
            with self._cond:
                todo = len(self._pending)
            self._backlog_peak = max(self._backlog_peak, todo)
            while todo > 0:
                with self._cond:
                    batch = self._pending[:min(todo, self._batch)]
                    del self._pending[:len(batch)]
                    self._cond.notify_all()
                if not batch:
                    return
                todo -= len(batch)
                self._write(batch)

    def _write(self, items: list[AuditDraft | PendingEvents]) -> None:
        if not items:
            return
        batch: list[AuditDraft] = []
        for item in items:
            if isinstance(item, AuditDraft):
                batch.append(item)
            else:
                batch.extend(item.drafts())
        for attempt in range(5):
            try:
                self._repo.append(batch)
                return
            except Exception:  # database busy or gone: retry, then keep them queued
                log.exception("audit write failed (attempt %d)", attempt + 1)
                self._failures += 1
        with self._cond:
            self._pending[:0] = list(batch)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or len(self._pending) >= self._wake_at,
                                    timeout=self._max_delay)
                closed = self._closed
            self.flush()
            if closed:
                return
            self._maybe_trim()
            for periodic in (self._upkeep, self._housekeeping):
                if periodic is not None:
                    periodic.maybe_run()

    def _maybe_trim(self) -> None:
        """After a long backlog is written (and none is queued), return the memory it freed."""
        if self._backlog_peak < TRIM_AFTER_BACKLOG or self._pending:
            return
        self._backlog_peak = 0
        if heap.trim():
            self.trims += 1

    def set_housekeeping(self, fn: Callable[[], None]) -> None:
        """Start periodic upkeep (once its owner is fully constructed): recovery,
        retention…, once every ``housekeeping_every_s``."""
        self._housekeeping = _Periodic(fn, self._housekeeping_every, "store housekeeping")

    def set_upkeep(self, fn: Callable[[], None], every_s: float) -> None:
        """Run ``fn`` every ``every_s`` (at most once per wake-up of the writer, which is
        every ``max_delay_s`` at the latest): frequent, short store upkeep (the SQLite
        checkpoint), where the housekeeping runs once a second."""
        self._upkeep = _Periodic(fn, every_s, "store upkeep")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30.0)
        self.flush()

    @property
    def pending(self) -> int:
        return len(self._pending)


class _Periodic:
    """Store upkeep the writer thread runs between batches, at most once every
    ``every_s``; a failure (a busy database) is logged and tried again next time."""

    __slots__ = ("_every", "_fn", "_next", "_what")

    def __init__(self, fn: Callable[[], None], every_s: float, what: str) -> None:
        self._fn = fn
        self._every = every_s
        self._what = what
        self._next = time.monotonic() + every_s

    def maybe_run(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._every
        try:
            self._fn()
        except Exception:  # a busy database: next time
            log.warning("%s failed", self._what, exc_info=True)
