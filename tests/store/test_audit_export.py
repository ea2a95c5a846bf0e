"""Audit export (``toolkeeper.services.audit_export``, migration 0016) on SQLite and
PostgreSQL, against loopback receivers speaking Splunk HEC, Elasticsearch bulk and OTLP
logs: every committed event arrives, in order per tenant, with its chain hash; a receiver
killed mid-stream and started again loses nothing; a restarted exporter resumes from its
persisted cursor; one process ships a sink at a time; past ``max_backlog`` the alarm goes
off and clears once the sink caught up."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.support.audit_receivers import Receiver
from toolkeeper.services.audit_export.config import AuditExportConfig, AuditSinkConfig
from toolkeeper.services.audit_export.worker import AuditExporter
from toolkeeper.store import Store
from toolkeeper.store.audit_chain import chain_hash, event_body
from toolkeeper.store.db import utcnow
from toolkeeper.store.records import AuditDraft

KINDS = ["splunk_hec", "elasticsearch", "otlp"]


class Clock:
    """Time the exporter reads: tests step over its retry waits instead of sleeping."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store.open(db_url)
    yield s
    s.close()


def _append(store: Store, tenant: str | None, n: int) -> None:
    store.audit.append([AuditDraft(type="call.succeeded", tenant_id=tenant,
                                   event_id=uuid.uuid4().hex, ts=utcnow(), tool="pay",
                                   data={"i": i}) for i in range(n)])


def _config(kind: str, url: str, **over: Any) -> AuditExportConfig:
    sink = AuditSinkConfig(name=f"siem-{kind}", kind=kind,  # type: ignore[arg-type]
                           url=url, batch=over.pop("batch", 4), timeout_s=1.0)
    return AuditExportConfig(sinks=[sink], **over)


def _exporter(store: Store, cfg: AuditExportConfig, clock: Clock) -> AuditExporter:
    return AuditExporter(store.audit_export, store.audit, cfg, clock=clock)


def _verified(events: list[dict[str, Any]], store: Store) -> dict[str | None, list[int]]:
    """What a receiver checks: per tenant, first arrivals in seq order, no seq missing,
    each event linked to the previous one and its hash recomputed from what was sent."""
    by_tenant: dict[str | None, list[dict[str, Any]]] = {}
    for e in events:
        seen = by_tenant.setdefault(e["tenant_id"], [])
        if e["seq"] > (seen[-1]["seq"] if seen else 0):
            seen.append(e)
        else:  # at-least-once: a repeat is the same event again
            assert any(s["seq"] == e["seq"] and s["hash"] == e["hash"] for s in seen)
    assert store.audit.key is None  # an unkeyed store: the hash is recomputable here
    for chain in by_tenant.values():
        prev = chain[0]["prev_hash"]
        for e in chain:
            row = {**e, "tenant_key": e["tenant_id"] or "*",
                   "ts": datetime.fromisoformat(e["ts"])}
            assert e["prev_hash"] == prev
            assert chain_hash(e["seq"], e["prev_hash"], event_body(row)) == e["hash"]
            prev = e["hash"]
    return {t: [e["seq"] for e in chain] for t, chain in by_tenant.items()}


@pytest.mark.parametrize("kind", KINDS)
def test_receiver_killed_mid_stream_and_restarted_gets_every_event_in_order(
        store: Store, kind: str) -> None:
    rx = Receiver(kind).start()
    clock = Clock()
    exp = _exporter(store, _config(kind, rx.url, max_backlog=6), clock)
    try:
        _append(store, "acme", 9)
        _append(store, None, 3)
        rx.got.die_at = 2  # the second batch arrives, its answer never does
        exp.run_once()
        rx.stop()
        st = exp.states[0]
        if kind != "otlp":  # the OTLP exporter retries a hang-up itself, within its timeout
            assert st.failures == 1 and st.last_error
        failed = st.failures
        _append(store, "acme", 6)  # calls go on while the sink is down
        _append(store, "beta", 2)
        clock.now += 3600
        exp.run_once()  # refused: the receiver is gone
        assert st.failures == failed + 1 and st.alarm and st.backlog > 6
        rx.got.die_at = None
        rx.start()
        clock.now += 3600
        exp.run_once()
        assert not st.alarm and st.backlog == 0 and st.last_error is None
        seqs = _verified(rx.got.events, store)
        assert seqs == {"acme": list(range(1, 16)), None: [1, 2, 3], "beta": [1, 2]}
        if kind == "elasticsearch":  # created by event id: the re-sent batch is not doubled
            assert len(rx.got.events) == 20
    finally:
        exp.close()
        rx.stop()


def test_restarted_exporter_resumes_from_its_persisted_cursor(store: Store) -> None:
    rx = Receiver("splunk_hec").start()
    clock = Clock()
    cfg = _config("splunk_hec", rx.url)
    try:
        _append(store, "acme", 5)
        first = _exporter(store, cfg, clock)
        first.run_once()
        first.close()
        _append(store, "acme", 3)
        again = _exporter(store, cfg, clock)
        again.run_once()
        again.close()
        assert [e["seq"] for e in rx.got.events] == list(range(1, 9))  # nothing twice
        assert store.audit_export.cursors("siem-splunk_hec") == {"acme": 8}
    finally:
        rx.stop()


def test_one_process_ships_a_sink_at_a_time(store: Store) -> None:
    rx = Receiver("elasticsearch").start()
    clock = Clock()
    cfg = _config("elasticsearch", rx.url)
    a, b = _exporter(store, cfg, clock), _exporter(store, cfg, clock)
    try:
        _append(store, "acme", 3)
        a.run_once()
        _append(store, "acme", 2)
        b.run_once()  # a holds the lease: b only watches the backlog
        assert not b.states[0].holding and b.states[0].backlog == 2
        assert rx.got.requests == 1
        a.close()  # gives the lease up
        b.run_once()
        assert b.states[0].holding and b.states[0].backlog == 0
        assert [e["seq"] for e in rx.got.events] == [1, 2, 3, 4, 5]
    finally:
        b.close()
        rx.stop()


def test_a_lapsed_lease_passes_to_another_process(store: Store) -> None:
    clock = Clock()
    assert store.audit_export.lease("s", "a", clock.now, 30)
    assert not store.audit_export.lease("s", "b", clock.now + 29, 30)
    assert store.audit_export.lease("s", "b", clock.now + 31, 30)
    assert not store.audit_export.lease("s", "a", clock.now + 32, 30)


def test_a_cursor_never_moves_back(store: Store) -> None:
    store.audit_export.advance("s", "acme", 7)
    store.audit_export.advance("s", "acme", 3)
    assert store.audit_export.cursors("s") == {"acme": 7}


def test_the_alarm_shows_in_the_metrics(store: Store) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    _append(store, "acme", 5)
    clock = Clock()
    exp = _exporter(store, _config("splunk_hec", "http://127.0.0.1:9/services/collector/event",
                                   max_backlog=4), clock)
    reg = CollectorRegistry()
    reg.register(exp.collector())
    exp.run_once()
    text = generate_latest(reg).decode()
    assert 'toolkeeper_audit_export_alarm{sink="siem-splunk_hec"} 1.0' in text
    assert 'toolkeeper_audit_export_backlog{sink="siem-splunk_hec"} 5.0' in text
    assert 'toolkeeper_audit_export_failures_total{sink="siem-splunk_hec"} 1.0' in text
    exp.close()


def test_retention_keeps_what_an_active_sink_has_not_accepted(store: Store) -> None:
    import time
    from datetime import timedelta

    _append(store, "acme", 6)
    later = utcnow() + timedelta(hours=1)  # every event is old enough to prune
    store.audit_export.lease("gone", "old-process", time.time() - 3 * 86_400, 30)
    assert store.audit_export.lease("siem", "me", time.time(), 30)
    store.audit_export.advance("siem", "acme", 4)
    [rep] = store.audit.prune(later)
    assert (rep.deleted, rep.through_seq) == (4, 4)  # 5 and 6 wait for the sink
    store.audit_export.advance("siem", "acme", 6)  # "gone" (lease long lapsed) holds nothing
    [rep] = store.audit.prune(later)
    assert (rep.deleted, rep.through_seq) == (2, 6)
    assert store.audit.verify("acme").ok


def test_a_batch_the_index_partly_refuses_is_sent_again(store: Store) -> None:
    rx = Receiver("elasticsearch").start()
    clock = Clock()
    exp = _exporter(store, _config("elasticsearch", rx.url), clock)
    try:
        _append(store, "acme", 3)
        rx.got.refuse = True
        exp.run_once()
        st = exp.states[0]
        assert st.failures == 1 and "refused" in (st.last_error or "")
        assert store.audit_export.cursors("siem-elasticsearch") == {}
        rx.got.refuse = False
        clock.now += 3600
        exp.run_once()
        assert [e["seq"] for e in rx.got.events] == [1, 2, 3]
    finally:
        exp.close()
        rx.stop()


def test_headers_come_from_the_environment_and_a_missing_one_stops_the_sink(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    rx = Receiver("splunk_hec").start()
    clock = Clock()
    sink = AuditSinkConfig(name="splunk", kind="splunk_hec", url=rx.url,
                           headers_env={"Authorization": "TK_TEST_HEC_AUTH"})
    exp = _exporter(store, AuditExportConfig(sinks=[sink]), clock)
    try:
        _append(store, "acme", 2)
        monkeypatch.delenv("TK_TEST_HEC_AUTH", raising=False)
        exp.run_once()
        assert rx.got.requests == 0 and "TK_TEST_HEC_AUTH" in (exp.states[0].last_error or "")
        monkeypatch.setenv("TK_TEST_HEC_AUTH", "Splunk s3cret")
        clock.now += 3600
        exp.run_once()
        assert rx.got.headers["authorization"] == "Splunk s3cret"
        assert [e["seq"] for e in rx.got.events] == [1, 2]
    finally:
        exp.close()
        rx.stop()
