"""PostgreSQL restarted under a real ``toolkeeper serve``: while the database is down every
request that needs it fails fast with ``store_unavailable``, HTTP 503 and ``Retry-After``
(never a 500, never a hang), and once it is back the same server answers again without a
restart (the pool pre-pings and reconnects)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.test_server import serving
from tests.support.pgcluster import PgCluster, PgUnavailable
from tests.support.processes import child_env
from toolkeeper import Gateway

CONFIG = ("version: 1\ntools:\n  - native: tests.api.exec_fixtures:add\nprofiles:\n"
          "  - {name: p, autonomy: 3, activations: [{tool: add}]}\n"
          "agents:\n  - {name: bot, profile: p}\n")
BOUND_S = 10.0
"""Far below the 30 s request budget: a refused connection is answered at once."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    """A cluster of this module alone: halting the session's would stop other tests."""
    try:
        pg = PgCluster.start()
    except PgUnavailable as exc:
        pytest.skip(f"POSTGRESQL NOT AVAILABLE: {exc}")
    try:
        yield pg
    finally:
        pg.stop()


def _timed(method: str, url: str, token: str, key: str = "",
           **kw: object) -> tuple[httpx.Response, float]:
    headers = {"Authorization": f"Bearer {token}"} | ({"Idempotency-Key": key} if key else {})
    start = time.monotonic()
    resp = httpx.request(method, url, headers=headers,
                         timeout=BOUND_S * 3, **kw)  # type: ignore[arg-type]
    return resp, time.monotonic() - start


@pytest.mark.slow
def test_postgres_restart_answers_503_then_recovers(tmp_path: Path,
                                                    cluster: PgCluster) -> None:
    url = cluster.fresh_database("restart_under_serve")
    (tmp_path / "toolkeeper.yaml").write_text(CONFIG, encoding="utf-8")
    with Gateway.open(url, config=tmp_path / "toolkeeper.yaml") as gw:
        admin = gw.store.tokens.create(tenant_id="default", role="admin")[1]
        agent = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")[1]
    env = child_env(TOOLKEEPER_DATABASE_URL=url)
    with serving(tmp_path, "pgrestart", "--config", str(tmp_path / "toolkeeper.yaml"),
                 extra_env=env) as (base, _out):
        call = {"json": {"tool": "add", "arguments": {"a": 1, "b": 2}}}
        ok, _ = _timed("POST", f"{base}/tools/execute", agent, **call)
        assert ok.status_code == 200 and ok.json()["status"] == "succeeded", ok.text
        # a keyed call must record its outcome first (a pure unkeyed one needs no database:
        # it runs, and its audit waits in the sink's queue)
        keyed = {**call, "key": "k-during-outage"}
        cluster.halt()
        try:
            for method, path, token, kw in (("GET", "/tools", admin, {}),
                                            ("GET", "/calls/recent", admin, {}),
                                            ("POST", "/tools/execute", agent, keyed)):
                resp, took = _timed(method, base + path, token, **kw)
                assert resp.status_code == 503, (path, resp.status_code, resp.text[:300])
                assert resp.json()["error"]["reason"] == "store_unavailable", resp.text
                assert int(resp.headers["Retry-After"]) >= 1
                assert took < BOUND_S, (path, took)
        finally:
            cluster.resume()
        after, _ = _timed("POST", f"{base}/tools/execute", agent, **keyed)
        assert after.status_code == 200 and after.json()["status"] == "succeeded", after.text
        listed, _ = _timed("GET", f"{base}/tools", admin)
        assert listed.status_code == 200
