"""``toolkeeper.client.AsyncClient`` against a real ``toolkeeper serve``: a retry after a
lost answer dedupes instead of executing twice; the bounded wait for a decision returns
when another client decides; the async face runs the approval flow as the sync one does."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import httpx
import pytest

from tests.client.conftest import Server
from toolkeeper import Gateway
from toolkeeper.client import AsyncClient, Client, RequestRefused
from toolkeeper.errors import ApprovalRequired
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import CallStatus, Role
from toolkeeper.model.reasons import Reason

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`


class LoseFirstAnswer(httpx.AsyncBaseTransport):
    """A real HTTP transport that lets the first execute reach the server and run, then
    loses its answer (a connection reset on the way back)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        if self.lost == 0 and request.url.path.startswith("/tools/execute"):
            await resp.aread()
            await resp.aclose()
            self.lost += 1
            raise httpx.ReadError("connection reset before the answer", request=request)
        return resp

    async def aclose(self) -> None:
        await self.inner.aclose()


def _sink(server: Server) -> Path:
    return server.work / f"sink-{uuid.uuid4().hex}.txt"


async def test_a_retry_after_a_lost_answer_dedupes(server: Server) -> None:
    sink, lossy = _sink(server), LoseFirstAnswer()
    async with AsyncClient(server.url, server.tokens["worker-bot"], timeout=10,
                           transport=lossy) as tk:
        res = await tk.execute("stamp", {"mark": "once", "path": str(sink)})
    assert lossy.lost == 1
    assert res.status is CallStatus.SUCCEEDED and res.deduped  # the first run's outcome
    assert sink.read_text() == "once\n"


def test_a_sync_batch_retry_after_a_lost_answer_dedupes(server: Server) -> None:
    sink, lossy = _sink(server), LoseFirstAnswer()
    with Client(server.url, server.tokens["worker-bot"], timeout=10, transport=lossy) as tk:
        results = tk.execute_batch([
            {"tool": "stamp", "arguments": {"mark": "b1", "path": str(sink)}},
            {"tool": "stamp", "arguments": {"mark": "b2", "path": str(sink)}}])
    assert lossy.lost == 1
    assert [(r.status, r.deduped) for r in results] == [(CallStatus.SUCCEEDED, True)] * 2
    assert sink.read_text() == "b1\nb2\n"


async def test_wait_for_decision_returns_when_another_client_approves(server: Server) -> None:
    sink = _sink(server)
    args = {"invoice": "INV-9", "path": str(sink)}
    turn = f"turn-{uuid.uuid4().hex}"
    async with AsyncClient(server.url, server.tokens["pay-bot"], timeout=10) as bot, \
            AsyncClient(server.url, server.tokens["approver"], timeout=10) as approver:
        pending = await bot.execute("pay", args, turn_group_id=turn)
        assert pending.status is CallStatus.APPROVAL_REQUIRED and pending.approval_id
        approval_id = pending.approval_id
        decided = None

        async def waiter() -> None:
            nonlocal decided
            decided = await bot.wait_for_decision(approval_id, timeout_s=60)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                await approver.approvals.approve(approval_id)
        assert decided is not None and decided.status == "approved"
        # the same turn re-runs the same call: the server's default key names it
        first = await bot.execute("pay", args, turn_group_id=turn, approval_id=approval_id)
        rerun = await bot.execute("pay", args, turn_group_id=turn)
    assert first.status is CallStatus.SUCCEEDED
    assert rerun.status is CallStatus.SUCCEEDED and rerun.deduped
    assert sink.read_text() == "INV-9\n"


async def test_a_decision_made_by_another_process_ends_the_wait(server: Server) -> None:
    async with AsyncClient(server.url, server.tokens["pay-bot"], timeout=10) as bot:
        pending = await bot.execute("pay", {"invoice": "INV-12", "path": "/nonexistent"})
        approval_id = pending.approval_id
        assert approval_id
        decided = None

        async def waiter() -> None:
            nonlocal decided
            decided = await bot.wait_for_decision(approval_id, timeout_s=60)

        def deny_elsewhere() -> None:  # not through the server: only its store sees it
            person = Principal(name="ops", tenant_id="default",
                               roles=frozenset({Role.APPROVER}))
            with Gateway.open(server.db, recover=False) as gw:
                gw.approvals.deny(approval_id, person, note="elsewhere")

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                await anyio.to_thread.run_sync(deny_elsewhere)
    assert decided is not None and decided.status == "denied"
    assert decided.note == "elsewhere"


async def test_a_wait_without_a_decision_returns_the_pending_approval(server: Server) -> None:
    args = {"invoice": "INV-10", "path": str(_sink(server))}
    async with AsyncClient(server.url, server.tokens["pay-bot"], timeout=10) as bot:
        pending = await bot.execute("pay", args)
        assert pending.approval_id
        with anyio.fail_after(30):
            still = await bot.wait_for_decision(pending.approval_id, timeout_s=0.3)
    assert still.status == "pending" and not still.decided


async def test_the_agent_confirms_its_own_confirm_gate(server: Server) -> None:
    async with AsyncClient(server.url, server.tokens["careful-bot"], timeout=10) as tk:
        pending = await tk.execute("echo", {"n": 4})
        assert pending.status is CallStatus.CONFIRMATION_REQUIRED and pending.approval_id
        with pytest.raises(ApprovalRequired) as info:
            await tk.call_or_raise("echo", {"n": 4})
        assert info.value.reason == Reason.CONFIRMATION_REQUIRED
        confirmed = await tk.approvals.confirm(pending.approval_id)
        assert confirmed.status == "approved" and confirmed.kind == "confirm"
        res = await tk.call_or_raise("echo", {"n": 4}, approval_id=pending.approval_id)
    assert res.output == 4


async def test_only_who_may_read_an_approval_may_wait_for_it(server: Server) -> None:
    async with AsyncClient(server.url, server.tokens["pay-bot"], timeout=10) as bot, \
            AsyncClient(server.url, server.tokens["worker-bot"], timeout=10) as other:
        pending = await bot.execute("pay", {"invoice": "INV-11", "path": "/nonexistent"})
        assert pending.approval_id
        assert (await bot.approvals.wait(pending.approval_id, timeout_s=0)).status == "pending"
        with pytest.raises(RequestRefused) as info:
            await other.wait_for_decision(pending.approval_id, timeout_s=1)
    assert info.value.reason == Reason.NOT_FOUND and info.value.status_code == 404


def test_the_server_caps_one_wait_at_30_seconds(server: Server) -> None:
    auth = {"Authorization": f"Bearer {server.tokens['approver']}"}
    res = httpx.get(f"{server.url}/approvals/any/wait", params={"timeout_s": 31},
                    headers=auth, timeout=10)
    assert res.status_code == 422 and res.json()["error"]["reason"] == "invalid_arguments"


async def test_the_async_face_refuses_like_the_sync_one(server: Server) -> None:
    async with AsyncClient(server.url, server.tokens["worker-bot"], timeout=10) as tk:
        denied = await tk.execute("pay", {"invoice": "X", "path": "/nonexistent"})
        listed = await tk.calls.list()
    assert denied.status is CallStatus.DENIED and denied.reason is Reason.TOOL_NOT_ENABLED
    assert all(o.agent == "worker-bot" for o in listed)
