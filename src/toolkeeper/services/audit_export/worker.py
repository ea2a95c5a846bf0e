"""The audit export worker: reads each tenant's committed chain from the sink's persisted
cursor and ships it, batch by batch, in ``seq`` order (docs/guides/audit-export.md).

It runs on a thread of its own and only ever reads the store, so a slow or dead sink never
holds a call up: the events wait in the audit table itself (the backlog is the distance
from the cursor to the chain's head). Past ``max_backlog`` the alarm goes off — an error
log line, ``toolkeeper_audit_export_alarm{sink}`` at 1 and ``GET /ops/audit-export`` at
503 — and stays on until the sink has caught up below the bound. A cursor moves only after
the sink accepted the batch, so a crash or a restart re-sends at most that batch.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from toolkeeper.services.audit_export.config import AuditExportConfig
from toolkeeper.services.audit_export.sinks import Sink, SinkError, make_sink
from toolkeeper.store import Store
from toolkeeper.store.audit import AuditRepo
from toolkeeper.store.audit_export import ExportCursors, Head

log = logging.getLogger("toolkeeper")

LEASE_S = 30.0
"""How long a sink's lease lasts without renewal, plus the sink's ``timeout_s`` (a dead
holder's sink resumes after it)."""


@dataclass(slots=True)
class SinkState:
    """What this process knows of one sink."""

    sink: Sink
    kind: str
    batch: int = 500
    timeout_s: float = 10.0
    backlog: int = 0
    alarm: bool = False
    sent: int = 0
    failures: int = 0
    gaps: int = 0
    consecutive: int = 0
    last_error: str | None = None
    next_try: float = 0.0
    holding: bool = False
    renew_at: float = 0.0

    def view(self) -> dict[str, Any]:
        return {"name": self.sink.name, "kind": self.kind, "backlog": self.backlog,
                "alarm": self.alarm, "sent": self.sent, "failures": self.failures,
                "gaps": self.gaps, "last_error": self.last_error, "shipping": self.holding}


class AuditExporter:
    """Ships the audit chains to the configured sinks; :meth:`start` it, :meth:`close` it."""

    def __init__(self, cursors: ExportCursors, audit: AuditRepo, cfg: AuditExportConfig, *,
                 sinks: Sequence[Sink] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._cursors, self._audit, self._cfg, self._clock = cursors, audit, cfg, clock
        made = list(sinks) if sinks is not None else [make_sink(s) for s in cfg.sinks]
        by_name = {s.name: s for s in cfg.sinks}
        self.states = [SinkState(sink=s, kind=c.kind, batch=c.batch, timeout_s=c.timeout_s)
                       if (c := by_name.get(s.name)) else SinkState(sink=s, kind="custom")
                       for s in made]
        self.holder = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> AuditExporter:
        self._thread = threading.Thread(target=self._loop, name="toolkeeper-audit-export",
                                        daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # the store may be down a moment: the next turn tries again
                log.exception("audit export pass failed")
            self._stop.wait(self._cfg.poll_s)

    def run_once(self) -> None:
        """One pass over every sink that is due (its retry wait over)."""
        for st in self.states:
            if self._stop.is_set():
                return
            if self._clock() >= st.next_try:
                self._pass(st)

    def _pass(self, st: SinkState) -> None:
        name = st.sink.name
        # a pass starts no batch after LEASE_S / 3; the one in flight ends within timeout_s
        now = self._clock()
        if not st.holding or now >= st.renew_at:  # one write per LEASE_S / 2, not per pass
            st.holding = self._cursors.lease(name, self.holder, now, LEASE_S + st.timeout_s)
            st.renew_at = now + LEASE_S / 2
        heads = self._cursors.heads()
        cursors = self._cursors.cursors(name)
        if st.holding:
            deadline = self._clock() + LEASE_S / 3  # renewed by the next pass, well in time
            try:
                for head in heads:
                    cursors[head.tenant_id] = self._drain(
                        st, head, cursors.get(head.tenant_id, 0), deadline)
                st.consecutive, st.last_error = 0, None
            except SinkError as exc:
                st.failures += 1
                st.consecutive += 1
                st.last_error = str(exc)
                wait = min(self._cfg.retry_max_s, self._cfg.poll_s * 2 ** st.consecutive)
                st.next_try = self._clock() + wait
                log.warning("audit export: %s (next try in %.0f s)", exc, wait)
        self._judge(st, self._cursors.backlog(name, heads, cursors))

    def _drain(self, st: SinkState, head: Head, cursor: int, deadline: float) -> int:
        """Ship ``head``'s chain from ``cursor`` towards the head until ``deadline``;
        returns the new cursor."""
        while cursor < head.seq and not self._stop.is_set() and self._clock() < deadline:
            events = self._audit.list(head.tenant_id, after_seq=cursor,
                                      limit=st.batch)
            if not events:
                break
            if cursor and events[0].seq > cursor + 1:
                st.gaps += 1
                log.error("audit export: sink %s lost events %d..%d of tenant %s's chain "
                          "(deleted by audit retention before it accepted them)",
                          st.sink.name, cursor + 1, events[0].seq - 1, head.tenant_id)
            st.sink.send(events)
            cursor = events[-1].seq
            self._cursors.advance(st.sink.name, head.tenant_id, cursor)
            st.sent += len(events)
        return cursor

    def _judge(self, st: SinkState, backlog: int) -> None:
        st.backlog = backlog
        over = backlog > self._cfg.max_backlog
        if over and not st.alarm:
            log.error("ALARM audit export: sink %s is %d events behind (max_backlog %d); "
                      "calls go on, the events wait in the store (last error: %s)",
                      st.sink.name, backlog, self._cfg.max_backlog, st.last_error)
        elif st.alarm and not over:
            log.warning("audit export: sink %s is back under max_backlog (%d behind)",
                        st.sink.name, backlog)
        st.alarm = over

    def status(self) -> list[dict[str, Any]]:
        """Each sink's state (``GET /ops/audit-export``)."""
        return [st.view() for st in self.states]

    @property
    def alarm(self) -> bool:
        return any(st.alarm for st in self.states)

    def collector(self) -> Collector:
        """Prometheus families of the export (register on the gateway's registry)."""
        return _ExportMetrics(self)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (after the batch in flight), give the leases up, close sinks."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        for st in self.states:
            try:
                if st.holding:
                    self._cursors.release(st.sink.name, self.holder)
            except Exception:  # the lease lapses by itself
                log.warning("audit export: releasing %s's lease failed", st.sink.name,
                            exc_info=True)
            st.sink.close()


def start_exporter(store: Store, registry: CollectorRegistry,
                   cfg: AuditExportConfig | None) -> AuditExporter | None:
    """The running exporter of ``cfg``'s sinks, its metrics on ``registry`` (``None``
    without sinks). ``serve`` starts one per process; the leases pick who ships."""
    if cfg is None or not cfg.sinks:
        return None
    exporter = AuditExporter(store.audit_export, store.audit, cfg)
    registry.register(exporter.collector())
    return exporter.start()


class _ExportMetrics(Collector):
    def __init__(self, exporter: AuditExporter) -> None:
        self._exporter = exporter

    def collect(self) -> Iterator[Metric]:
        return iter(families(self._exporter.states))


def families(states: Sequence[SinkState]) -> list[Metric]:
    """The export's Prometheus families, one sample per sink in ``states``."""
    backlog = GaugeMetricFamily("toolkeeper_audit_export_backlog", "Audit events stored "
                                "and not yet accepted by the sink", labels=["sink"])
    alarm = GaugeMetricFamily("toolkeeper_audit_export_alarm", "1 while the sink is more "
                              "than max_backlog events behind", labels=["sink"])
    sent = CounterMetricFamily("toolkeeper_audit_export_sent", "Audit events the sink "
                               "accepted from this process", labels=["sink"])
    failed = CounterMetricFamily("toolkeeper_audit_export_failures", "Batches the sink "
                                 "did not accept", labels=["sink"])
    gaps = CounterMetricFamily("toolkeeper_audit_export_gaps", "Runs of events deleted by "
                               "retention before the sink accepted them", labels=["sink"])
    for st in states:
        backlog.add_metric([st.sink.name], float(st.backlog))
        alarm.add_metric([st.sink.name], 1.0 if st.alarm else 0.0)
        sent.add_metric([st.sink.name], st.sent)
        failed.add_metric([st.sink.name], st.failures)
        gaps.add_metric([st.sink.name], st.gaps)
    return [backlog, alarm, sent, failed, gaps]
