"""SPEC §12: two ``toolkeeper serve`` processes over one PostgreSQL keep every invariant —
exactly one execution per key, one approval consumed once, rate limits counted across both,
one unforked audit chain. Real processes, loopback only, every wait bounded."""

from __future__ import annotations

import concurrent.futures as cf
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.support.processes import child_env
from tests.support.waiting import wait_until
from toolkeeper import Gateway

CONFIG = """\
version: 1
tools:
  - native: tests.support.replica_tools:stamp
  - native: tests.support.replica_tools:pay
  - native: tests.support.replica_tools:echo
  - native: tests.support.replica_tools:hold
    overrides: {execution: {concurrency_group: single, max_concurrency: 1, timeout_s: 60}}
profiles:
  - name: stamper
    autonomy: 2
    activations: [{tool: stamp}]
  - name: payer
    autonomy: 0
    activations: [{tool: pay}]
  - name: limited
    autonomy: 2
    activations: [{tool: echo}]
    limits: {rate: [{limit: 10, window_s: 60, per: agent}]}
  - name: capped
    autonomy: 2
    activations: [{tool: echo}, {tool: hold}]
    limits: {max_calls_per_turn: 5}
agents:
  - {name: capped-bot, profile: capped}
  - {name: stamp-bot, profile: stamper}
  - {name: pay-bot, profile: payer}
  - {name: echo-bot, profile: limited}
"""


@dataclass
class Replicas:
    urls: list[str]
    tokens: dict[str, str]
    work: Path

    def post(self, i: int, path: str, token: str, *, json: object,
             key: str | None = None) -> httpx.Response:
        """POST to replica ``i % 2`` as ``token``'s holder."""
        headers = {"Authorization": f"Bearer {self.tokens[token]}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return httpx.post(self.urls[i % 2] + path, headers=headers, json=json, timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"replica exited: {proc.stdout.read().decode()[-2000:]}")  # type: ignore[union-attr]
    return httpx.get(url + "/healthz", timeout=1).status_code == 200


@contextmanager
def _two_replicas(pg_url: str, work: Path, redis_url: str | None = None) -> Iterator[Replicas]:
    """Two ``serve`` processes on ``pg_url`` (and ``redis_url`` when given)."""
    config = work / "toolkeeper.yaml"
    config.write_text(CONFIG)
    with Gateway.open(pg_url, config=config) as gw:
        tokens = {name: gw.store.tokens.create(tenant_id="default", role="agent",
                                               agent=name)[1]
                  for name in ("stamp-bot", "pay-bot", "echo-bot", "capped-bot")}
        tokens["approver"] = gw.store.tokens.create(tenant_id="default", role="approver")[1]
        tokens["admin"] = gw.store.tokens.create(tenant_id="default", role="admin")[1]
    env = child_env(TOOLKEEPER_DATABASE_URL=pg_url)
    env.pop("TOOLKEEPER_REDIS_URL", None)
    if redis_url is not None:
        env["TOOLKEEPER_REDIS_URL"] = redis_url
    procs, urls = [], []
    try:
        for _ in range(2):
            port = _free_port()
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", str(port)],
                env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs, strict=True):
            wait_until(partial(_healthy, url, proc), timeout=60,
                       what=f"replica {url} answers /healthz", ignoring=(httpx.HTTPError,))
        yield Replicas(urls, tokens, work)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path) -> Iterator[Replicas]:
    with _two_replicas(pg_url, tmp_path) as running:
        yield running


@pytest.fixture(params=["database", "redis"])
def counted_replicas(request: pytest.FixtureRequest, pg_url: str,
                     tmp_path: Path) -> Iterator[Replicas]:
    """Two replicas sharing turn caps and concurrency slots through the database, or
    through Redis (started lazily, so the database run needs no redis-server)."""
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    with _two_replicas(pg_url, tmp_path, redis_url) as running:
        yield running


pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_same_key_on_both_replicas_executes_once(replicas: Replicas) -> None:
    sink = replicas.work / "stamps.txt"
    body = {"tool": "stamp", "arguments": {"mark": "m1", "path": str(sink)}}
    with cf.ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda i: replicas.post(
            i, "/tools/execute", "stamp-bot", json=body, key="one-key"), range(40)))
    assert {a.status_code for a in answers} <= {200, 409}
    assert sink.read_text().count("m1:") == 1
    fresh = [a.json() for a in answers if a.status_code == 200 and not a.json()["deduped"]]
    assert len(fresh) == 1


def test_one_approval_is_consumed_once_across_replicas(replicas: Replicas) -> None:
    ledger = replicas.work / "payments.txt"
    body = {"tool": "pay", "arguments": {"invoice": "inv-1", "path": str(ledger)}}
    ask = replicas.post(0, "/tools/execute", "pay-bot", json=body).json()
    assert ask["status"] == "approval_required"
    approved = replicas.post(1, f"/approvals/{ask['approval_id']}/approve", "approver", json={})
    assert approved.status_code == 200, approved.text
    with cf.ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda i: replicas.post(
            i, "/tools/execute", "pay-bot", json={**body, "approval_id": ask["approval_id"],
                                                  "idempotency_key": f"k{i}"}), range(10)))
    results = [a.json() for a in answers]
    assert sum(r["status"] == "succeeded" for r in results) == 1, results
    assert {r["reason"] for r in results if r["status"] != "succeeded"} == {"approval_consumed"}
    assert ledger.read_text().splitlines() == ["inv-1"]


def test_rate_limit_is_counted_across_replicas(replicas: Replicas) -> None:
    answers = [replicas.post(i, "/tools/execute", "echo-bot",
                             json={"tool": "echo", "arguments": {"n": i}}) for i in range(30)]
    assert sum(a.status_code == 200 for a in answers) == 10
    limited = [a for a in answers if a.status_code == 429]
    assert len(limited) == 20 and all("Retry-After" in a.headers for a in limited)


def test_one_unforked_audit_chain(replicas: Replicas) -> None:
    sink = replicas.work / "chain.txt"
    with cf.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: replicas.post(
            i, "/tools/execute", "stamp-bot",
            json={"tool": "stamp", "arguments": {"mark": f"c{i}", "path": str(sink)},
                  "idempotency_key": f"chain-{i}"}), range(24)))
    for i in range(2):
        report = httpx.get(replicas.urls[i] + "/audit/verify", timeout=30, headers={
            "Authorization": f"Bearer {replicas.tokens['admin']}"}).json()
        assert report["ok"], report
        assert report["events"] >= 24 * 3


def test_a_turn_cap_holds_across_replicas(counted_replicas: Replicas) -> None:
    answers = [counted_replicas.post(i, "/tools/execute", "capped-bot", json={
        "tool": "echo", "arguments": {"n": i}, "turn_group_id": "turn-1"}).json()
        for i in range(8)]
    assert [a["status"] for a in answers[:5]] == ["succeeded"] * 5, answers
    assert {(a["status"], a["reason"]) for a in answers[5:]} == {
        ("denied", "call_limit_exceeded")}
    other_turn = counted_replicas.post(1, "/tools/execute", "capped-bot", json={
        "tool": "echo", "arguments": {"n": 9}, "turn_group_id": "turn-2"}).json()
    assert other_turn["status"] == "succeeded"


def test_a_concurrency_group_of_one_runs_one_call_at_a_time_across_replicas(
        counted_replicas: Replicas) -> None:
    log = counted_replicas.work / "hold.txt"
    with cf.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda i: counted_replicas.post(
            i, "/tools/execute", "capped-bot", json={
                "tool": "hold", "arguments": {"mark": f"h{i}", "path": str(log)},
                "idempotency_key": f"hold-{i}"}).json(), range(6)))
    assert [a["status"] for a in answers] == ["succeeded"] * 6, answers
    lines = log.read_text().splitlines()
    assert len(lines) == 12
    # one at a time: every entry is followed by the same call's exit
    for entered, left in zip(lines[::2], lines[1::2], strict=True):
        assert entered.startswith("in:") and left == "out:" + entered[3:], lines
