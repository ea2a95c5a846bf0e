"""``toolkeeper serve`` as a process with an Elasticsearch sink: the receiver is killed
while calls go on, the server is restarted, the receiver comes back — and it holds every
event of the tenant's chain, in order, once (created by event id), linked by its hashes."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from tests.support.audit_receivers import Receiver
from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.support.waiting import wait_until
from toolkeeper.store import Store

pytestmark = pytest.mark.slow


def _config(url: str) -> str:
    return ("version: 1\ntools:\n  - native: tests.api.exec_fixtures:add\nprofiles:\n"
            "  - {name: p, autonomy: 3, activations: [{tool: add}]}\n"
            "agents:\n  - {name: bot, profile: p}\n"
            "audit_export:\n  poll_s: 0.1\n  retry_max_s: 0.5\n  sinks:\n"
            f"    - {{name: es, kind: elasticsearch, url: '{url}', batch: 5, timeout_s: 2}}\n")


def _calls(srv: Server, n: int) -> None:
    auth = {"authorization": f"Bearer {srv.tokens['bot']}"}
    for i in range(n):
        res = httpx.post(srv.url + "/tools/execute", headers=auth, timeout=10,
                         json={"tool": "add", "arguments": {"a": i, "b": 1}})
        assert res.status_code == 200 and res.json()["status"] == "succeeded", res.text


def _head(db: str) -> int:
    store = Store.open(db)
    try:
        return max(e.seq for e in store.audit.list("default", limit=10_000))
    finally:
        store.close()


def test_receiver_down_and_server_restarted_lose_nothing(tmp_path: Path) -> None:
    rx = Receiver("elasticsearch").start()
    tokens = {"bot": TokenSpec(role="agent", agent="bot")}
    env = {"TOOLKEEPER_CONFIG": str(tmp_path / "toolkeeper.yaml")}
    try:
        with serving_toolkeeper(tmp_path, _config(rx.url), tokens, **env) as srv:
            _calls(srv, 4)
            wait_until(lambda: len(rx.got.events) >= 4, what="the first events shipped")
            rx.stop()  # the receiver dies mid-stream; the calls go on
            _calls(srv, 6)
        db = srv.db
        with serving_toolkeeper(tmp_path, _config(rx.url), tokens, **env) as srv:
            _calls(srv, 2)
            rx.start()  # back, on the same port
            head = _head(db)
            wait_until(lambda: max((e["seq"] for e in rx.got.events
                                    if e["tenant_id"] == "default"), default=0) >= head,
                       timeout=30, what="the receiver caught up with the chain")
    finally:
        rx.stop()
    chain = [e for e in rx.got.events if e["tenant_id"] == "default"]
    seqs = [e["seq"] for e in chain]  # events committed after `head` was read may follow
    assert seqs == list(range(1, max(seqs) + 1)) and max(seqs) >= head
    assert all(b["prev_hash"] == a["hash"] for a, b in pairwise(chain))
