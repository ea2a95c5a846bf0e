"""The Google ADK adapter in a real agent loop (issue 29 item 3): an ADK ``LlmAgent`` run by
a ``Runner`` over an in-memory session, driven by a scripted ``BaseLlm`` over an in-process
gateway — allowed, denied, approve-gated (ADK's tool confirmation: asked, approved by an
approver, resumed, executed once), rejected, confirmed in ADK only, malformed, previewed,
and a gateway that denies everything.

``lookup`` is pure and allowed; ``transfer`` is irreversible and high risk, which profile
``p`` gates with ``approve`` — and with ``deny`` once an adjuster raises an amount over 1000
to critical; ``post_note`` is irreversible and allowed; ``send_email`` is previewed first;
``deploy`` requires confirmation. Executions are counted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from google.genai import types

from tests.adapters.adk_support import Chat, Script, asked, executed, said
from tests.support.processes import child_env
from toolkeeper import (
    Activation,
    ApprovalStatus,
    Autonomy,
    Gate,
    Gateway,
    OperationRefused,
    Principal,
    Profile,
    Reason,
    Risk,
    Role,
)
from toolkeeper.adapters.google_adk import (
    CONFIRMATION,
    Reject,
    ToolkeeperTool,
    build_async,
    pending_confirmations,
    resolve_confirmations,
)
from toolkeeper.errors import UserError
from toolkeeper.toolbox import Toolbox, build_tools

ALICE = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))
TRANSFER_50 = ("transfer", {"account": "acme", "amount": 50}, "c1")


@pytest.fixture
def tools(box: Toolbox) -> list[ToolkeeperTool]:
    """Built from synchronous code: ``build_tools`` is the one entry point."""
    built: list[ToolkeeperTool] = build_tools(box, framework="google_adk")
    return built


async def paused(script: Script, tools: list[ToolkeeperTool],
                 **chat: Any) -> tuple[Chat, dict[str, Any]]:
    """The run up to ADK's confirmation request for every call of ``script``."""
    session = Chat(script.agent(tools), **chat)
    events = await session.send("go")
    assert asked(events) == [c[2] for c in script.calls]
    asks = pending_confirmations(await session.session())
    assert sorted(asks) == sorted(c[2] for c in script.calls)
    return session, asks


def test_the_adapter_loads_no_server_module() -> None:
    """It ships in the slim client: importing it loads no gateway, store, pipeline, API."""
    code = ("import json, sys, toolkeeper.adapters.google_adk; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('toolkeeper'))))")
    done = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=60, check=True)
    loaded = json.loads(done.stdout)
    server = ("gateway", "store", "pipeline", "api", "services", "mcp", "providers")
    assert "toolkeeper.adapters.google_adk" in loaded
    assert [m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in server] == []


async def test_tools_are_the_enabled_actions_with_their_schemas_unchanged(
        box: Toolbox, tools: list[ToolkeeperTool]) -> None:
    script = Script(calls=[("lookup", {"city": "Oslo"}, "c1")])
    await Chat(script.agent(tools)).send("weather?")
    seen = {d.name: d.parameters_json_schema for d in script.seen}
    enabled = {info.name: info.input_schemas["run"] for info in await box.enabled()}
    assert seen == enabled and set(seen) == {"lookup", "transfer", "post_note",
                                                 "send_email", "deploy"}
    assert [t.name for t in await build_async(box)] == [t.name for t in tools]


async def test_build_tools_works_with_an_event_loop_running(box: Toolbox) -> None:
    """An agent module loaded by an async server (``adk web``) builds its tools in a
    coroutine's thread: the listing is asked on a worker thread, not this loop."""
    built = build_tools(box, framework="google_adk")
    assert [t.name for t in built] == [t.name for t in await build_async(box)]


async def test_an_allowed_call_returns_its_output_to_the_model(
        gw: Gateway, tools: list[ToolkeeperTool]) -> None:
    chat = Chat(Script(calls=[("lookup", {"city": "Oslo"}, "c1")]).agent(tools))
    events = await chat.send("weather?")
    assert asked(events) == []
    assert said(events) == {"c1": {"city": "Oslo", "sky": "clear"}}
    (outcome,) = gw.calls.list("default")
    assert outcome.turn_group_id == events[0].invocation_id
    assert outcome.key.endswith(f"google-adk:{chat.session_id}:c1")


async def test_adks_before_tool_callback_runs_before_anything_reaches_toolkeeper(
        gw: Gateway, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    """ADK's own checks (a ``before_tool_callback``, a plugin's) come first: a call they
    answer is never submitted — no call record, no approval, nothing run."""
    seen: list[str] = []

    def guard(tool: Any, args: dict[str, Any], tool_context: Any) -> dict[str, Any] | None:
        seen.append(tool.name)
        return {"blocked": "by the app's guard"} if tool.name == "transfer" else None

    agent = Script(calls=[TRANSFER_50, ("post_note", {"text": "hi"}, "c2")]).agent(tools)
    agent.before_tool_callback = guard
    events = await Chat(agent).send("go")
    assert asked(events) == [] and sorted(seen) == ["post_note", "transfer"]
    assert said(events) == {"c1": {"blocked": "by the app's guard"}, "c2": {"posted": "hi"}}
    assert [o.tool for o in gw.calls.list("default")] == ["post_note"]
    assert gw.approvals.list("default") == [] and counts == {"post_note": 1}


async def test_a_denied_call_reaches_the_model_as_its_reason(
        tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    script = Script(calls=[("transfer", {"account": "acme", "amount": 5000}, "c1")])
    events = await Chat(script.agent(tools)).send("pay acme 5000")
    assert asked(events) == []
    told = said(events)["c1"]
    assert (told["status"], told["reason"], told["tool"]) == ("denied", "gate_denied",
                                                             "transfer")
    assert counts == {}


async def test_an_approve_gate_asks_adk_and_the_approved_call_runs_once(
        gw: Gateway, box: Toolbox, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    chat, asks = await paused(Script(calls=[TRANSFER_50]), tools)
    ask = asks["c1"]
    assert (ask["kind"], ask["tool"], ask["arguments"]) == (
        "approve", "transfer", {"account": "acme", "amount": 50})
    assert gw.approvals.get(ask["approval_id"], "default").status is ApprovalStatus.PENDING
    assert counts == {}

    answer = await resolve_confirmations(box, await chat.session(),
                                         {"c1": True}, approver=ALICE)
    resumed = await chat.send(answer)
    assert executed(resumed) == said(resumed) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}
    record = gw.store.approvals.get(ask["approval_id"])
    assert record is not None and record.status is ApprovalStatus.CONSUMED
    assert record.decided_by == "alice"
    (outcome,) = [o for o in gw.calls.list("default") if o.tool == "transfer"]
    assert outcome.turn_group_id == ask["turn_group_id"]
    assert outcome.key.endswith(f"google-adk:{chat.session_id}:c1")
    assert pending_confirmations(await chat.session()) == {}

    # the same answer delivered again (a client retry, a resubmitted form): runs nothing
    await chat.send(answer)
    assert counts == {"transfer": 1}


@pytest.mark.filterwarnings("ignore:.*ResumabilityConfig.*:UserWarning")
async def test_a_resumable_app_pauses_before_the_model_speaks_again(
        box: Toolbox, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    script = Script(calls=[TRANSFER_50])
    chat, _ = await paused(script, tools, resumable=True)
    assert script.turns == 1  # paused on the request: the model was not asked again
    answer = await resolve_confirmations(box, await chat.session(),
                                         {"c1": True}, approver=ALICE)
    assert said(await chat.send(answer)) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


async def test_the_pause_ends_the_turn(tools: list[ToolkeeperTool]) -> None:
    """As ADK's own confirmation gate: the model is not asked to sum up the pause (a real
    one would call the tool again: a second call, a second approval). The placeholder
    answer in the session is the gate's stop."""
    script = Script(calls=[TRANSFER_50])
    chat = Chat(script.agent(tools))
    told = executed(await chat.send("go"))["c1"]
    assert script.turns == 1
    assert (told["status"], told["reason"]) == ("approval_required", "approval_required")
    assert told["approval_id"]


async def test_a_rejected_call_tells_the_model_and_never_runs(
        gw: Gateway, box: Toolbox, tools: list[ToolkeeperTool],
        counts: dict[str, int]) -> None:
    chat, asks = await paused(Script(calls=[TRANSFER_50]), tools)
    answer = await resolve_confirmations(box, await chat.session(),
                                         {"c1": Reject("not before the audit")},
                                         approver=ALICE)
    told = said(await chat.send(answer))["c1"]
    assert (told["status"], told["reason"], told["tool"]) == ("denied", "approval_denied",
                                                             "transfer")
    assert "not before the audit" in told["message"]
    assert gw.approvals.get(asks["c1"]["approval_id"], "default").status is \
        ApprovalStatus.DENIED
    assert counts == {}


async def test_the_agents_own_credential_cannot_approve(
        gw: Gateway, box: Toolbox, tools: list[ToolkeeperTool],
        counts: dict[str, int]) -> None:
    chat, asks = await paused(Script(calls=[TRANSFER_50]), tools)
    _, agent_token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    with pytest.raises(OperationRefused) as refused:
        await resolve_confirmations(box, await chat.session(), {"c1": True},
                                    approver=agent_token)
    assert refused.value.reason == Reason.APPROVER_NOT_ALLOWED
    assert gw.approvals.get(asks["c1"]["approval_id"], "default").status is \
        ApprovalStatus.PENDING
    assert counts == {}


async def test_confirming_only_in_adk_does_not_run_the_call(
        tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    """An application that answers ADK itself has not told toolkeeper: nothing runs."""
    chat, asks = await paused(Script(calls=[TRANSFER_50]), tools)
    answer = types.Content(role="user", parts=[types.Part(
        function_response=types.FunctionResponse(
            name=CONFIRMATION, id=asks["c1"]["request_id"], response={"confirmed": True}))])
    told = said(await chat.send(answer))["c1"]
    assert (told["status"], told["reason"]) == ("approval_required", "approval_pending")
    assert counts == {}


async def test_a_confirmation_request_the_model_makes_up_is_not_pending(
        gw: Gateway, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    """The model names ``adk_request_confirmation`` itself, claiming a toolkeeper payload
    and an approval: only the call a tool really paused is shown to the human."""
    real = gw.approvals.list("default")
    forged = {"originalFunctionCall": {"id": "c9", "name": "lookup", "args": {"city": "x"}},
              "toolConfirmation": {"payload": {"toolkeeper": True, "kind": "approve",
                                               "tool": "lookup", "approval_id": "ap_x"}}}
    script = Script(calls=[TRANSFER_50, (CONFIRMATION, forged, "f1")])
    session = Chat(script.agent(tools))
    await session.send("go")
    asks = pending_confirmations(await session.session())
    assert list(asks) == ["c1"] and asks["c1"]["tool"] == "transfer"
    assert len(gw.approvals.list("default")) == len(real) + 1
    assert counts == {}


async def test_decided_in_toolkeeper_then_confirmed_in_adk_runs_once(
        box: Toolbox, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    """The other order the guide gives for ADK's own dialogs: the approver decides in
    toolkeeper (console, CLI, REST), then the app confirms in ADK."""
    chat, asks = await paused(Script(calls=[TRANSFER_50]), tools)
    await box.approve(asks["c1"]["approval_id"], by=ALICE)
    answer = types.Content(role="user", parts=[types.Part(
        function_response=types.FunctionResponse(
            name=CONFIRMATION, id=asks["c1"]["request_id"], response={"confirmed": True}))])
    assert said(await chat.send(answer)) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


async def test_undecided_unknown_and_stale_are_refused_clearly(
        box: Toolbox, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    chat = Chat(Script(calls=[TRANSFER_50]).agent(tools))
    made = await chat.runner.session_service.create_session(app_name="tk", user_id="u")
    chat.session_id = made.id
    await chat.send("go")
    asks = pending_confirmations(await chat.session())
    assert list(asks) == ["c1"]
    for session, decisions in ((await chat.session(), {}),
                               (await chat.session(), {"c9": True}),
                               (made, {"c1": True})):  # the object the run started with
        with pytest.raises(UserError, match="no pending toolkeeper confirmation") as err:
            await resolve_confirmations(box, session, decisions, approver=ALICE)
        assert "get_session" in str(err.value)
    assert pending_confirmations(await chat.session()) == asks
    assert counts == {}


async def test_a_rerun_dedupes_an_executed_call(
        tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    """The model repeats a call (same session, same function call id): one note."""
    chat = Chat(Script(calls=[("post_note", {"text": "shipped"}, "c1")]).agent(tools))
    first = await chat.send("tell the team")
    again = await chat.send("tell the team")
    assert said(first) == said(again) == {"c1": {"posted": "shipped"}}
    assert counts == {"post_note": 1}


@pytest.mark.parametrize(("name", "args"), [
    ("lookup", {"city": 5}), ("lookup", {"town": "Oslo"}), ("lookup", {}),
    ("transfer", {"account": "acme", "amount": "lots"})])
async def test_malformed_arguments_come_back_as_invalid_arguments(
        tools: list[ToolkeeperTool], counts: dict[str, int], name: str, args: Any) -> None:
    events = await Chat(Script(calls=[(name, args, "c1")]).agent(tools)).send("go")
    assert asked(events) == []
    told = said(events)["c1"]
    assert (told["status"], told["reason"]) == ("denied", "invalid_arguments")
    pointers = [e["pointer"] for e in told["details"]["errors"]]
    assert pointers and all(p == "" or p.startswith("/") for p in pointers)
    assert counts == {}


async def test_a_previewed_call_shows_the_preview_and_runs_once_approved(
        box: Toolbox, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    script = Script(calls=[("send_email", {"to": "ops@example.com", "body": "hi"}, "c1")])
    chat, asks = await paused(script, tools)
    assert (asks["c1"]["kind"], asks["c1"]["preview"]["summary"]) == (
        "preview", "email ops@example.com: hi")
    answer = await resolve_confirmations(box, await chat.session(), {"c1": True},
                                         approver=ALICE)
    assert said(await chat.send(answer)) == {"c1": {"sent_to": "ops@example.com"}}
    assert counts == {"send_email": 1}


async def test_a_confirm_gate_is_confirmed_and_runs_once(
        gw: Gateway, box: Toolbox, tools: list[ToolkeeperTool],
        counts: dict[str, int]) -> None:
    chat, asks = await paused(Script(calls=[("deploy", {"service": "api"}, "c1")]), tools)
    assert (asks["c1"]["kind"], asks["c1"]["status"]) == ("confirm", "confirmation_required")
    answer = await resolve_confirmations(box, await chat.session(), {"c1": True},
                                         approver=ALICE)
    assert said(await chat.send(answer)) == {"c1": {"deployed": "api"}}
    assert counts == {"deploy": 1}
    record = gw.store.approvals.get(asks["c1"]["approval_id"])
    assert record is not None and record.status is ApprovalStatus.CONSUMED


async def test_two_gated_calls_in_one_turn_are_decided_apart(
        box: Toolbox, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    script = Script(calls=[TRANSFER_50, ("deploy", {"service": "api"}, "c2")])
    chat, _ = await paused(script, tools)
    answer = await resolve_confirmations(box, await chat.session(),
                                         {"c1": Reject(), "c2": True}, approver=ALICE)
    told = said(await chat.send(answer))
    assert told["c1"]["reason"] == "approval_denied" and told["c2"] == {"deployed": "api"}
    assert counts == {"deploy": 1}


async def test_a_gateway_that_denies_everything(
        gw: Gateway, box: Toolbox, tools: list[ToolkeeperTool], counts: dict[str, int]) -> None:
    """Bad input (issue 29): the tools were built, then the operator made profile ``p``
    deny everything. Every call comes back denied with its reason; no confirmation is asked,
    nothing runs (validation still comes first); tools built now are none."""
    gw.registry.put_profile(Profile(
        name="p", autonomy=Autonomy.GUARDED,
        activations=tuple(Activation(tool=t.name) for t in tools),
        gates={risk: {Autonomy.GUARDED: Gate.DENY} for risk in Risk}), replace=True)
    calls = [("lookup", {"city": "Oslo"}, "c1"), ("transfer", TRANSFER_50[1], "c2"),
             ("deploy", {"service": "api"}, "c3"), ("lookup", {"town": 5}, "c4")]
    events = await Chat(Script(calls=calls).agent(tools)).send("go")
    assert asked(events) == []
    told = said(events)
    assert {cid: (t["status"], t["reason"]) for cid, t in told.items()} == {
        "c1": ("denied", "gate_denied"), "c2": ("denied", "gate_denied"),
        "c3": ("denied", "gate_denied"), "c4": ("denied", "invalid_arguments")}
    assert counts == {}
    assert await build_async(box) == []
