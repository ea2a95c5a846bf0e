"""``serve`` ships the audit chain to the configured sinks (``audit_export:``): a call's
events reach a loopback Splunk HEC receiver with their chain hashes; with the sink down the
calls go on, the backlog grows past ``max_backlog`` and ``GET /audit/export`` answers 503
(the alarm), as do the metrics; only the system tenant's operators read it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.audit_receivers import Receiver
from tests.support.serve import free_port
from tests.support.waiting import wait_until
from toolkeeper.server import Server, ServerSettings, build


def _config(tmp_path: Path, url: str, max_backlog: int) -> Path:
    config = tmp_path / "toolkeeper.yaml"
    config.write_text(
        "version: 1\ntools:\n  - native: tests.api.exec_fixtures:add\nprofiles:\n"
        "  - {name: p, autonomy: 3, activations: [{tool: add}]}\n"
        "agents:\n  - {name: bot, profile: p}\n"
        f"audit_export:\n  poll_s: 0.05\n  max_backlog: {max_backlog}\n  sinks:\n"
        f"    - {{name: splunk, kind: splunk_hec, url: '{url}', timeout_s: 1}}\n",
        encoding="utf-8")
    return config


@pytest.fixture
def rx() -> Iterator[Receiver]:
    r = Receiver("splunk_hec").start()
    yield r
    r.stop()


def _server(tmp_path: Path, url: str, max_backlog: int = 1000) -> Server:
    return build(ServerSettings(database_url=f"sqlite:///{tmp_path}/tk.db",
                                config=_config(tmp_path, url, max_backlog)))


def _admin(srv: Server, tenant: str) -> dict[str, str]:
    token = next(a.token for a in srv.tokens if f"tenant {tenant}" in a.title)
    return {"authorization": f"Bearer {token}"}


def test_a_calls_events_reach_the_sink_with_their_chain_hash(tmp_path: Path,
                                                             rx: Receiver) -> None:
    srv = _server(tmp_path, rx.url)
    try:
        bot = srv.gw.principal(agent="bot")
        res = srv.gw.call_sync("add", arguments={"a": 1, "b": 2}, principal=bot)
        assert res.status.value == "succeeded", res
        srv.gw.flush()
        mine = wait_until(lambda: [e for e in rx.got.events if e["call_id"] == res.call_id],
                          what="the call's events at the receiver")
        assert {"call.succeeded"} <= {e["type"] for e in mine}
        stored = {e.seq: e.hash for e in srv.gw.store.audit.list(mine[0]["tenant_id"],
                                                                  limit=1000)}
        assert all(stored[e["seq"]] == e["hash"] for e in mine)
        with TestClient(srv.app) as client:
            got = client.get("/audit/export", headers=_admin(srv, "system"))
            assert got.status_code == 200, got.text
            assert got.json()["status"] == "ok"
            assert got.json()["sinks"][0]["name"] == "splunk"
            other = client.get("/audit/export", headers=_admin(srv, "default"))
            assert other.status_code == 403, other.text
    finally:
        srv.close()


def test_a_dead_sink_never_holds_a_call_and_raises_the_alarm(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/services/collector/event"
    srv = _server(tmp_path, dead, max_backlog=2)
    try:
        bot = srv.gw.principal(agent="bot")
        for i in range(3):
            res = srv.gw.call_sync("add", arguments={"a": i, "b": 1}, principal=bot)
            assert res.status.value == "succeeded", res
        srv.gw.flush()
        assert srv.exporter is not None
        wait_until(lambda: srv.exporter is not None and srv.exporter.alarm,
                   what="the export alarm")
        with TestClient(srv.app) as client:
            got = client.get("/audit/export", headers=_admin(srv, "system"))
            assert got.status_code == 503, got.text
            assert got.json()["status"] == "alarm" and got.json()["sinks"][0]["last_error"]
            metrics = client.get("/metrics", headers=_admin(srv, "system")).text
            assert 'toolkeeper_audit_export_alarm{sink="splunk"} 1.0' in metrics
    finally:
        srv.close()


def test_a_workers_parent_boots_without_shipping(tmp_path: Path, rx: Receiver) -> None:
    """``serve --workers N``'s parent builds once to create tokens and print them, then
    closes: it starts no exporter (each worker ships, the leases pick which)."""
    parent = build(ServerSettings(database_url=f"sqlite:///{tmp_path}/tk.db",
                                  config=_config(tmp_path, rx.url, 1000)), export=False)
    try:
        assert parent.exporter is None and parent.app.state.audit_export is None
    finally:
        parent.close()
    worker = _server(tmp_path, rx.url)
    try:
        assert worker.exporter is not None
    finally:
        worker.close()
