"""The Pydantic AI adapter in a real agent loop (issue 9): a Pydantic AI ``Agent`` driven by a
scripted ``FunctionModel`` over an in-process gateway — allowed, denied, approve-gated
(paused, approved by an approver, resumed, executed once), rejected, re-run, malformed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import DeferredToolRequests, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelResponse

from tests.adapters.agent_support import Script, said
from toolkeeper import ApprovalStatus, Gateway, OperationRefused, Principal, Reason, Role
from toolkeeper.adapters.pydantic_ai import resolve_deferred, resolve_deferred_sync
from toolkeeper.toolbox import Toolbox, build_tools

ALICE = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))


def toolset(box: Toolbox) -> Any:
    return build_tools(box, framework="pydantic_ai")


async def test_tools_are_the_enabled_actions_with_their_schemas_unchanged(
        gw: Gateway, box: Toolbox) -> None:
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1")])
    await script.agent(toolset(box)).run("weather?")
    seen = {t.name: t.parameters_json_schema for t in script.seen_tools}
    enabled = {info.name: info.input_schemas["run"] for info in await box.enabled()}
    assert seen == enabled and set(seen) == {"lookup", "transfer", "post_note",
                                                 "send_email", "deploy"}
    assert seen["transfer"]["required"] == ["account", "amount"]


async def test_the_model_is_told_which_tools_it_lacks_and_why(box: Toolbox) -> None:
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1")])
    await script.agent(toolset(box)).run("weather?")
    told = script.instructions[0] or ""
    assert "refund (scope_missing)" in told and "an administrator could enable" in told
    quiet = Script(calls=[("lookup", {"city": "Oslo"}, "c1")])
    await quiet.agent(build_tools(box, framework="pydantic_ai",
                                  explain_unavailable=False)).run("weather?")
    assert quiet.instructions[0] is None


async def test_calls_carry_the_toolbox_turn_entered_around_the_run(
        gw: Gateway, box: Toolbox) -> None:
    script = Script(calls=[("post_note", {"text": "shipped"}, "c1")])
    async with box.turn("turn-42"):
        await script.agent(toolset(box)).run("tell the team")
    (outcome,) = [o for o in gw.calls.list("default") if o.tool == "post_note"]
    assert outcome.turn_group_id == "turn-42"


async def test_an_allowed_call_returns_its_output_to_the_model(box: Toolbox) -> None:
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1")])
    run = await script.agent(toolset(box)).run("weather?")
    assert said(run.output) == {"c1": {"city": "Oslo", "sky": "clear"}}


async def test_a_denied_call_reaches_the_model_as_its_reason(
        box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 5000}, "c1")])
    run = await script.agent(toolset(box)).run("pay acme 5000")
    told = said(run.output)["c1"]
    assert (told["status"], told["reason"], told["tool"]) == ("denied", "gate_denied",
                                                             "transfer")
    assert script.retries == [] and counts == {}


async def test_an_approve_gate_pauses_and_the_approved_call_runs_once(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 50}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("pay acme 50")
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    assert [c.tool_call_id for c in requests.approvals] == ["c1"]
    meta = requests.metadata["c1"]
    assert (meta["kind"], meta["tool"], meta["arguments"]) == (
        "approve", "transfer", {"account": "acme", "amount": 50})
    assert gw.approvals.get(meta["approval_id"], "default").status is ApprovalStatus.PENDING
    assert counts == {}

    results = await resolve_deferred(box, requests, {"c1": True}, approver=ALICE)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    assert said(resumed.output) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}
    record = gw.store.approvals.get(meta["approval_id"])
    assert record is not None and record.status is ApprovalStatus.CONSUMED
    assert record.decided_by == "alice"
    # the call ran in the turn of the run that asked for it, under its tool call's key
    (outcome,) = [o for o in gw.calls.list("default") if o.tool == "transfer"]
    assert outcome.turn_group_id == meta["turn_group_id"] == first.run_id != resumed.run_id
    assert outcome.key.endswith(f"pydantic-ai:{first.conversation_id}:c1")

    # the resumed run retried (a crash, a redelivered job): deduped, not executed again
    again = await agent.run(message_history=first.all_messages(),
                            deferred_tool_results=results)
    assert said(again.output) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


async def test_a_rejected_call_tells_the_model_and_never_runs(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 50}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("pay acme 50")
    assert isinstance(first.output, DeferredToolRequests)
    approval_id = first.output.metadata["c1"]["approval_id"]
    results = await resolve_deferred(box, first.output,
                                     {"c1": ToolDenied("not before the audit")},
                                     approver=ALICE)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    told = said(resumed.output)["c1"]
    assert (told["status"], told["reason"]) == ("denied", "approval_denied")
    assert "not before the audit" in told["message"]
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.DENIED
    assert counts == {} and script.retries == []


async def test_the_agents_own_credential_cannot_approve(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 50}, "c1")])
    first = await script.agent(toolset(box)).run("pay acme 50")
    assert isinstance(first.output, DeferredToolRequests)
    _, agent_token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    with pytest.raises(OperationRefused) as refused:
        await resolve_deferred(box, first.output, {"c1": True}, approver=agent_token)
    assert refused.value.reason == Reason.APPROVER_NOT_ALLOWED
    approval_id = first.output.metadata["c1"]["approval_id"]
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.PENDING
    assert counts == {}


async def test_approving_only_in_the_framework_does_not_run_the_call(
        box: Toolbox, counts: dict[str, int]) -> None:
    """An application that skips resolve_deferred has not told toolkeeper: still gated."""
    script = Script(calls=[("transfer", {"account": "acme", "amount": 50}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("pay acme 50")
    assert isinstance(first.output, DeferredToolRequests)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=first.output.build_results(
                                  approvals={"c1": True}))
    told = said(resumed.output)["c1"]
    assert told["status"] == "approval_required" and counts == {}


async def test_a_superseded_turn_stops_the_approved_irreversible_call(
        box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 50}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("pay acme 50")
    assert isinstance(first.output, DeferredToolRequests)
    results = await resolve_deferred(box, first.output, {"c1": True}, approver=ALICE)
    assert await box.supersede(first.output.metadata["c1"]["turn_group_id"])
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    assert said(resumed.output)["c1"]["reason"] == "superseded"
    assert counts == {}


async def test_a_retried_run_dedupes_an_executed_call(
        box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("post_note", {"text": "shipped"}, "c1")])
    agent = script.agent(toolset(box))
    run = await agent.run("tell the team")
    assert said(run.output) == {"c1": {"posted": "shipped"}}
    # the run is retried from the model's tool call (the process died before the answer)
    history = run.all_messages()
    upto = max(i for i, m in enumerate(history) if isinstance(m, ModelResponse)
               and any(getattr(p, "tool_call_id", None) == "c1" for p in m.parts))
    retry = await agent.run(message_history=history[:upto + 1])
    assert said(retry.output) == {"c1": {"posted": "shipped"}}
    assert counts == {"post_note": 1}


@pytest.mark.parametrize(("name", "args"), [
    ("transfer", "{not json"), ("transfer", "[1, 2]"), ("lookup", {"city": 5}),
    ("lookup", {"town": "Oslo"}), ("transfer", {"account": "acme", "amount": "lots"})])
async def test_malformed_arguments_come_back_as_invalid_arguments(
        box: Toolbox, counts: dict[str, int], name: str, args: Any) -> None:
    script = Script(calls=[(name, args, "c1")])
    run = await script.agent(toolset(box)).run("weather?")
    told = said(run.output)["c1"]
    assert (told["status"], told["reason"]) == ("denied", "invalid_arguments")
    pointers = [e["pointer"] for e in told["details"]["errors"]]
    assert pointers and all(p == "" or p.startswith("/") for p in pointers)
    assert script.retries == [] and counts == {}


async def test_a_previewed_call_shows_the_preview_and_runs_once_approved(
        box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("send_email", {"to": "ops@example.com", "body": "hi"}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("mail ops")
    assert isinstance(first.output, DeferredToolRequests)
    meta = first.output.metadata["c1"]
    assert meta["kind"] == "preview"
    assert meta["preview"]["summary"] == "email ops@example.com: hi"
    assert counts == {}
    results = await resolve_deferred(box, first.output, {"c1": True}, approver=ALICE)
    for _ in range(2):  # resumed, then the resume retried: one email
        resumed = await agent.run(message_history=first.all_messages(),
                                  deferred_tool_results=results)
        assert said(resumed.output) == {"c1": {"sent_to": "ops@example.com"}}
    assert counts == {"send_email": 1}


async def test_a_rejected_preview_never_runs(box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("send_email", {"to": "ops@example.com", "body": "hi"}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("mail ops")
    assert isinstance(first.output, DeferredToolRequests)
    results = await resolve_deferred(box, first.output, {"c1": False}, approver=ALICE)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    assert said(resumed.output)["c1"]["reason"] == "approval_denied"
    assert counts == {}


async def test_a_confirm_gate_is_confirmed_and_runs_once(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("deploy", {"service": "api"}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("deploy api")
    assert isinstance(first.output, DeferredToolRequests)
    meta = first.output.metadata["c1"]
    assert (meta["kind"], meta["status"]) == ("confirm", "confirmation_required")
    results = await resolve_deferred(box, first.output, {"c1": True}, approver=ALICE)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    assert said(resumed.output) == {"c1": {"deployed": "api"}}
    assert counts == {"deploy": 1}
    record = gw.store.approvals.get(meta["approval_id"])
    assert record is not None and record.status is ApprovalStatus.CONSUMED


async def test_an_approver_may_approve_edited_arguments(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 500}, "c1")])
    agent = script.agent(toolset(box))
    first = await agent.run("pay acme 500")
    assert isinstance(first.output, DeferredToolRequests)
    edited = ToolApproved(override_args={"account": "acme", "amount": 50})
    results = await resolve_deferred(box, first.output, {"c1": edited}, approver=ALICE)
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=results)
    assert said(resumed.output) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


def test_the_flow_from_synchronous_code(box: Toolbox, counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 50}, "c1")])
    agent = script.agent(toolset(box))
    first = agent.run_sync("pay acme 50")
    assert isinstance(first.output, DeferredToolRequests)
    results = resolve_deferred_sync(box, first.output, {"c1": True}, approver=ALICE)
    resumed = agent.run_sync(message_history=first.all_messages(),
                             deferred_tool_results=results)
    assert said(resumed.output) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}
