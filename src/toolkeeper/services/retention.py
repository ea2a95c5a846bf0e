"""Retention: the store stays bounded (audit retention, expired outcomes).

Two sweeps, every ``retention_every_s`` on a thread of their own (the audit writer's
housekeeping starts them; one sweep at a time per process, replicas may overlap safely):

- **outcomes and approvals**: finished (``succeeded``/``failed``) outcome records are
  deleted ``outcome_retention`` after their key expired (``outcome_ttl``): until the
  expiry the same key returns the stored result; after it, for the retention, the record
  is still visible through ``GET /calls/{id}`` (and a new call may take the key over).
  ``unknown`` and ``in_progress`` outcomes are never deleted: an operator resolves them
  first. Approvals go ``outcome_retention`` after they expired (``approval_ttl``).
- **audit** (off unless ``audit_retention`` is set): each chain's events older than the
  retention are deleted from its start, in short transactions; the chain head records the
  new base and verify starts there (``store/audit.py``, ``AuditRepo.prune``). Every prune
  is itself audited (``audit.pruned``, with the range deleted), and a chain that does not
  verify is never pruned (``audit_prune_refused`` in the log). Side-effect records older
  than the retention go with it (they can no longer be compensated).
- **call stats** (while ``call_stats`` is on): minute rows older than ``KEEP_MINUTES``
  (2 days), hour rows older than ``KEEP_HOURS`` (35 days) or the audit retention when
  longer (``toolkeeper.store.stats``).
- **budget spend** (with the audit retention): budget periods that ended before it
  (``toolkeeper.store.budgets``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from toolkeeper.model.events import EventType
from toolkeeper.observability.metrics import Metrics
from toolkeeper.services.events import system_event
from toolkeeper.services.periodic import Periodic
from toolkeeper.store import Store
from toolkeeper.store.db import utcnow
from toolkeeper.store.records import PruneReport
from toolkeeper.store.stats import KEEP_HOURS, KEEP_MINUTES

log = logging.getLogger("toolkeeper.retention")


@dataclass(slots=True)
class SweepReport:
    """One sweep: what went, and how long it took."""

    outcomes: int = 0
    approvals: int = 0
    side_effects: int = 0
    mcp_tasks: int = 0
    request_states: int = 0
    call_stats: int = 0
    budget_spend: int = 0
    audit: list[PruneReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def audit_events(self) -> int:
        return sum(r.deleted for r in self.audit)


class Retention:
    """Runs the sweeps (``run`` now, or ``tick`` from the housekeeping when due)."""

    def __init__(self, store: Store, metrics: Metrics, *, outcome_retention: timedelta | None,
                 audit_retention: timedelta | None, every_s: float,
                 closed: Callable[[], bool], stats: bool = False) -> None:
        self._store = store
        self._metrics = metrics
        self.outcome_retention = outcome_retention
        self.audit_retention = audit_retention
        self.stats = stats
        self._closed = closed
        self._periodic = Periodic("toolkeeper-retention", every_s, self._sweep,
                                  what="retention sweep")
        self.last: SweepReport | None = None
        """The last sweep's report (``None`` before the first)."""

    @property
    def enabled(self) -> bool:
        return (self.outcome_retention is not None or self.audit_retention is not None
                or self.stats)

    def tick(self) -> None:
        """Start a sweep on a thread of its own when one is due and none is running."""
        if self.enabled:
            self._periodic.tick()

    def close(self, timeout_s: float = 10.0) -> None:
        """Wait (bounded) for a running sweep to stop: it checks ``closed`` between chunks."""
        if not self._periodic.wait_idle(timeout_s):
            log.warning("a retention sweep was still running after %.0f s at close", timeout_s)

    def run(self, now: datetime | None = None) -> SweepReport:
        """One sweep now (blocking; waits for a sweep already running in this process)."""
        with self._periodic.lock:
            return self._sweep(now)

    def _sweep(self, now: datetime | None = None) -> SweepReport:
        """One sweep (the caller holds the lock)."""
        now = now or utcnow()
        start = time.perf_counter()
        rep = SweepReport()
        stop, store = self._closed, self._store
        if self.outcome_retention is not None:
            before = now - self.outcome_retention
            rep.outcomes = store.outcomes.purge_expired(before, stop=stop)
            rep.approvals = store.approvals.purge_expired(before, stop=stop)
        rep.mcp_tasks = store.mcp_tasks.purge_expired(now.timestamp(), stop=stop)
        rep.request_states = store.request_states.purge(now.timestamp())
        if self.stats:
            hours = max(KEEP_HOURS, self.audit_retention or KEEP_HOURS)
            rep.call_stats = store.call_stats.purge((now - KEEP_MINUTES).timestamp(),
                                                    (now - hours).timestamp())
        if self.audit_retention is not None:
            before = now - self.audit_retention
            rep.audit = store.audit.prune(before, stop=stop)
            self._audit_prunes(rep.audit, before)
            rep.side_effects = store.outcomes.purge_side_effects(before, stop=stop)
            rep.budget_spend = store.budgets.purge(before)
        rep.seconds = time.perf_counter() - start
        self.last = rep
        self._metrics.retention_sweep(rep.seconds)
        counts = {"outcomes": rep.outcomes, "approvals": rep.approvals,
                  "audit_events": rep.audit_events, "side_effects": rep.side_effects,
                  "mcp_tasks": rep.mcp_tasks, "request_states": rep.request_states,
                  "call_stats": rep.call_stats, "budget_spend": rep.budget_spend}
        for table, n in counts.items():
            if n:
                self._metrics.retention_deleted(table, n)
        if any(counts.values()):
            log.info("retention: deleted %s in %.2f s",
                     ", ".join(f"{n} {t}" for t, n in counts.items() if n), rep.seconds)
        return rep

    def _audit_prunes(self, reports: list[PruneReport], before: datetime) -> None:
        events = []
        for r in reports:
            if r.refused:
                log.error("audit_prune_refused: the chain of tenant %s is not pruned further "
                          "(run `toolkeeper audit verify`): %s", r.tenant_id or "(global)",
                          r.refused)
            if r.deleted:
                events.append(system_event(
                    EventType.AUDIT_PRUNED, r.tenant_id, events=r.deleted,
                    through_seq=r.through_seq, before=before.isoformat()))
        if events:
            self._store.audit.append(events)
