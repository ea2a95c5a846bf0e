"""The Toolbox over a real ``toolkeeper serve`` (``RemoteBackend`` over the client; seed 004,
issue 9 item 2): the same answers as the in-process backend over the same store, and the
same call flows — allowed, denied, invalid arguments, approval by an approver token and
exactly one execution, deny, turns and supersede, a batch's ``critical`` flag, waiting for
a decision."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from tests.client.conftest import Server
from toolkeeper import Gateway
from toolkeeper.client import AsyncClient, Client, RemoteBackend
from toolkeeper.errors import OperationRefused, UserError
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import ApprovalStatus, CallStatus, Risk, Role, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.toolbox import InProcessBackend, Toolbox, build_tools

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`


def _sink(server: Server) -> Path:
    return server.work / f"box-{uuid.uuid4().hex}.txt"


def _client(server: Server, agent: str) -> AsyncClient:
    return AsyncClient(server.url, server.tokens[agent], timeout=10)


async def test_listings_and_metadata_equal_the_in_process_backends(server: Server) -> None:
    async with _client(server, "box-bot") as tk:
        remote = tk.toolbox("box-bot")
        assert isinstance(remote.backend, RemoteBackend)
        enabled, unavailable = await remote.enabled(), await remote.unavailable()
        metas = {name: await remote.metadata(name)
                 for name in ("ledger", "wipe", "echo", "vault", "no_such_tool")}
    with Gateway.open(server.db, recover=False) as gw:
        local = Toolbox(InProcessBackend(gw), agent="box-bot")
        assert enabled == await local.enabled()
        assert unavailable == await local.unavailable()
        assert metas == {name: await local.metadata(name) for name in metas}
    tools = {t.name: t for t in enabled}
    assert set(tools) == {"echo", "ledger", "wipe"}
    assert tools["ledger"].names == {"book": "ledger_book", "unbook": "ledger_unbook"}
    assert tools["ledger"].action_descriptions["book"] == "Book an entry."
    assert tools["echo"].names == {"run": "echo"} and tools["ledger"].categories == ("finance",)
    (vault,) = unavailable
    assert (vault.name, vault.why_unavailable, vault.missing_scopes) == (
        "vault", "scope_missing", ("vault",))
    ledger, wipe = metas["ledger"], metas["wipe"]
    assert ledger is not None and wipe is not None
    assert ledger.side_effects == {"book": SideEffect.COMPENSATABLE,
                                   "unbook": SideEffect.IDEMPOTENT}
    assert ledger.risks == {"book": Risk.LOW, "unbook": Risk.LOW}
    assert ledger.compensation["book"].action == "unbook"
    assert wipe.requires_confirmation and wipe.confirmation_prompt == "Really wipe?"
    assert wipe.categories == ("danger",) and wipe.is_irreversible
    assert metas["vault"] is None and metas["no_such_tool"] is None


async def test_execute_allowed_denied_and_invalid_arguments(server: Server) -> None:
    async with _client(server, "box-bot") as tk:
        box = tk.toolbox("box-bot")
        ok = await box.execute("echo", {"n": 3})
        denied = await box.execute("stamp", {"mark": "x", "path": "/nonexistent"})
        invalid = await box.execute("echo", {"n": "three"})
    assert ok.status is CallStatus.SUCCEEDED and ok.output == 3
    assert denied.status is CallStatus.DENIED and denied.reason is Reason.TOOL_NOT_ENABLED
    assert invalid.status is CallStatus.DENIED and invalid.reason is Reason.INVALID_ARGUMENTS
    assert "/n" in str(invalid.details)


async def test_an_approver_token_approves_and_the_same_call_runs_once(server: Server) -> None:
    sink, key = _sink(server), f"key-{uuid.uuid4().hex}"
    args = {"invoice": "INV-B1", "path": str(sink)}
    async with _client(server, "pay-bot") as tk:
        box = tk.toolbox("pay-bot", approver_token=server.tokens["approver"])
        pending = await box.execute("pay", args, idempotency_key=key)
        assert pending.status is CallStatus.APPROVAL_REQUIRED and pending.approval_id
        seen = await box.approval(pending.approval_id)
        assert (seen.status, seen.tool, seen.agent) == (ApprovalStatus.PENDING, "pay", "pay-bot")
        approved = await box.approve(pending.approval_id, note="fine")
        first = await box.execute("pay", args, idempotency_key=key,
                                  approval_id=pending.approval_id)
        again = await box.execute("pay", args, idempotency_key=key)
    assert approved.status is ApprovalStatus.APPROVED and approved.decided_by
    assert approved.note == "fine" and approved.decided_by != "pay-bot"
    assert first.status is CallStatus.SUCCEEDED and not first.deduped
    assert again.status is CallStatus.SUCCEEDED and again.deduped
    assert sink.read_text() == "INV-B1\n"


async def test_deny_with_an_approver_token_given_per_decision(server: Server) -> None:
    sink = _sink(server)
    args = {"invoice": "INV-B2", "path": str(sink)}
    async with _client(server, "pay-bot") as tk:
        box = tk.toolbox("pay-bot")  # no default approver
        pending = await box.execute("pay", args)
        assert pending.approval_id
        with pytest.raises(OperationRefused) as nobody:
            await box.approve(pending.approval_id)
        with pytest.raises(UserError):  # a Principal is for in-process decisions only
            await box.approve(pending.approval_id, by=Principal(
                name="alice", tenant_id="default", roles=frozenset({Role.APPROVER})))
        denied = await box.deny(pending.approval_id, by=server.tokens["approver"], note="no")
        after = await box.execute("pay", args, approval_id=pending.approval_id)
    assert nobody.value.reason == Reason.FORBIDDEN and "approver" in str(nobody.value)
    assert denied.status is ApprovalStatus.DENIED and denied.note == "no"
    assert after.status is CallStatus.DENIED and not sink.exists()


async def test_a_superseded_turn_stops_its_later_irreversible_calls(server: Server) -> None:
    sink = _sink(server)
    async with _client(server, "worker-bot") as tk:
        box = tk.toolbox("worker-bot")
        async with box.turn() as turn:
            first = await box.execute("stamp", {"mark": "a", "path": str(sink)})
            assert await turn.supersede()
            late = await box.execute("stamp", {"mark": "b", "path": str(sink)})
            pure = await turn.execute("echo", {"n": 1})
    assert first.status is CallStatus.SUCCEEDED
    assert late.status is CallStatus.SUPERSEDED and late.reason is Reason.SUPERSEDED
    assert pure.status is CallStatus.SUCCEEDED and sink.read_text() == "a\n"


async def test_a_batch_follows_each_calls_critical_flag(server: Server) -> None:
    sink = _sink(server)

    def book(mark: str) -> dict[str, object]:
        return {"tool": "ledger", "action": "book", "arguments": {"mark": mark,
                                                                  "path": str(sink)}}

    async with _client(server, "batch-bot") as tk:
        box = tk.toolbox("batch-bot")
        unflagged = await box.execute_batch(
            [book("a"), {"tool": "broken", "arguments": {"x": 1}}, book("b")])
        flagged = await box.execute_batch(
            [book("c"), {"tool": "broken", "arguments": {"x": 1}, "critical": True},
             book("d")])
    assert [r.status for r in unflagged] == [CallStatus.SUCCEEDED, CallStatus.FAILED,
                                             CallStatus.SUCCEEDED]
    assert [r.status for r in flagged] == [CallStatus.COMPENSATED, CallStatus.FAILED,
                                           CallStatus.DENIED]
    assert flagged[2].reason is Reason.BATCH_ABORTED
    assert sink.read_text() == "a\nb\nc\n-c\n"


async def test_wait_for_decision_returns_when_the_approver_decides(server: Server) -> None:
    async with _client(server, "pay-bot") as tk:
        box = tk.toolbox("pay-bot", approver_token=server.tokens["approver"])
        pending = await box.execute("pay", {"invoice": "INV-B3", "path": "/nonexistent"})
        approval_id = pending.approval_id
        assert approval_id
        still = await box.wait_for_decision(approval_id, timeout_s=0.2)
        decided = None

        async def waiter() -> None:
            nonlocal decided
            decided = await box.wait_for_decision(approval_id, timeout_s=60)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                await box.deny(approval_id, note="later")
    assert still.status is ApprovalStatus.PENDING
    assert decided is not None and decided.status is ApprovalStatus.DENIED
    assert decided.note == "later"


def test_the_sync_client_gives_a_blocking_toolbox(server: Server) -> None:
    sink = _sink(server)
    with Client(server.url, server.tokens["pay-bot"], timeout=10) as tk:
        box = tk.toolbox("pay-bot", approver_token=server.tokens["approver"])
        assert [t.name for t in box.enabled_sync()] == ["pay"]
        args = {"invoice": "INV-B4", "path": str(sink)}
        with box.turn() as turn:
            pending = turn.execute_sync("pay", args)
            assert pending.approval_id
            assert box.approve_sync(pending.approval_id).status is ApprovalStatus.APPROVED
            done = turn.execute_sync("pay", args, approval_id=pending.approval_id)
            rerun = turn.execute_sync("pay", args)
    assert done.status is CallStatus.SUCCEEDED and rerun.deduped
    assert sink.read_text() == "INV-B4\n"


async def test_build_tools_takes_a_client(server: Server) -> None:
    async with _client(server, "worker-bot") as tk:
        with pytest.raises(UserError) as err:
            build_tools(tk, agent="worker-bot", framework="nope")
        with pytest.raises(UserError) as no_agent:
            build_tools(tk, framework="pydantic_ai")
    assert "unknown framework 'nope'" in str(err.value)
    assert "pydantic_ai" in str(err.value) and "langchain" in str(err.value)
    assert "agent=" in str(no_agent.value)


async def test_supersede_decisions_are_recorded_over_rest_and_the_turn_follows(
        server: Server) -> None:
    """Seed 004 §10 over a real server: a queue decision moves the turn to a new turn
    group (the stamp runs again), a supersede decision stops it; both are in the audit."""
    sink = _sink(server)
    turn = f"turn-{uuid.uuid4().hex}"
    async with _client(server, "worker-bot") as tk:
        box = tk.toolbox("worker-bot")
        first = await box.execute("stamp", {"mark": "a", "path": str(sink)},
                                  turn_group_id=turn)
        queued = box.guard(has_pending=lambda: True, decide=lambda planned: "queue",
                           turn_group_id=turn)
        again = await queued.execute("stamp", {"mark": "a", "path": str(sink)})
        stopped = box.guard(has_pending=lambda: True, decide=lambda planned: "supersede",
                            turn_group_id=queued.turn_group_id)
        late = await stopped.execute("stamp", {"mark": "b", "path": str(sink)})
        with pytest.raises(Exception) as bad:  # queue must name its new turn group
            await tk.decide_turn(turn, "queue")
    assert first.ok and again.ok and not again.deduped and queued.turn_group_id != turn
    assert late.reason is Reason.SUPERSEDED and sink.read_text() == "a\na\n"
    assert getattr(bad.value, "reason", None) == Reason.INVALID_ARGUMENTS
    async with AsyncClient(server.url, server.tokens["admin"], timeout=10) as admin:
        events = await admin.audit.list(agent="worker-bot", types=["turn.decided"])
    mine = [e.data for e in events.events if e.data.get("turn_group_id") in (
        turn, queued.turn_group_id)]
    assert [(d["decision"], d.get("continued_as")) for d in mine] == [
        ("queue", queued.turn_group_id), ("supersede", None)]
