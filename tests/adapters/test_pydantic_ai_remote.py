"""The Pydantic AI adapter against a real ``toolkeeper serve`` through the client (issue 9
item 4): the agent loop of ``test_pydantic_ai`` (its scripted ``FunctionModel``) over a
Toolbox built from ``AsyncClient``/``Client`` — allowed, denied, approve-gated (paused,
approved with the approver token, resumed, executed once), rejected, re-run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai import DeferredToolRequests, ToolDenied
from pydantic_ai.messages import ModelResponse

from tests.adapters.agent_support import Script, said
from tests.adapters.remote_support import AGENT, Remote, unique
from toolkeeper import ApprovalStatus, OperationRefused, Reason
from toolkeeper.adapters.pydantic_ai import resolve_deferred, resolve_deferred_sync
from toolkeeper.client import AsyncClient, Client
from toolkeeper.toolbox import build_tools

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`


@pytest.fixture
async def tk(remote: Remote) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(remote.url, remote.agent_token, timeout=10) as client:
        yield client


async def test_allowed_and_denied_calls_reach_the_model(remote: Remote,
                                                        tk: AsyncClient) -> None:
    account = unique("acct")
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1"),
                           ("transfer", {"account": account, "amount": 5000}, "c2")])
    toolset = build_tools(tk, agent=AGENT, framework="pydantic_ai")
    run = await script.agent(toolset).run("weather, and pay 5000")
    told = said(run.output)
    assert told["c1"] == {"city": "Oslo", "sky": "clear"}
    assert (told["c2"]["status"], told["c2"]["reason"], told["c2"]["tool"]) == (
        "denied", "gate_denied", "transfer")
    assert script.retries == [] and remote.executions("transfer", account) == 0


async def test_an_approved_call_runs_once_and_a_resumed_retry_dedupes(
        remote: Remote, tk: AsyncClient) -> None:
    account = unique("acct")
    agent = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")]).agent(
        build_tools(tk, agent=AGENT, framework="pydantic_ai"))
    first = await agent.run("pay 50")
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    meta = requests.metadata["c1"]
    assert (meta["kind"], meta["tool"], meta["arguments"]) == (
        "approve", "transfer", {"account": account, "amount": 50})
    assert remote.status(meta["approval_id"]) is ApprovalStatus.PENDING
    assert remote.executions("transfer", account) == 0

    toolbox = tk.toolbox(AGENT)
    results = await resolve_deferred(toolbox, requests, {"c1": True},
                                     approver=remote.approver_token)
    for _ in range(2):  # resumed, then the resume retried: one transfer
        resumed = await agent.run(message_history=first.all_messages(),
                                  deferred_tool_results=results)
        assert said(resumed.output) == {"c1": {"transferred": 50, "to": account}}
    assert remote.executions("transfer", account) == 1
    assert remote.status(meta["approval_id"]) is ApprovalStatus.CONSUMED
    # the call ran in the turn of the run that asked for it, under its tool call's key
    outcome = remote.outcome_of(meta["approval_id"])
    assert outcome.turn_group_id == meta["turn_group_id"] == first.run_id
    assert outcome.idempotency_key.endswith(f"pydantic-ai:{first.conversation_id}:c1")


async def test_a_rejected_call_never_runs_and_the_agent_cannot_approve(
        remote: Remote, tk: AsyncClient) -> None:
    account = unique("acct")
    agent = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")]).agent(
        build_tools(tk, agent=AGENT, framework="pydantic_ai"))
    first = await agent.run("pay 50")
    assert isinstance(first.output, DeferredToolRequests)
    approval_id = first.output.metadata["c1"]["approval_id"]
    toolbox = tk.toolbox(AGENT)
    with pytest.raises(OperationRefused) as refused:
        await resolve_deferred(toolbox, first.output, {"c1": True},
                               approver=remote.agent_token)
    assert refused.value.reason == Reason.APPROVER_NOT_ALLOWED
    assert remote.status(approval_id) is ApprovalStatus.PENDING

    results = await resolve_deferred(toolbox, first.output,
                                     {"c1": ToolDenied("not before the audit")},
                                     approver=remote.approver_token)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    told = said(resumed.output)["c1"]
    assert (told["status"], told["reason"]) == ("denied", "approval_denied")
    assert "not before the audit" in told["message"]
    assert remote.status(approval_id) is ApprovalStatus.DENIED
    assert remote.executions("transfer", account) == 0


async def test_a_retried_run_dedupes_an_executed_call(remote: Remote,
                                                      tk: AsyncClient) -> None:
    note = unique("note")
    agent = Script(calls=[("post_note", {"text": note}, "c1")]).agent(
        build_tools(tk, agent=AGENT, framework="pydantic_ai"))
    run = await agent.run("tell the team")
    assert said(run.output) == {"c1": {"posted": note}}
    history = run.all_messages()
    upto = max(i for i, m in enumerate(history) if isinstance(m, ModelResponse)
               and any(getattr(p, "tool_call_id", None) == "c1" for p in m.parts))
    retry = await agent.run(message_history=history[:upto + 1])
    assert said(retry.output) == {"c1": {"posted": note}}
    assert remote.executions("post_note", note) == 1


async def test_a_preview_and_a_confirmation_reach_the_human_and_run_once(
        remote: Remote, tk: AsyncClient) -> None:
    to, service = unique("ops"), unique("svc")
    agent = Script(calls=[("send_email", {"to": to, "body": "hi"}, "c1"),
                          ("deploy", {"service": service}, "c2")]).agent(
        build_tools(tk, agent=AGENT, framework="pydantic_ai"))
    first = await agent.run("mail ops, then deploy")
    assert isinstance(first.output, DeferredToolRequests)
    email, deploy = first.output.metadata["c1"], first.output.metadata["c2"]
    assert (email["kind"], email["preview"]["summary"]) == ("preview", f"email {to}: hi")
    assert (deploy["kind"], deploy["status"]) == ("confirm", "confirmation_required")
    results = await resolve_deferred(tk.toolbox(AGENT), first.output,
                                     {"c1": True, "c2": True},
                                     approver=remote.approver_token)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    assert said(resumed.output) == {"c1": {"sent_to": to}, "c2": {"deployed": service}}
    assert (remote.executions("send_email", to), remote.executions("deploy", service)) == (1, 1)


def test_the_flow_from_synchronous_code_over_the_sync_client(remote: Remote) -> None:
    account = unique("acct")
    with Client(remote.url, remote.agent_token, timeout=10) as tk:
        toolbox = tk.toolbox(AGENT)
        toolset: Any = build_tools(toolbox, framework="pydantic_ai")
        agent = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")]).agent(
            toolset)
        first = agent.run_sync("pay 50")
        assert isinstance(first.output, DeferredToolRequests)
        results = resolve_deferred_sync(toolset, first.output, {"c1": True},
                                        approver=remote.approver_token)
        resumed = agent.run_sync(message_history=first.all_messages(),
                                 deferred_tool_results=results)
    assert said(resumed.output) == {"c1": {"transferred": 50, "to": account}}
    assert remote.executions("transfer", account) == 1
