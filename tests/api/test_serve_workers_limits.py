"""``toolkeeper serve --workers 2`` on SQLite: rate limits and turn caps hold across the
worker processes (counted in the SQLite file, not in each process), so two workers grant a
limit once, not twice (docs/guarantees.md)."""

from __future__ import annotations

import concurrent.futures as cf
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_server import BIN, free_port
from tests.support.processes import child_env, stop
from tests.support.waiting import wait_until
from toolkeeper import Gateway

RATE, CAP, SENT = 10, 4, 40
CONFIG = f"""version: 1
tools:
  - native: tests.api.exec_fixtures:add
profiles:
  - name: rated
    autonomy: 3
    activations:
      - {{tool: add, limits: {{rate: [{{limit: {RATE}, window_s: 600, per: agent}}]}}}}
  - name: capped
    autonomy: 3
    activations:
      - {{tool: add, limits: {{max_calls_per_turn: {CAP}}}}}
agents:
  - {{name: rated-bot, profile: rated}}
  - {{name: capped-bot, profile: capped}}
"""


def _answers(base: str, token: str, body: dict[str, Any]) -> list[tuple[int, str]]:
    """``SENT`` calls, 8 at a time, each on a new connection (so both workers take some):
    each answer's HTTP status and reason (``succeeded`` when it ran)."""
    def one(i: int) -> tuple[int, str]:
        with httpx.Client(timeout=30) as client:
            r = client.post(f"{base}/tools/execute", headers={
                "Authorization": f"Bearer {token}"}, json={
                "tool": "add", "arguments": {"a": i, "b": 1}, **body})
        got = r.json()
        if r.status_code != 200:
            return r.status_code, str(got["error"]["reason"])
        return r.status_code, str(got["reason"] or got["status"])

    with cf.ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(SENT)))


@contextmanager
def _two_workers(tmp_path: Path, config: Path) -> Iterator[tuple[str, Path]]:
    """``serve --workers 2`` as a real process; its base URL and log. Given a minute to
    come up: on a loaded machine uvicorn restarts a worker slow to answer its first ping."""
    port, log = free_port(), tmp_path / "serve.log"
    env = child_env(TOOLKEEPER_DATABASE_URL=f"sqlite:///{tmp_path}/serve.db",
                    PYTHONUNBUFFERED="1")
    with log.open("wb") as out:
        proc = subprocess.Popen([str(BIN), "serve", "--port", str(port), "--workers", "2",
                                 "--config", str(config)], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def both_up() -> bool:
            assert proc.poll() is None, f"serve exited early: {log.read_text()}"
            started = set(re.findall(r"Application startup complete", log.read_text()))
            return bool(started) and len(_live_workers(log.read_text())) == 2 and \
                httpx.get(f"{base}/healthz", timeout=1).status_code == 200

        wait_until(both_up, timeout=120, what="two workers answer",
                   ignoring=(httpx.TransportError,))
        yield base, log
    finally:
        stop(proc, 30)


def _live_workers(log: str) -> set[str]:
    """Worker processes that started their application and have not died since."""
    started = re.findall(r"Started server process \[(\d+)\]", log)
    died = set(re.findall(r"Child process \[(\d+)\] died", log))
    return {pid for pid in started if pid not in died}


@pytest.mark.slow
def test_two_workers_on_sqlite_grant_each_limit_once(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    with Gateway.open(f"sqlite:///{tmp_path}/serve.db", config=config) as gw:
        rated = gw.store.tokens.create(tenant_id="default", role="agent", agent="rated-bot")[1]
        capped = gw.store.tokens.create(tenant_id="default", role="agent",
                                        agent="capped-bot")[1]
    with _two_workers(tmp_path, config) as (base, log):
        by_rate = _answers(base, rated, {})
        by_turn = _answers(base, capped, {"turn_group_id": "turn-1"})
        assert len(_live_workers(log.read_text())) == 2  # no worker restarted meanwhile
    assert sorted(by_rate) == sorted([(200, "succeeded")] * RATE
                                     + [(429, "rate_limited")] * (SENT - RATE)), by_rate
    succeeded = [a for a in by_turn if a == (200, "succeeded")]
    assert len(succeeded) == CAP, by_turn
    assert {a for a in by_turn if a not in succeeded} == {(200, "call_limit_exceeded")}, by_turn
