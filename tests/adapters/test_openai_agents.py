"""The OpenAI Agents SDK adapter in a real agent loop (issue 9): an SDK ``Agent`` run by the
``Runner`` and driven by a scripted ``Model`` over an in-process gateway — allowed, denied,
approve-gated (paused, approved by an approver, resumed, executed once), rejected, re-run,
malformed, and the paused run kept as ``RunState`` JSON.

``lookup`` is pure and allowed; ``transfer`` is irreversible and high risk, which profile
``p`` gates with ``approve`` — and with ``deny`` once an adjuster raises an amount over 1000
to critical; ``post_note`` is irreversible and allowed; ``send_email`` is previewed first;
``deploy`` requires confirmation. Executions are counted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import (
    AgentsException,
    FunctionTool,
    Model,
    ModelResponse,
    Runner,
    RunResult,
    RunState,
    Usage,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from toolkeeper import (
    ApprovalStatus,
    Gateway,
    OperationRefused,
    Principal,
    Reason,
    Role,
)
from toolkeeper.adapters.openai_agents import (
    Reject,
    build_async,
    pending_approvals,
    resolve_interruptions,
)
from toolkeeper.errors import UserError
from toolkeeper.toolbox import Toolbox, build_tools

ALICE = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))
TRANSFER_50 = ("transfer", {"account": "acme", "amount": 50}, "c1")


class Script(Model):
    """A model that makes ``calls`` (name, arguments, call id) on its first turn, then
    answers with what each call returned, as JSON ``{call_id: output}``."""

    def __init__(self, calls: Sequence[tuple[str, Any, str]]) -> None:
        self.calls = calls
        self.seen_tools: list[Any] = []
        self.turns = 0

    def respond(self, items: Any, tools: list[Any]) -> list[Any]:
        self.turns += 1
        self.seen_tools[:] = tools
        outputs = {i["call_id"]: i["output"] for i in (items if isinstance(items, list) else [])
                   if isinstance(i, dict) and i.get("type") == "function_call_output"}
        if outputs:
            return [assistant_message(json.dumps(outputs))]
        return [function_call(name, args, call_id=cid) for name, args, cid in self.calls]

    async def get_response(self, system_instructions: str | None, input: Any,
                           model_settings: Any, tools: list[Any], output_schema: Any,
                           handoffs: list[Any], tracing: Any, **_: Any) -> ModelResponse:
        return ModelResponse(output=self.respond(input, tools), usage=Usage(),
                             response_id=None)

    async def stream_response(self, system_instructions: str | None, input: Any,
                              model_settings: Any, tools: list[Any], output_schema: Any,
                              handoffs: list[Any], tracing: Any,
                              **kw: Any) -> AsyncIterator[Any]:
        once = ScriptedModel([self.respond(input, tools)])
        async for event in once.stream_response(system_instructions, input, model_settings,
                                                tools, output_schema, handoffs, tracing, **kw):
            yield event

    def agent(self, tools: list[FunctionTool]) -> SdkAgent[Any]:
        return SdkAgent(name="bot", instructions="use the tools", model=self, tools=tools)


def said(result: RunResult) -> dict[str, Any]:
    """What the scripted model was told, by call id (JSON outputs parsed)."""
    told: dict[str, Any] = json.loads(result.final_output)
    return {k: json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v
            for k, v in told.items()}


@pytest.fixture(autouse=True)
def _no_trace_export() -> None:
    set_tracing_disabled(True)  # offline: the SDK would try to upload its traces


@pytest.fixture
def tools(box: Toolbox) -> list[FunctionTool]:
    """Built from synchronous code: ``build_tools`` is the one entry point."""
    built: list[FunctionTool] = build_tools(box, framework="openai_agents")
    return built


async def paused(script: Script, tools: list[FunctionTool]) -> tuple[SdkAgent[Any], RunResult]:
    agent = script.agent(tools)
    first = await Runner.run(agent, "go", context={})
    assert [i.call_id for i in first.interruptions] == [c[2] for c in script.calls]
    return agent, first


async def test_tools_are_the_enabled_actions_with_their_schemas_unchanged(
        box: Toolbox, tools: list[FunctionTool]) -> None:
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1")])
    await Runner.run(script.agent(tools), "weather?")
    seen = {t.name: t.params_json_schema for t in script.seen_tools}
    enabled = {info.name: info.input_schemas["run"] for info in await box.enabled()}
    assert seen == enabled and set(seen) == {"lookup", "transfer", "post_note",
                                                 "send_email", "deploy"}
    assert all(t.strict_json_schema is False for t in script.seen_tools)
    assert [t.name for t in await build_async(box)] == [t.name for t in tools]


async def test_an_allowed_call_returns_its_output_to_the_model(
        gw: Gateway, tools: list[FunctionTool]) -> None:
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1")])
    run = await Runner.run(script.agent(tools), "weather?", context={})
    assert run.interruptions == []
    assert said(run) == {"c1": {"city": "Oslo", "sky": "clear"}}
    (outcome,) = gw.calls.list("default")
    assert outcome.turn_group_id == run.context_wrapper.context["toolkeeper"]["run_id"]


async def test_a_denied_call_reaches_the_model_as_its_reason(
        tools: list[FunctionTool], counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 5000}, "c1")])
    run = await Runner.run(script.agent(tools), "pay acme 5000")
    assert run.interruptions == []
    told = said(run)["c1"]
    assert (told["status"], told["reason"], told["tool"]) == ("denied", "gate_denied",
                                                             "transfer")
    assert counts == {}


async def test_an_approve_gate_pauses_and_the_approved_call_runs_once(
        gw: Gateway, tools: list[FunctionTool], counts: dict[str, int]) -> None:
    script = Script(calls=[TRANSFER_50])
    agent, first = await paused(script, tools)
    asks = pending_approvals(first)
    assert (asks["c1"]["kind"], asks["c1"]["tool"], asks["c1"]["arguments"]) == (
        "approve", "transfer", {"account": "acme", "amount": 50})
    approval_id = asks["c1"]["approval_id"]
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.PENDING
    assert counts == {}

    state = await resolve_interruptions(first, {"c1": True}, approver=ALICE)
    snapshot = state.to_json()
    resumed = await Runner.run(agent, state)
    assert resumed.interruptions == []
    assert said(resumed) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}
    record = gw.store.approvals.get(approval_id)
    assert record is not None and record.status is ApprovalStatus.CONSUMED
    assert record.decided_by == "alice"
    (outcome,) = [o for o in gw.calls.list("default") if o.tool == "transfer"]
    run_id = first.context_wrapper.context["toolkeeper"]["run_id"]
    assert outcome.turn_group_id == asks["c1"]["turn_group_id"] == run_id
    assert outcome.key.endswith(f"openai-agents:{run_id}:c1")

    # the resumed run retried from its snapshot (a crash, a redelivered job): deduped
    again = await Runner.run(agent, await RunState.from_json(agent, snapshot))
    assert said(again) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


async def test_a_rejected_call_tells_the_model_and_never_runs(
        gw: Gateway, tools: list[FunctionTool], counts: dict[str, int]) -> None:
    agent, first = await paused(Script(calls=[TRANSFER_50]), tools)
    approval_id = pending_approvals(first)["c1"]["approval_id"]
    state = await resolve_interruptions(first, {"c1": Reject("not before the audit")},
                                        approver=ALICE)
    resumed = await Runner.run(agent, state)
    told = said(resumed)["c1"]
    assert (told["status"], told["reason"], told["tool"]) == ("denied", "approval_denied",
                                                             "transfer")
    assert "not before the audit" in told["message"]
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.DENIED
    assert counts == {}


async def test_the_paused_run_survives_its_json_snapshot(
        gw: Gateway, tools: list[FunctionTool], counts: dict[str, int]) -> None:
    """Paused in one process, kept as JSON, decided and resumed in another."""
    script = Script(calls=[TRANSFER_50, ("lookup", {"city": "Oslo"}, "c2")])
    agent = script.agent(tools)
    first = await Runner.run(agent, "go", context={})
    assert [i.call_id for i in first.interruptions] == ["c1"]
    stored = json.dumps(first.to_state().to_json())

    restored = await RunState.from_json(agent, json.loads(stored))
    asks = pending_approvals(restored)
    assert list(asks) == ["c1"] and asks["c1"]["approval_id"]
    state = await resolve_interruptions(restored, {"c1": True}, approver=ALICE)
    resumed = await Runner.run(agent, state)
    assert said(resumed) == {"c1": {"transferred": 50, "to": "acme"},
                             "c2": {"city": "Oslo", "sky": "clear"}}
    assert counts == {"transfer": 1}
    turn_groups = {o.turn_group_id for o in gw.calls.list("default")}
    assert turn_groups == {first.context_wrapper.context["toolkeeper"]["run_id"]}


async def test_the_agents_own_credential_cannot_approve(
        gw: Gateway, tools: list[FunctionTool], counts: dict[str, int]) -> None:
    _, first = await paused(Script(calls=[TRANSFER_50]), tools)
    _, agent_token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    with pytest.raises(OperationRefused) as refused:
        await resolve_interruptions(first, {"c1": True}, approver=agent_token)
    assert refused.value.reason == Reason.APPROVER_NOT_ALLOWED
    approval_id = pending_approvals(first)["c1"]["approval_id"]
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.PENDING
    assert counts == {}


async def test_approving_only_in_the_sdk_does_not_run_the_call(
        tools: list[FunctionTool], counts: dict[str, int]) -> None:
    """An application that skips resolve_interruptions has not told toolkeeper."""
    agent, first = await paused(Script(calls=[TRANSFER_50]), tools)
    state = first.to_state()
    state.approve(first.interruptions[0])
    resumed = await Runner.run(agent, state)
    assert said(resumed)["c1"]["status"] == "approval_required"
    assert counts == {}


async def test_a_rerun_dedupes_an_executed_call(
        tools: list[FunctionTool], counts: dict[str, int]) -> None:
    """The same run (same context, same tool call ids) retried: one note, one answer."""
    script = Script(calls=[("post_note", {"text": "shipped"}, "c1")])
    agent = script.agent(tools)
    context: dict[str, Any] = {}
    run = await Runner.run(agent, "tell the team", context=context)
    retry = await Runner.run(agent, "tell the team", context=context)
    assert said(run) == said(retry) == {"c1": {"posted": "shipped"}}
    assert counts == {"post_note": 1}


@pytest.mark.parametrize(("name", "args"), [
    ("transfer", "{not json"), ("transfer", "[1, 2]"), ("lookup", {"city": 5}),
    ("lookup", {"town": "Oslo"}), ("transfer", {"account": "acme", "amount": "lots"})])
async def test_malformed_arguments_come_back_as_invalid_arguments(
        tools: list[FunctionTool], counts: dict[str, int], name: str, args: Any) -> None:
    agent = Script(calls=[(name, args, "c1")]).agent(tools)
    run = await Runner.run(agent, "go", context={})
    if run.interruptions:  # the SDK pauses on arguments it cannot parse: toolkeeper judges
        assert pending_approvals(run) == {}
        run = await Runner.run(agent, await resolve_interruptions(run, {}, approver=ALICE))
    told = said(run)["c1"]
    assert (told["status"], told["reason"]) == ("denied", "invalid_arguments")
    pointers = [e["pointer"] for e in told["details"]["errors"]]
    assert pointers and all(p == "" or p.startswith("/") for p in pointers)
    assert counts == {}


async def test_a_previewed_call_shows_the_preview_and_runs_once_approved(
        tools: list[FunctionTool], counts: dict[str, int]) -> None:
    script = Script(calls=[("send_email", {"to": "ops@example.com", "body": "hi"}, "c1")])
    agent, first = await paused(script, tools)
    ask = pending_approvals(first)["c1"]
    assert (ask["kind"], ask["preview"]["summary"]) == ("preview", "email ops@example.com: hi")
    state = await resolve_interruptions(first, {"c1": True}, approver=ALICE)
    snapshot = state.to_json()
    for resume in (state, await RunState.from_json(agent, snapshot)):
        resumed = await Runner.run(agent, resume)
        assert said(resumed) == {"c1": {"sent_to": "ops@example.com"}}
    assert counts == {"send_email": 1}


async def test_a_confirm_gate_is_confirmed_and_runs_once(
        gw: Gateway, tools: list[FunctionTool], counts: dict[str, int]) -> None:
    agent, first = await paused(Script(calls=[("deploy", {"service": "api"}, "c1")]), tools)
    ask = pending_approvals(first)["c1"]
    assert (ask["kind"], ask["status"]) == ("confirm", "confirmation_required")
    resumed = await Runner.run(agent, await resolve_interruptions(first, {"c1": True},
                                                                  approver=ALICE))
    assert said(resumed) == {"c1": {"deployed": "api"}}
    assert counts == {"deploy": 1}
    record = gw.store.approvals.get(ask["approval_id"])
    assert record is not None and record.status is ApprovalStatus.CONSUMED


async def test_undecided_calls_stay_paused(tools: list[FunctionTool],
                                           counts: dict[str, int]) -> None:
    agent, first = await paused(Script(calls=[TRANSFER_50]), tools)
    state = await resolve_interruptions(first, {}, approver=ALICE)
    again = await Runner.run(agent, state)
    assert [i.call_id for i in again.interruptions] == ["c1"]
    assert pending_approvals(again)["c1"]["approval_id"] == \
        pending_approvals(first)["c1"]["approval_id"]
    assert counts == {}


async def test_a_context_that_cannot_hold_the_approvals_is_refused_clearly(
        tools: list[FunctionTool], counts: dict[str, int]) -> None:
    agent = Script(calls=[TRANSFER_50]).agent(tools)
    with pytest.raises(AgentsException, match="context to be a mapping") as raised:
        await Runner.run(agent, "go", context=object())
    assert isinstance(raised.value.__cause__, UserError)
    assert counts == {}
