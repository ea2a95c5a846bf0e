"""Group commit in a server worker on SQLite (issue 32): concurrent REST calls on the
server's loop share commits, each still recorded exactly once with its audit.

The calls meet inside the tool (each waits until all have arrived), so their finishes are
all ready together; and a served loop lets the next requests start before a lone claim
commits. With the writes made on the loop, every claim and finish would be a transaction
of its own. On PostgreSQL served calls run on threads of their own, whose commits
``tests/store/test_group_commit.py`` covers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from toolkeeper.api import create_app
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.profile import Activation, Agent, Profile
from toolkeeper.providers.native import tool

CALLS = 16
MEET_TIMEOUT_S = 10.0


class _Meeting:
    """The calls of one test, waiting for each other inside the tool (bounded)."""

    def __init__(self) -> None:
        self.arrived = 0
        self.all_here: asyncio.Event | None = None


MEETING = _Meeting()


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)  # type: ignore[untyped-decorator]
async def meet(n: int) -> int:
    """Irreversible; returns once every call of the test has arrived."""
    assert MEETING.all_here is not None
    MEETING.arrived += 1
    if MEETING.arrived == CALLS:
        MEETING.all_here.set()
    await asyncio.wait_for(MEETING.all_here.wait(), MEET_TIMEOUT_S)
    return n


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)  # type: ignore[untyped-decorator]
async def note(n: int) -> int:
    """Irreversible; returns at once (never lets go of the loop)."""
    return n


def _gateway(tmp_path: Path) -> tuple[Gateway, str]:
    gw = Gateway.open(f"sqlite:///{tmp_path}/tk.db")
    gw.registry.register(meet)
    gw.registry.register(note)
    gw.registry.put_profile(Profile(name="p", autonomy=3, activations=(
        Activation(tool="meet"), Activation(tool="note"))))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    return gw, token


async def _calls(gw: Gateway, token: str, name: str = "meet") -> list[dict[str, Any]]:
    MEETING.arrived, MEETING.all_here = 0, asyncio.Event()
    transport = httpx.ASGITransport(app=create_app(gw))
    async with httpx.AsyncClient(transport=transport, base_url="http://tk",
                                 headers={"Authorization": f"Bearer {token}"},
                                 timeout=30) as client:
        answers = await asyncio.gather(*(
            client.post("/tools/execute", json={"tool": name, "arguments": {"n": i},
                                                "idempotency_key": f"{name}-{i}"})
            for i in range(CALLS)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    return [a.json() for a in answers]


def test_concurrent_served_calls_share_commits_and_each_is_recorded_once(
        tmp_path: Path) -> None:
    gw, token = _gateway(tmp_path)
    try:
        group = gw.store.outcomes.group
        txns, writes = group.counts()
        results = asyncio.run(_calls(gw, token))
        txns, writes = group.counts()[0] - txns, group.counts()[1] - writes
        assert sorted(r["output"] for r in results) == list(range(CALLS))
        assert {r["status"] for r in results} == {"succeeded"}
        assert writes == 2 * CALLS  # a claim and a finish each
        assert txns < writes, (txns, writes)  # shared: fewer transactions than writes
        assert group.drained > 0  # committed off the loop
        rows = gw.store.outcomes.list("default", limit=100)
        assert sorted(r.key for r in rows) == sorted(f"k:meet-{i}" for i in range(CALLS))
        assert {r.state.value for r in rows} == {"succeeded"}
        assert len(gw.store.outcomes.side_effects("default")) == CALLS
        report = gw.store.audit.verify("default")
        assert report.ok, report.problems
        attempted = gw.store.audit.list("default", types=["call.attempted"], limit=100)
        assert len(attempted) == CALLS
        again = asyncio.run(_calls(gw, token))  # the same keys: answered from the outcomes
        assert all(r["deduped"] for r in again) and MEETING.arrived == 0
    finally:
        gw.close()


def test_on_a_served_loop_a_call_that_never_waits_lets_the_next_requests_in(
        tmp_path: Path) -> None:
    """A tool that never lets go of the loop: without the turn a served call gives the
    loop before a lone commit, each call would run alone from request to answer."""
    gw, token = _gateway(tmp_path)
    try:
        txns, writes = gw.store.outcomes.group.counts()
        results = asyncio.run(_calls(gw, token, "note"))
        txns, writes = (now - before for now, before in
                        zip(gw.store.outcomes.group.counts(), (txns, writes), strict=True))
        assert sorted(r["output"] for r in results) == list(range(CALLS))
        assert writes == 2 * CALLS and txns < writes, (txns, writes)
        assert gw.store.audit.verify("default").ok
    finally:
        gw.close()
