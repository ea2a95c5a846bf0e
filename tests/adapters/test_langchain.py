"""The LangChain / LangGraph adapter in a real agent loop (issue 9): a LangGraph graph (a
scripted chat model node, a ``ToolNode`` over the built tools, an ``InMemorySaver``
checkpointer, a thread id) over an in-process gateway — allowed, denied, approve-gated
(interrupted, approved by an approver, resumed, executed once), rejected, re-run, malformed.

``lookup`` is pure and allowed; ``transfer`` is irreversible and high risk, which profile
``p`` gates with ``approve`` — and with ``deny`` once an adjuster raises an amount over 1000
to critical; ``post_note`` is irreversible and allowed; ``send_email`` is previewed first;
``deploy`` requires confirmation. Executions are counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from pydantic import PrivateAttr

from tests.adapters.example_runs import paid_once
from toolkeeper import (
    ApprovalStatus,
    Gateway,
    OperationRefused,
    Principal,
    Reason,
    Role,
)
from toolkeeper.toolbox import Toolbox, build_tools

ALICE = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_agent.py"
THREAD = {"configurable": {"thread_id": "t1", "turn_group_id": "turn-1"}}


class Scripted(BaseChatModel):
    """A chat model that makes ``calls`` (name, arguments, tool call id) on its first turn,
    then answers with what each call returned, as JSON ``{tool_call_id: content}``."""

    calls: Sequence[tuple[str, Any, str]]
    _bound: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:
        self._bound[:] = [convert_to_openai_tool(t)["function"] for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        told = {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
        if told:
            reply = AIMessage(content=json.dumps(told))
        else:
            reply = AIMessage(content="", tool_calls=[
                {"name": name, "args": args, "id": cid} for name, args, cid in self.calls])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def agent_graph(model: Scripted, tools: list[Any]) -> Any:
    """The classic tool loop: model → tools → model, checkpointed."""
    bound = model.bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


def said(out: dict[str, Any]) -> dict[str, Any]:
    """What the scripted model was told, by tool call id, JSON parsed."""
    told: dict[str, Any] = json.loads(out["messages"][-1].content)
    return {k: json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v
            for k, v in told.items()}


def ask() -> dict[str, Any]:
    """The user's message (the scripted model does not read it)."""
    return {"messages": [("user", "please")]}


def graph_for(box: Toolbox, *calls: tuple[str, Any, str], **options: Any) -> Any:
    tools = build_tools(box, framework="langchain", **{"approver": ALICE, **options})
    return agent_graph(Scripted(calls=calls), tools)


async def test_tools_are_the_enabled_actions_with_their_schemas_unchanged(
        box: Toolbox) -> None:
    model = Scripted(calls=[("lookup", {"city": "Oslo"}, "c1")])
    tools = build_tools(box, framework="langchain")
    await agent_graph(model, tools).ainvoke(ask(), THREAD)
    enabled = {info.name: info.input_schemas["run"] for info in await box.enabled()}
    assert {t.name: t.args_schema for t in tools} == enabled
    assert set(enabled) == {"lookup", "transfer", "post_note", "send_email", "deploy"}
    # what the model is offered: the same schema (LangChain's conversion drops titles)
    seen = {t["name"]: t["parameters"] for t in model._bound}
    assert seen["transfer"]["required"] == ["account", "amount"]
    assert seen["transfer"]["properties"]["amount"]["type"] == "integer"
    assert seen["transfer"]["additionalProperties"] is False


async def test_an_allowed_call_returns_its_output_to_the_model(box: Toolbox) -> None:
    out = await graph_for(box, ("lookup", {"city": "Oslo"}, "c1")).ainvoke(ask(), THREAD)
    assert said(out) == {"c1": {"city": "Oslo", "sky": "clear"}}


async def test_a_denied_call_reaches_the_model_as_its_reason(
        box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 5000}, "c1"))
    told = said(await graph.ainvoke(ask(), THREAD))["c1"]
    assert (told["status"], told["reason"], told["tool"]) == ("denied", "gate_denied",
                                                             "transfer")
    assert counts == {}


async def test_an_approve_gate_interrupts_and_the_approved_call_runs_once(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c1"))
    first = await graph.ainvoke(ask(), THREAD)
    (pause,) = first["__interrupt__"]
    value = pause.value
    assert (value["kind"], value["tool"], value["arguments"], value["reason"]) == (
        "approve", "transfer", {"account": "acme", "amount": 50}, "approval_required")
    assert gw.approvals.get(value["approval_id"], "default").status is ApprovalStatus.PENDING
    assert counts == {}

    resumed = await graph.ainvoke(Command(resume={"type": "approve"}), THREAD)
    assert said(resumed) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}
    record = gw.store.approvals.get(value["approval_id"])
    assert record is not None and record.status is ApprovalStatus.CONSUMED
    assert record.decided_by == "alice"
    (outcome,) = [o for o in gw.calls.list("default") if o.tool == "transfer"]
    assert outcome.turn_group_id == value["turn_group_id"] == "turn-1"
    assert outcome.key.endswith("langgraph:t1:c1")

    # the run is replayed from the checkpoint before the tools ran: deduped, not re-executed
    before_tools = [s async for s in graph.aget_state_history(THREAD)
                    if s.next == ("tools",)][-1]
    replay = await graph.ainvoke(None, before_tools.config)
    assert said(replay) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


def test_the_sync_graph_interrupts_and_runs_the_approved_call_once(
        box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c1"))
    first = graph.invoke(ask(), THREAD)
    assert first["__interrupt__"][0].value["kind"] == "approve"
    for _ in range(2):  # resumed, then the resume redelivered: one transfer
        resumed = graph.invoke(Command(resume={"type": "approve"}), THREAD)
        assert said(resumed) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


def test_the_sync_graph_records_a_rejection(gw: Gateway, box: Toolbox,
                                            counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c1"))
    approval_id = graph.invoke(ask(), THREAD)["__interrupt__"][0].value["approval_id"]
    told = said(graph.invoke(Command(resume={"type": "reject"}), THREAD))["c1"]
    assert told["reason"] == "approval_denied" and counts == {}
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.DENIED


async def test_a_rejected_call_tells_the_model_and_never_runs(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c1"))
    first = await graph.ainvoke(ask(), THREAD)
    approval_id = first["__interrupt__"][0].value["approval_id"]
    resumed = await graph.ainvoke(
        Command(resume={"type": "reject", "message": "not before the audit"}), THREAD)
    told = said(resumed)["c1"]
    assert (told["status"], told["reason"]) == ("denied", "approval_denied")
    assert "not before the audit" in told["message"]
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.DENIED
    assert gw.approvals.list("default") == []  # no second approval was opened
    assert counts == {}


async def test_the_agents_own_credential_cannot_approve(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    _, agent_token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c1"),
                      approver=agent_token)
    first = await graph.ainvoke(ask(), THREAD)
    approval_id = first["__interrupt__"][0].value["approval_id"]
    with pytest.raises(OperationRefused) as refused:
        await graph.ainvoke(Command(resume={"type": "approve"}), THREAD)
    assert refused.value.reason == Reason.APPROVER_NOT_ALLOWED
    assert gw.approvals.get(approval_id, "default").status is ApprovalStatus.PENDING
    assert counts == {}


async def test_without_an_approver_the_decision_is_made_in_toolkeeper(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    """Approving only in the framework does not run the call; approving in toolkeeper
    (REST, CLI, UI) and then resuming does, once."""
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c1"),
                      approver=None)
    first = await graph.ainvoke(ask(), THREAD)
    approval_id = first["__interrupt__"][0].value["approval_id"]
    resumed = await graph.ainvoke(Command(resume={"type": "approve"}), THREAD)
    assert said(resumed)["c1"]["status"] == "approval_required" and counts == {}

    other = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c2"),
                      approver=None)
    config = {"configurable": {"thread_id": "t2"}}
    paused = (await other.ainvoke(ask(), config))["__interrupt__"][0].value
    assert paused["approval_id"] == approval_id  # the same call waits on the same approval
    gw.approvals.approve(approval_id, by=ALICE)
    done = await other.ainvoke(Command(resume={"type": "approve"}), config)
    assert said(done) == {"c2": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


async def test_a_superseded_turn_stops_the_approved_irreversible_call(
        box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 50}, "c1"))
    first = await graph.ainvoke(ask(), THREAD)
    assert await box.supersede(first["__interrupt__"][0].value["turn_group_id"])
    resumed = await graph.ainvoke(Command(resume={"type": "approve"}), THREAD)
    assert said(resumed)["c1"]["reason"] == "superseded"
    assert counts == {}


async def test_a_replayed_run_dedupes_an_executed_call(
        box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("post_note", {"text": "shipped"}, "c1"))
    assert said(await graph.ainvoke(ask(), THREAD)) == {"c1": {"posted": "shipped"}}
    before_tools = [s async for s in graph.aget_state_history(THREAD)
                    if s.next == ("tools",)][-1]
    replay = await graph.ainvoke(None, before_tools.config)
    assert said(replay) == {"c1": {"posted": "shipped"}}
    assert counts == {"post_note": 1}


@pytest.mark.parametrize("args", [
    {"city": 5}, {"town": "Oslo"}, {"city": "Oslo", "extra": 1}])
async def test_malformed_arguments_come_back_as_invalid_arguments(
        box: Toolbox, args: Any) -> None:
    told = said(await graph_for(box, ("lookup", args, "c1")).ainvoke(ask(), THREAD))["c1"]
    assert (told["status"], told["reason"]) == ("denied", "invalid_arguments")
    pointers = [e["pointer"] for e in told["details"]["errors"]]
    assert pointers and all(p == "" or p.startswith("/") for p in pointers)


async def test_a_malformed_transfer_never_runs(box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": "lots"}, "c1"))
    told = said(await graph.ainvoke(ask(), THREAD))["c1"]
    assert told["reason"] == "invalid_arguments"
    assert [e["pointer"] for e in told["details"]["errors"]] == ["/amount"]
    assert counts == {}


def test_a_tool_given_text_instead_of_an_object_answers_invalid_arguments(
        box: Toolbox, counts: dict[str, int]) -> None:
    tools = {t.name: t for t in build_tools(box, framework="langchain")}
    told = json.loads(tools["transfer"].invoke("acme 50"))
    assert (told["reason"], told["details"]["errors"][0]["pointer"]) == (
        "invalid_arguments", "")
    assert counts == {}


async def test_a_previewed_call_shows_the_preview_and_runs_once_approved(
        box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("send_email", {"to": "ops@example.com", "body": "hi"}, "c1"))
    value = (await graph.ainvoke(ask(), THREAD))["__interrupt__"][0].value
    assert value["kind"] == "preview"
    assert value["preview"]["summary"] == "email ops@example.com: hi"
    assert counts == {}
    resumed = await graph.ainvoke(Command(resume={"type": "approve"}), THREAD)
    assert said(resumed) == {"c1": {"sent_to": "ops@example.com"}}
    assert counts == {"send_email": 1}


async def test_a_rejected_preview_never_runs(box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("send_email", {"to": "ops@example.com", "body": "hi"}, "c1"))
    await graph.ainvoke(ask(), THREAD)
    resumed = await graph.ainvoke(Command(resume={"type": "reject"}), THREAD)
    assert said(resumed)["c1"]["reason"] == "approval_denied"
    assert counts == {}


async def test_a_confirm_gate_is_confirmed_and_runs_once(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("deploy", {"service": "api"}, "c1"))
    value = (await graph.ainvoke(ask(), THREAD))["__interrupt__"][0].value
    assert (value["kind"], value["status"]) == ("confirm", "confirmation_required")
    resumed = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}),
                                  THREAD)
    assert said(resumed) == {"c1": {"deployed": "api"}}
    assert counts == {"deploy": 1}
    record = gw.store.approvals.get(value["approval_id"])
    assert record is not None and record.status is ApprovalStatus.CONSUMED


async def test_an_approver_may_approve_edited_arguments(
        box: Toolbox, counts: dict[str, int]) -> None:
    graph = graph_for(box, ("transfer", {"account": "acme", "amount": 500}, "c1"))
    await graph.ainvoke(ask(), THREAD)
    edit = {"type": "edit", "args": {"account": "acme", "amount": 50}}
    resumed = await graph.ainvoke(Command(resume=edit), THREAD)
    assert said(resumed) == {"c1": {"transferred": 50, "to": "acme"}}
    assert counts == {"transfer": 1}


async def test_create_agent_pauses_parallel_gated_calls_together(
        gw: Gateway, box: Toolbox, counts: dict[str, int]) -> None:
    """LangChain's agent factory runs each tool call as its own task: both gates pause in
    one interrupt, each resumed by its id — one approved and run once, one rejected."""
    model = Scripted(calls=[("transfer", {"account": "acme", "amount": 50}, "c1"),
                            ("deploy", {"service": "api"}, "c2"),
                            ("lookup", {"city": "Oslo"}, "c3")])
    agent = create_agent(model, build_tools(box, framework="langchain", approver=ALICE),
                         checkpointer=InMemorySaver())
    first = await agent.ainvoke(ask(), THREAD)
    pauses = {p.value["tool"]: p for p in first["__interrupt__"]}
    assert set(pauses) == {"transfer", "deploy"}
    resume = {pauses["transfer"].id: {"type": "approve"},
              pauses["deploy"].id: {"type": "reject", "message": "freeze"}}
    for _ in range(2):  # resumed, then the same resume redelivered
        done = said(await agent.ainvoke(Command(resume=resume), THREAD))
        assert done["c1"] == {"transferred": 50, "to": "acme"}
        assert (done["c2"]["reason"], done["c3"]) == ("approval_denied",
                                                     {"city": "Oslo", "sky": "clear"})
    assert counts == {"transfer": 1}
    deploy = gw.approvals.get(pauses["deploy"].value["approval_id"], "default")
    assert deploy.status is ApprovalStatus.DENIED


def test_the_langgraph_example_runs_offline_and_pays_once(db_url: str) -> None:
    paid_once(EXAMPLE, db_url, 'waiting for a human: pay_invoice {"number": "INV-7"')


async def test_the_turn_group_comes_from_the_toolbox_turn_or_the_turn_group_option(
        gw: Gateway, box: Toolbox) -> None:
    config = {"configurable": {"thread_id": "t9"}}
    async with box.turn("the-user-message") as turn:
        await graph_for(box, ("post_note", {"text": "a"}, "c1")).ainvoke(ask(), config)
    picked = graph_for(box, ("post_note", {"text": "b"}, "c2"),
                       turn_group=lambda cfg: f"run-of-{cfg['configurable']['thread_id']}")
    await picked.ainvoke(ask(), config)
    groups = {o.key.rsplit(":", 1)[-1]: o.turn_group_id for o in gw.calls.list("default")}
    assert groups == {"c1": turn.turn_group_id, "c2": "run-of-t9"}
    assert turn.turn_group_id == "the-user-message"
