"""The soak (issue 13, item 3): one real ``toolkeeper serve`` takes a mixed load — a pure
native tool over REST and over its own ``/mcp``, an irreversible tool, a critical tool an
approver approves as its approvals appear, and keys reused past their (short) outcome TTL.

This module is the server and the operations; ``tests.support.soak_load`` drives them and
``tests.support.soak_checks`` checks what they left behind. Every wait is bounded."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.chaos import Fleet, Replica, role_tokens
from tests.support.serve import free_port

AGENT = "soak-bot"
OUTCOME_TTL_S = 10
"""Short, so keys expire (and are taken over by a new execution) many times per run."""
RECENT_CALLS_MAX = 200
"""Short, so the recent-calls log is trimmed by every batch it writes."""
TTL_KEYS = 8
"""The keys the ``ttl`` operation reuses: deduped within the TTL, executed again after it."""
TTL_PER_S = 2.0
"""``ttl`` operations per second, besides the mix and whatever its rate: each key comes back
every few seconds, so it expires and is taken over several times a minute."""
OUTCOME_RETENTION_S = 10
"""Finished outcomes are deleted this long after their TTL ended (and approvals after theirs)."""
APPROVAL_TTL_S = 90
"""Approvals expire (and are then deleted) within the soak: longer than a gated call waits
for its approval (60 s) on a loaded machine; the approver decides in ~0.2 s."""
AUDIT_RETENTION_S = 40
"""Audit events older than this are deleted from the start of the chain while the soak runs
(longer than an outcome lives, so every outcome still has its events)."""
RETENTION_EVERY_S = 5
"""How often the server's retention sweeps run during the soak."""
CONFIG = f"""\
version: 1
settings: {{outcome_ttl_s: {OUTCOME_TTL_S}, recent_calls_max: {RECENT_CALLS_MAX},
            outcome_retention_s: {OUTCOME_RETENTION_S}, approval_ttl_s: {APPROVAL_TTL_S},
            audit_retention_s: {AUDIT_RETENTION_S}, retention_every_s: {RETENTION_EVERY_S}}}
tools:
  - native: tests.support.soak_tools:add
  - native: tests.support.soak_tools:release
  - native: tests.support.chaos_tools:append
profiles:
  - name: soak
    autonomy: 2
    activations: [{{tool: add}}, {{tool: append}}, {{tool: release}}]
agents:
  - {{name: {AGENT}, profile: soak}}
"""
MIX = {"pure": 40, "irreversible": 25, "mcp": 30, "gated": 5}
"""Weights of the operations, in the capacity measurement and in the open-loop load (which
adds ``ttl`` at :data:`TTL_PER_S`)."""
REQUEST_TIMEOUT_S = 30.0
AGENT_CONNECTIONS = 64
"""The agents' connection pool (and how many of their requests are outstanding at once)."""
APPROVAL_WAIT_S = 60.0
MCP_VERSION = "2026-07-28"
MCP_META = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {}}


@contextmanager
def soak_server(db: str, work: Path) -> Iterator[Fleet]:
    """``toolkeeper serve`` on ``db`` with :data:`CONFIG` (synced at its start, so its
    settings apply), and agent, approver and admin
    tokens (one replica of the crash chaos's fleet: its start, health wait and stop)."""
    config = work / "toolkeeper.yaml"
    config.write_text(CONFIG)
    tokens = role_tokens(db, config, AGENT, ("agent", "approver", "admin"))
    running = Fleet(db, work, [Replica(free_port(), work / "serve.log")], tokens,
                    env={"TOOLKEEPER_CONFIG": str(config),
                         # the admin token then reads the process's metrics too
                         "TOOLKEEPER_SYSTEM_TENANT": "default"})
    try:
        running.start(running.replicas[0])
        yield running
    finally:
        running.stop()


@dataclass(slots=True)
class Done:
    """One finished operation. ``latency_s`` runs from when it was due (open loop: queueing
    in the client counts) to its last answer, leaving out the gated call's approval wait."""

    kind: str
    due: float
    latency_s: float
    http: int = 200
    """The worst HTTP status it met (0: a transport error)."""
    mark: str = ""
    executed: bool = False
    """The tool ran (not deduped, not refused)."""
    deduped: bool = False
    """The stored result of an earlier execution came back (``deduped: true``), or 409
    while another call held the key: both are audited ``call.deduped``."""
    problem: str | None = None
    call_id: str | None = None
    """The call id of its last REST answer (``None`` over MCP or on a transport error)."""
    ended: float = 0.0
    """Wall-clock time (``time.time``) of its last answer, to compare with the store's."""


class Clients:
    """``size`` HTTP clients of one connection each, leased for one request at a time: each
    agent holds its own connection, as separate agents would. One shared pool of that size
    made the client the bottleneck: httpcore matches every request against every pooled
    connection (O(connections x requests)), so once behind, each request cost more and
    the client never caught up (closed loop at 64 workers: 262 calls/s against 461 at 16)."""

    def __init__(self, make: Callable[[], httpx.AsyncClient], size: int) -> None:
        self._all = [make() for _ in range(size)]
        self._free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
        for client in self._all:
            self._free.put_nowait(client)

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[httpx.AsyncClient]:
        """A free client (waiting for one, in order); it is free again on exit."""
        client = await self._free.get()
        try:
            yield client
        finally:
            self._free.put_nowait(client)

    async def aclose(self) -> None:
        for client in self._all:
            await client.aclose()


@dataclass
class Ops:
    """The operations against one server; ``approved`` counts the approver's decisions."""

    url: str
    tokens: dict[str, str]
    sink: Path
    gated_sink: Path
    clients: Clients
    """The agents' operations (at most :data:`AGENT_CONNECTIONS` at once; the others wait
    for a free client, their latency still counting from when they were due)."""
    waiters: Clients
    """Gated operations' long polls for their decision: a waiting agent holds its own
    connection, never one the other agents' calls (or the approver) need."""
    approver_client: httpx.AsyncClient
    """The approver, a person elsewhere: a connection of their own."""
    rng: random.Random
    numbers: Iterator[int] = field(default_factory=itertools.count)
    approved: int = 0

    def _auth(self, who: str, key: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return headers if key is None else {**headers, "Idempotency-Key": key}

    async def _execute(self, done: Done, body: dict[str, Any],
                       key: str | None = None) -> dict[str, Any]:
        async with self.clients.lease() as client:
            resp = await client.post(self.url + "/tools/execute", json=body,
                                     headers=self._auth("agent", key))
        done.http = max(done.http, resp.status_code)
        answer: dict[str, Any] = resp.json()
        done.call_id = answer.get("call_id")
        return answer

    async def run(self, kind: str, due: float) -> Done:
        """Operation ``kind`` due at ``due`` (``time.monotonic``); never raises."""
        done = Done(kind, due, 0.0)
        try:
            await getattr(self, kind)(done)
        except (httpx.TransportError, ValueError) as exc:
            done.http, done.problem = 0, f"{kind}: {type(exc).__name__}: {exc}"
        if not done.latency_s:
            done.latency_s = time.monotonic() - due
        done.ended = time.time()
        return done

    async def pure(self, done: Done) -> None:
        n = next(self.numbers)
        got = await self._execute(done, {"tool": "add", "arguments": {"a": n, "b": 1}})
        done.executed = got.get("status") == "succeeded"
        if got.get("output") != n + 1:
            done.problem = f"pure: add({n}, 1) answered {got}"

    async def irreversible(self, done: Done) -> None:
        done.mark = f"irr-{next(self.numbers)}"
        body = {"tool": "append", "arguments": {"mark": done.mark, "path": str(self.sink)}}
        got = await self._execute(done, body, key=done.mark)
        done.executed = got.get("status") == "succeeded" and not got.get("deduped")
        if not done.executed:
            done.problem = f"{done.mark}: answered {got}"

    async def ttl(self, done: Done) -> None:
        """A key of :data:`TTL_KEYS`, same arguments each time: deduped while its outcome
        lives, executed again once it expired; 409 while another call holds it."""
        done.mark = f"ttl-{self.rng.randrange(TTL_KEYS)}"
        body = {"tool": "append", "arguments": {"mark": done.mark, "path": str(self.sink)}}
        got = await self._execute(done, body, key=done.mark)
        done.executed = got.get("status") == "succeeded" and not got.get("deduped")
        done.deduped = done.http == 409 or (got.get("status") == "succeeded"
                                            and bool(got.get("deduped")))
        if got.get("status") != "succeeded" and done.http != 409:
            done.problem = f"{done.mark}: answered {got}"
        done.http = 200 if done.http == 409 else done.http

    async def mcp(self, done: Done) -> None:
        """``tools/call`` of ``add`` on the server's own ``/mcp`` (stateless era: one
        plain JSON-RPC POST, no session)."""
        n = next(self.numbers)
        body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "_meta": MCP_META, "name": "add", "arguments": {"a": n, "b": 2}}}
        async with self.clients.lease() as client:
            resp = await client.post(self.url + "/mcp", json=body, headers={
                **self._auth("agent"), "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": MCP_VERSION, "Mcp-Method": "tools/call",
                "Mcp-Name": "add"})
        done.http = resp.status_code
        result = resp.json().get("result") or {}
        done.executed = result.get("isError") is False
        if (result.get("structuredContent") or {}).get("result") != n + 2:
            done.problem = f"mcp: add({n}, 2) answered {resp.text[:300]}"

    async def gated(self, done: Done) -> None:
        """``release`` (critical): ``approval_required``; wait for the approver; call again
        with the approval and the same key: it runs once."""
        done.mark = f"gate-{next(self.numbers)}"
        body: dict[str, Any] = {"tool": "release",
                                "arguments": {"mark": done.mark, "path": str(self.gated_sink)}}
        asked = await self._execute(done, body, key=done.mark)
        first = time.monotonic() - done.due
        approval = asked.get("approval_id")
        if asked.get("status") != "approval_required" or not approval:
            done.problem = f"{done.mark}: first answer {asked}"
            return
        if not await self._approved(approval):
            done.problem = f"{done.mark}: {approval} not approved within {APPROVAL_WAIT_S} s"
            return
        again = time.monotonic()
        got = await self._execute(done, {**body, "approval_id": approval}, key=done.mark)
        done.latency_s = first + time.monotonic() - again
        done.executed = got.get("status") == "succeeded" and not got.get("deduped")
        if not done.executed:
            done.problem = f"{done.mark}: approved, then answered {got}"

    async def _approved(self, approval: str) -> bool:
        deadline = time.monotonic() + APPROVAL_WAIT_S
        while time.monotonic() < deadline:
            async with self.waiters.lease() as waiter:
                resp = await waiter.get(f"{self.url}/approvals/{approval}/wait",
                                        params={"timeout_s": 10}, headers=self._auth("agent"))
            if resp.json().get("status") == "approved":
                return True
            if resp.json().get("status") != "pending":
                return False
        return False

    async def approver(self, stop: asyncio.Event, problems: list[str]) -> None:
        """Approves every pending approval as it appears, until ``stop``."""
        while not stop.is_set():
            try:
                await self._approve_pending(problems)
            except (httpx.TransportError, ValueError) as exc:
                problems.append(f"approver: {type(exc).__name__}: {exc}")
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.2)

    async def _approve_pending(self, problems: list[str]) -> None:
        inbox = await self.approver_client.get(
            self.url + "/approvals", params={"status": "pending"},
            headers=self._auth("approver"))
        for item in inbox.json():
            resp = await self.approver_client.post(
                f"{self.url}/approvals/{item['id']}/approve", json={"note": "soak"},
                headers=self._auth("approver"))
            if resp.status_code == 200:
                self.approved += 1
            else:
                problems.append(f"approve {item['id']}: {resp.status_code} {resp.text[:200]}")
