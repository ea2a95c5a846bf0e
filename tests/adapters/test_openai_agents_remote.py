"""The OpenAI Agents SDK adapter against a real ``toolkeeper serve`` through the client
(issue 9 item 4): the ``Runner`` loop of ``test_openai_agents`` (its scripted ``Model``) over
tools built from ``Client``/``AsyncClient`` — allowed, denied, approve-gated (paused,
approved with the approver token, resumed, executed once, and once more from its JSON
snapshot: deduped), rejected, re-run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from agents import (
    FunctionTool,
    Runner,
    RunState,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    set_tracing_disabled,
    tool_input_guardrail,
)

from tests.adapters.remote_support import AGENT, Remote, unique
from tests.adapters.test_openai_agents import Script, said
from toolkeeper import ApprovalStatus
from toolkeeper.adapters.openai_agents import (
    Reject,
    build_async,
    pending_approvals,
    resolve_interruptions,
)
from toolkeeper.client import AsyncClient, Client
from toolkeeper.errors import UserError
from toolkeeper.toolbox import build_tools

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`


@pytest.fixture(autouse=True)
def _no_trace_export() -> None:
    set_tracing_disabled(True)  # offline: the SDK would try to upload its traces


@pytest.fixture
def tk(remote: Remote) -> Iterator[Client]:
    with Client(remote.url, remote.agent_token, timeout=10) as client:
        yield client


@pytest.fixture
def tools(tk: Client) -> list[FunctionTool]:
    """Built from synchronous code over the blocking client."""
    built: list[FunctionTool] = build_tools(tk, agent=AGENT, framework="openai_agents")
    return built


@pytest.fixture
async def atk(remote: Remote) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(remote.url, remote.agent_token, timeout=10) as client:
        yield client


async def test_allowed_and_denied_calls_reach_the_model(
        remote: Remote, tools: list[FunctionTool]) -> None:
    account = unique("acct")
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1"),
                           ("transfer", {"account": account, "amount": 5000}, "c2")])
    run = await Runner.run(script.agent(tools), "weather, and pay 5000", context={})
    assert run.interruptions == []
    told = said(run)
    assert told["c1"] == {"city": "Oslo", "sky": "clear"}
    assert (told["c2"]["status"], told["c2"]["reason"], told["c2"]["tool"]) == (
        "denied", "gate_denied", "transfer")
    assert remote.executions("transfer", account) == 0


async def test_an_approved_call_runs_once_and_its_snapshot_dedupes(
        remote: Remote, atk: AsyncClient) -> None:
    account = unique("acct")
    tools = await build_async(atk.toolbox(AGENT))  # the async client's face
    agent = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")]).agent(tools)
    first = await Runner.run(agent, "pay 50", context={})
    assert [i.call_id for i in first.interruptions] == ["c1"]
    ask = pending_approvals(first)["c1"]
    assert (ask["kind"], ask["tool"], ask["arguments"]) == (
        "approve", "transfer", {"account": account, "amount": 50})
    assert remote.status(ask["approval_id"]) is ApprovalStatus.PENDING
    assert remote.executions("transfer", account) == 0

    state = await resolve_interruptions(first, {"c1": True}, approver=remote.approver_token)
    snapshot = state.to_json()
    resumed = await Runner.run(agent, state)
    assert said(resumed) == {"c1": {"transferred": 50, "to": account}}
    again = await Runner.run(agent, await RunState.from_json(agent, snapshot))
    assert said(again) == {"c1": {"transferred": 50, "to": account}}
    assert remote.executions("transfer", account) == 1
    assert remote.status(ask["approval_id"]) is ApprovalStatus.CONSUMED
    outcome = remote.outcome_of(ask["approval_id"])
    run_id = first.context_wrapper.context["toolkeeper"]["run_id"]
    assert outcome.turn_group_id == ask["turn_group_id"] == run_id
    assert outcome.idempotency_key.endswith(f"openai-agents:{run_id}:c1")


async def test_a_rejected_call_tells_the_model_and_never_runs(
        remote: Remote, tools: list[FunctionTool]) -> None:
    account = unique("acct")
    agent = Script(calls=[("transfer", {"account": account, "amount": 50}, "c1")]).agent(tools)
    first = await Runner.run(agent, "pay 50", context={})
    approval_id = pending_approvals(first)["c1"]["approval_id"]
    state = await resolve_interruptions(first, {"c1": Reject("not before the audit")},
                                        approver=remote.approver_token)
    told = said(await Runner.run(agent, state))["c1"]
    assert (told["status"], told["reason"]) == ("denied", "approval_denied")
    assert "not before the audit" in told["message"]
    assert remote.status(approval_id) is ApprovalStatus.DENIED
    assert remote.executions("transfer", account) == 0


async def test_a_rerun_dedupes_an_executed_call(remote: Remote,
                                                tools: list[FunctionTool]) -> None:
    note = unique("note")
    agent = Script(calls=[("post_note", {"text": note}, "c1")]).agent(tools)
    context: dict[str, object] = {}
    run = await Runner.run(agent, "tell the team", context=context)
    retry = await Runner.run(agent, "tell the team", context=context)
    assert said(run) == said(retry) == {"c1": {"posted": note}}
    assert remote.executions("post_note", note) == 1


async def test_a_guardrail_blocks_a_call_before_the_server_runs_it(
        remote: Remote, tools: list[FunctionTool]) -> None:
    """Issue 29 item 4 over REST: ``needs_approval`` asks ``/tools/check``; the call is sent
    to ``/tools/execute`` only after the SDK's tool input guardrails."""
    note = unique("note")
    executed_when_checked: list[int] = []

    @tool_input_guardrail
    def no_notes(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        executed_when_checked.append(remote.executions("post_note", note))
        return ToolGuardrailFunctionOutput.reject_content("blocked by policy")

    for t in tools:
        t.tool_input_guardrails = [no_notes]
    agent = Script(calls=[("post_note", {"text": note}, "c1")]).agent(tools)
    run = await Runner.run(agent, "tell the team", context={})
    assert said(run) == {"c1": "blocked by policy"}
    assert executed_when_checked == [0] and remote.executions("post_note", note) == 0


async def test_tools_of_an_async_client_are_built_with_build_async(atk: AsyncClient) -> None:
    """An ``AsyncClient`` has no blocking face: the blocking builder says which to use."""
    with pytest.raises(UserError, match="build_async"):
        build_tools(atk, agent=AGENT, framework="openai_agents")
    assert {t.name for t in await build_async(atk.toolbox(AGENT))} == {
        "lookup", "transfer", "post_note", "send_email", "deploy"}
