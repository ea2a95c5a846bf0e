"""The background writer of the recent-calls log (``toolkeeper.store.recent_calls``).

Like the audit writer: one thread, batches written within ``max_delay_s``, ``flush()``
writes synchronously and ``close()`` drains. Unlike it, a full queue never makes a call
wait: the entry is dropped and counted (``tool_recent_calls_dropped_total``); the log is a
convenience for operators, the audit trail is the record.

The same batches feed the call-stats rollup (``toolkeeper.store.stats``, the console's
overview) when it is on: the writer runs for it even when the log keeps no calls.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from toolkeeper.model.call import CallResult
from toolkeeper.observability.metrics import Metrics
from toolkeeper.store.recent_calls import RecentCall, RecentCallRepo
from toolkeeper.store.stats import CallStatsRepo, FinishedCall

log = logging.getLogger("toolkeeper")

_Entry = tuple[str, str | None, str | None, CallResult, float]


class RecentCallsLog:
    """Keeps the last ``keep`` calls per tenant and adds every call to ``stats`` (``0`` and
    ``None``: keeps nothing, starts no thread)."""

    def __init__(self, repo: RecentCallRepo, keep: int, metrics: Metrics, *,
                 stats: CallStatsRepo | None = None, max_delay_s: float = 0.2,
                 max_pending: int = 10_000) -> None:
        self.repo = repo
        self.keep = keep
        self.stats = stats
        self._metrics = metrics
        self._max_delay = max_delay_s
        self._max_pending = max_pending
        self._pending: list[_Entry] = []
        self._cond = threading.Condition()
        """Wakes the writer to close. ``_pending`` takes no lock: :meth:`record` appends to
        it and :meth:`flush` takes its first entries, each one step under the GIL (a lock
        per call was ~0.2 µs of the hot path)."""
        self._write_lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        if keep > 0 or stats is not None:
            self._thread = threading.Thread(target=self._run, name="toolkeeper-recent-calls",
                                            daemon=True)
            self._thread.start()

    def record(self, res: CallResult, tenant: str | None, agent: str | None,
               trace_id: str | None) -> None:
        """Queue one finished call (calls no tenant was known for are not kept)."""
        if self._thread is None or not tenant:
            return
        pending = self._pending  # one list for the log's life: a lock-free append
        if len(pending) < self._max_pending and not self._closed:
            pending.append((tenant, agent, trace_id, res, time.time()))
            if self._closed:  # closed meanwhile: its last flush may have run before this
                self.flush()
            return
        self._metrics.recent_dropped(tenant)

    def flush(self) -> None:
        """Write everything queued so far, now, on the calling thread."""
        with self._write_lock:
            pending = self._pending
            batch = pending[:len(pending)]
            del pending[:len(batch)]  # the first ones only: appends meanwhile stay queued
            if not batch:
                return
            if self.keep > 0:
                self._append(batch)
            if self.stats is not None:
                self._count(self.stats, batch)

    def _append(self, batch: list[_Entry]) -> None:
        rows = [_row(*entry) for entry in batch]
        try:
            self.repo.append(rows, self.keep)
        except Exception:  # a busy or gone database: these entries are lost, counted
            log.warning("recent-calls write failed; %d entries dropped", len(rows),
                        exc_info=True)
            for row in rows:
                self._metrics.recent_dropped(row.tenant_id)

    @staticmethod
    def _count(stats: CallStatsRepo, batch: list[_Entry]) -> None:
        try:
            stats.add(FinishedCall(tenant_id=tenant, tool=res.tool, status=res.status.value,
                                   reason=None if res.reason is None else str(res.reason),
                                   duration_ms=res.duration_ms, ts=ts)
                      for tenant, _agent, _trace, res, ts in batch)
        except Exception:  # the overview misses these calls; the audit trail has them
            log.warning("call-stats write failed; %d calls not counted", len(batch),
                        exc_info=True)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed, timeout=self._max_delay)
                closed = self._closed
            self.flush()
            if closed:
                return

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30.0)
        self.flush()


def _row(tenant: str, agent: str | None, trace_id: str | None, res: CallResult,
         ts: float) -> RecentCall:
    return RecentCall(
        tenant_id=tenant, call_id=res.call_id, ts=datetime.fromtimestamp(ts, UTC),
        agent=None if agent is None else agent[:200], tool=res.tool[:200],
        action=None if res.action is None else res.action[:200],
        tool_version=None if res.tool_version is None else res.tool_version[:64],
        status=res.status.value, reason=None if res.reason is None else str(res.reason)[:200],
        duration_ms=round(res.duration_ms, 3),
        trace_id=None if trace_id is None else trace_id[:200])
