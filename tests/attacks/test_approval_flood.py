"""Resource abuse: an agent flooding approvers with approval-gated calls. Bounded twice: a
profile's rate limits bound how fast it asks (``rate_limited`` 429), and
``max_pending_approvals`` bounds how many of its approvals wait at once
(``approvals_pending_limit`` 429) — per agent, so another agent of the tenant still gets its
approvals to a human; the approver's listing stays one page; the server keeps serving."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.attacks.table import ProbeTable
from tests.support.rest import RestClient
from toolkeeper import (
    Activation,
    Agent,
    Gateway,
    Limits,
    Profile,
    RateLimit,
    Risk,
    SideEffect,
    tool,
)
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.store import Store

CAP, FLOOD, THREADS, RATE = 100, 300, 8, 40


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
def transfer(to: str, amount: int) -> dict[str, Any]:
    """Move money (high risk: an approver decides at autonomy 0)."""
    return {"to": to, "amount": amount}


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def ping(n: int) -> int:
    """Answer n."""
    return n


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestClient]:
    gw = Gateway(Store.open(f"sqlite:///{tmp_path}/flood.db"),
                 settings=Settings(max_pending_approvals=CAP))
    try:
        for t in (transfer, ping):
            gw.registry.register(t)
        acts = (Activation(tool="transfer"), Activation(tool="ping"))
        gw.registry.put_profile(Profile(name="manual", autonomy=0, activations=acts))
        gw.registry.put_profile(Profile(name="auto", autonomy=3, activations=acts))
        gw.registry.put_profile(Profile(name="limited", autonomy=0, activations=acts, limits=Limits(
            rate=(RateLimit(limit=RATE, window_s=60, per="agent"),))))
        agents = (("flooder", "manual"), ("payer", "manual"), ("throttled", "limited"),
                  ("reader", "auto"))
        for agent, profile in agents:
            gw.registry.put_agent(Agent(name=agent, profile=profile))
        tokens = {a: gw.store.tokens.create(tenant_id="default", role="agent", agent=a)[1]
                  for a, _ in agents}
        tokens["approver"] = gw.store.tokens.create(tenant_id="default", role="approver")[1]
        with TestClient(create_app(gw, ApiSettings())) as client:
            yield RestClient(gw=gw, client=client, tokens=tokens)
    finally:
        gw.close()


def _flood(api: RestClient, agent: str, n: int) -> list[tuple[int, str]]:
    """``n`` distinct gated calls (an identical one would find its open approval), at once."""
    def one(i: int) -> tuple[int, str]:
        resp = api.execute(agent, "transfer", {"to": f"acct-{i}", "amount": i + 1})
        body = resp.json()
        return resp.status_code, str(body.get("reason") or body.get("error", {}).get("reason"))
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(one, range(n)))


def _count(answers: list[tuple[int, str]], status: int, reason: str) -> int:
    return sum(1 for a in answers if a == (status, reason))


def test_an_approval_flood_is_bounded_per_agent_and_the_server_keeps_serving(
        api: RestClient) -> None:
    table = ProbeTable("resource abuse (approval flood)")
    started = time.monotonic()
    answers = _flood(api, "flooder", FLOOD)
    elapsed = time.monotonic() - started
    asked = _count(answers, 200, "approval_required")
    capped = _count(answers, 429, "approvals_pending_limit")
    table.add(f"{FLOOD} distinct gated calls, {THREADS} at once", f"{CAP}..{CAP + THREADS} asked",
              f"{asked} asked, {capped} capped",
              CAP <= asked <= CAP + THREADS and asked + capped == FLOOD)
    pending = api.gw.store.approvals.pending_of_agent("default", "flooder", datetime.now(UTC))
    table.add("flooder's pending approvals", f"<= {CAP + THREADS}", str(pending),
              pending == asked)
    again = api.execute("flooder", "transfer", {"to": "acct-more", "amount": 1})
    table.add("one more from the flooder", "429 approvals_pending_limit",
              f"{again.status_code} {again.json()['error']['reason']}",
              again.status_code == 429)
    other = api.execute("payer", "transfer", {"to": "rent", "amount": 900})
    table.add("another agent's gated call", "200 approval_required",
              f"{other.status_code} {other.json().get('reason')}",
              other.status_code == 200 and other.json()["reason"] == "approval_required")
    served = api.execute("reader", "ping", {"n": 7})
    table.add("another agent's ungated call", "200 succeeded", f"{served.status_code} "
              f"{served.json().get('status')}", served.json().get("status") == "succeeded")
    page = api.get("approver", "/approvals")
    table.add("approver's GET /approvals", "one page of 100", f"{len(page.json())} rows",
              page.status_code == 200 and len(page.json()) == 100)
    first = page.json()[-1]["id"]
    denied = api.post("approver", f"/approvals/{first}/deny", {"note": "flood"})
    assert denied.status_code == 200, denied.text
    freed = api.execute("flooder", "transfer", {"to": "acct-after-deny", "amount": 1})
    table.add("flooder after one approval was decided", "200 approval_required",
              f"{freed.status_code} {freed.json().get('reason')}",
              freed.status_code == 200 and freed.json()["reason"] == "approval_required")
    throttled = _flood(api, "throttled", RATE + 60)
    limited = _count(throttled, 429, "rate_limited")
    table.add(f"{RATE + 60} gated calls under a {RATE}/min rate limit", f"{RATE} asked",
              f"{_count(throttled, 200, 'approval_required')} asked, {limited} rate_limited",
              _count(throttled, 200, "approval_required") == RATE and limited == 60)
    health = api.client.get("/healthz")
    table.add("GET /healthz after the floods", "200", str(health.status_code),
              health.status_code == 200)
    table.check()
    print(f"{FLOOD} gated calls answered in {elapsed:.1f} s ({FLOOD / elapsed:.0f}/s)")
