"""The Google ADK adapter against a real ``toolkeeper serve`` through the client (issue 29
item 3): the ADK ``Runner`` loop of ``test_google_adk`` (its scripted ``BaseLlm``) over tools
built from ``Client``/``AsyncClient`` — allowed, denied, approve-gated (ADK's confirmation
asked, approved with the approver token, resumed, executed once, the answer sent again:
nothing more), rejected, re-run; tools held by agent ``blocked``, whose profile denies
everything, and by a toolbox whose server went down (the rest of issue 29's bad input is
in ``test_deny_everything_remote``)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.adapters.adk_support import Chat, Script, asked, said
from tests.adapters.remote_support import AGENT, Remote, unique
from toolkeeper import ApprovalStatus, OperationRefused, Reason
from toolkeeper.adapters.google_adk import (
    ToolkeeperTool,
    build_async,
    pending_confirmations,
    resolve_confirmations,
    tools_of,
)
from toolkeeper.client import AsyncClient, Client
from toolkeeper.toolbox import build_tools

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`

@pytest.fixture
def tools(remote: Remote) -> Iterator[list[ToolkeeperTool]]:
    """Built from synchronous code over the blocking client."""
    with Client(remote.url, remote.agent_token, timeout=10) as client:
        yield build_tools(client, agent=AGENT, framework="google_adk")


@pytest.fixture
async def atk(remote: Remote) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(remote.url, remote.agent_token, timeout=10) as client:
        yield client


async def test_allowed_and_denied_calls_reach_the_model(
        remote: Remote, tools: list[ToolkeeperTool]) -> None:
    account = unique("acct")
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1"),
                           ("transfer", {"account": account, "amount": 5000}, "c2")])
    events = await Chat(script.agent(tools)).send("weather, and pay 5000")
    assert asked(events) == []
    told = said(events)
    assert told["c1"] == {"city": "Oslo", "sky": "clear"}
    assert (told["c2"]["status"], told["c2"]["reason"], told["c2"]["tool"]) == (
        "denied", "gate_denied", "transfer")
    assert remote.executions("transfer", account) == 0


async def test_an_approved_call_runs_once_and_its_answer_resent_runs_nothing(
        remote: Remote, atk: AsyncClient) -> None:
    account = unique("acct")
    toolbox = atk.toolbox(AGENT)
    script = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")])
    chat = Chat(script.agent(await build_async(toolbox)))  # the async client's face
    assert asked(await chat.send("pay 50")) == ["c1"]
    ask = pending_confirmations(await chat.session())["c1"]
    assert (ask["kind"], ask["tool"], ask["arguments"]) == (
        "approve", "transfer", {"account": account, "amount": 50})
    assert remote.status(ask["approval_id"]) is ApprovalStatus.PENDING
    assert remote.executions("transfer", account) == 0

    answer = await resolve_confirmations(toolbox, await chat.session(), {"c1": True},
                                         approver=remote.approver_token)
    assert said(await chat.send(answer)) == {"c1": {"transferred": 50, "to": account}}
    await chat.send(answer)
    assert remote.executions("transfer", account) == 1
    assert remote.status(ask["approval_id"]) is ApprovalStatus.CONSUMED
    assert remote.approval(ask["approval_id"]).decided_by is not None
    outcome = remote.outcome_of(ask["approval_id"])
    assert outcome.turn_group_id == ask["turn_group_id"]
    assert outcome.idempotency_key.endswith(f"google-adk:{chat.session_id}:c1")


async def test_the_agents_own_token_cannot_approve(remote: Remote, atk: AsyncClient) -> None:
    account = unique("acct")
    toolbox = atk.toolbox(AGENT)
    script = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")])
    chat = Chat(script.agent(await build_async(toolbox)))
    await chat.send("pay 50")
    ask = pending_confirmations(await chat.session())["c1"]
    with pytest.raises(OperationRefused) as refused:
        await resolve_confirmations(toolbox, await chat.session(), {"c1": True},
                                    approver=remote.agent_token)
    assert refused.value.reason == Reason.APPROVER_NOT_ALLOWED
    assert remote.status(ask["approval_id"]) is ApprovalStatus.PENDING
    assert remote.executions("transfer", account) == 0


async def test_a_rejected_call_tells_the_model_and_never_runs(
        remote: Remote, atk: AsyncClient) -> None:
    account = unique("acct")
    toolbox = atk.toolbox(AGENT)
    script = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")])
    chat = Chat(script.agent(await build_async(toolbox)))
    await chat.send("pay 50")
    ask = pending_confirmations(await chat.session())["c1"]
    answer = await resolve_confirmations(toolbox, await chat.session(), {"c1": False},
                                         approver=remote.approver_token)
    told = said(await chat.send(answer))["c1"]
    assert (told["status"], told["reason"]) == ("denied", "approval_denied")
    assert remote.status(ask["approval_id"]) is ApprovalStatus.DENIED
    assert remote.executions("transfer", account) == 0


async def test_a_rerun_dedupes_an_executed_call(remote: Remote,
                                                tools: list[ToolkeeperTool]) -> None:
    note = unique("note")
    chat = Chat(Script(calls=[("post_note", {"text": note}, "c1")]).agent(tools))
    first = await chat.send("tell the team")
    again = await chat.send("tell the team")
    assert said(first) == said(again) == {"c1": {"posted": note}}
    assert remote.executions("post_note", note) == 1


async def test_tools_held_by_an_agent_denied_everything(remote: Remote,
                                                        atk: AsyncClient) -> None:
    """Agent ``blocked`` is offered no tool; tools it holds anyway (built from another
    listing, kept from before a policy change) are refused on every call with a short
    reason, no confirmation is asked, and nothing runs."""
    async with AsyncClient(remote.url, remote.server.tokens["blocked"], timeout=10) as tk:
        box = tk.toolbox("blocked")
        assert await build_async(box) == []
        held = tools_of(await atk.toolbox(AGENT).enabled(), box)
        account, note = unique("acct"), unique("note")
        calls = [("lookup", {"city": "Oslo"}, "c1"),
                 ("transfer", {"account": account, "amount": 50}, "c2"),
                 ("post_note", {"text": note}, "c3"), ("deploy", {"service": note}, "c4")]
        events = await Chat(Script(calls=calls).agent(held)).send("go")
    assert asked(events) == []
    told = said(events)
    assert {cid: (t["status"], t["reason"]) for cid, t in told.items()} == {
        cid: ("denied", "gate_denied") for cid in ("c1", "c2", "c3", "c4")}
    assert remote.executions("transfer", account) == 0
    assert remote.executions("post_note", note) == remote.executions("deploy", note) == 0


async def test_a_server_gone_down_mid_run_is_unavailable_to_the_model(
        atk: AsyncClient) -> None:
    """Tools built while the server was up; its calls now reach a closed port: the model is
    told ``unavailable`` within the client's bound, and the run goes on."""
    infos = await atk.toolbox(AGENT).enabled()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with AsyncClient(f"http://127.0.0.1:{port}", "tk_whatever", timeout=2) as down:
        tools = tools_of(infos, down.toolbox(AGENT))
        events = await Chat(Script(calls=[("lookup", {"city": "Oslo"}, "c1")]).agent(
            tools)).send("weather?")
    told = said(events)["c1"]
    assert told["reason"] == "unavailable"
