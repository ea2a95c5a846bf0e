"""The LangChain / LangGraph adapter against a real ``toolkeeper serve`` through the client
(issue 9 item 4): the graph of ``test_langchain`` (its scripted chat model, a ``ToolNode``,
a checkpointer) over tools built from ``Client``/``AsyncClient`` — allowed, denied,
approve-gated (interrupted, approved with the approver token, resumed, executed once),
rejected, replayed from a checkpoint (deduped), and the sync graph over the sync client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from tests.adapters.remote_support import AGENT, Remote, running, unique
from tests.adapters.test_langchain import Scripted, agent_graph, ask, said
from toolkeeper import ApprovalStatus
from toolkeeper.adapters.langchain import abuild
from toolkeeper.client import AsyncClient, Client
from toolkeeper.errors import UserError
from toolkeeper.toolbox import build_tools

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`


@pytest.fixture
def tk(remote: Remote) -> Iterator[Client]:
    with Client(remote.url, remote.agent_token, timeout=10) as client:
        yield client


@pytest.fixture
async def atk(remote: Remote) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(remote.url, remote.agent_token, timeout=10) as client:
        yield client


def thread() -> dict[str, Any]:
    """A thread (and turn) no other test of the module uses: the keys derive from it."""
    return {"configurable": {"thread_id": unique("t"), "turn_group_id": unique("turn")}}


def graph_for(remote: Remote, tk: Client, *calls: tuple[str, Any, str]) -> Any:
    tools = build_tools(tk, agent=AGENT, framework="langchain",
                        approver=remote.approver_token)
    return agent_graph(Scripted(calls=calls), tools)


async def test_allowed_and_denied_calls_reach_the_model(remote: Remote, tk: Client) -> None:
    account = unique("acct")
    graph = graph_for(remote, tk, ("lookup", {"city": "Oslo"}, "c1"),
                      ("transfer", {"account": account, "amount": 5000}, "c2"))
    told = said(await graph.ainvoke(ask(), thread()))
    assert told["c1"] == {"city": "Oslo", "sky": "clear"}
    assert (told["c2"]["status"], told["c2"]["reason"], told["c2"]["tool"]) == (
        "denied", "gate_denied", "transfer")
    assert remote.executions("transfer", account) == 0


async def test_an_approved_call_runs_once_and_a_replay_dedupes(
        remote: Remote, atk: AsyncClient) -> None:
    account = unique("acct")
    tools = await abuild(atk.toolbox(AGENT), approver=remote.approver_token)
    graph = agent_graph(Scripted(calls=[("transfer", {"account": account, "amount": 50},
                                         "c1")]), tools)
    config = thread()
    (pause,) = (await graph.ainvoke(ask(), config))["__interrupt__"]
    value = pause.value
    assert (value["kind"], value["tool"], value["arguments"]) == (
        "approve", "transfer", {"account": account, "amount": 50})
    assert remote.status(value["approval_id"]) is ApprovalStatus.PENDING
    assert remote.executions("transfer", account) == 0

    resumed = await graph.ainvoke(Command(resume={"type": "approve"}), config)
    assert said(resumed) == {"c1": {"transferred": 50, "to": account}}
    assert remote.executions("transfer", account) == 1
    assert remote.status(value["approval_id"]) is ApprovalStatus.CONSUMED
    outcome = remote.outcome_of(value["approval_id"])
    configurable = config["configurable"]
    assert outcome.turn_group_id == value["turn_group_id"] == configurable["turn_group_id"]
    assert outcome.idempotency_key.endswith(f"langgraph:{configurable['thread_id']}:c1")
    before_tools = [s async for s in graph.aget_state_history(config)
                    if s.next == ("tools",)][-1]
    replay = await graph.ainvoke(None, before_tools.config)
    assert said(replay) == {"c1": {"transferred": 50, "to": account}}
    assert remote.executions("transfer", account) == 1


async def test_a_rejected_call_tells_the_model_and_never_runs(remote: Remote,
                                                              tk: Client) -> None:
    account = unique("acct")
    graph = graph_for(remote, tk, ("transfer", {"account": account, "amount": 50}, "c1"))
    config = thread()
    approval_id = (await graph.ainvoke(ask(), config))["__interrupt__"][0].value["approval_id"]
    resumed = await graph.ainvoke(
        Command(resume={"type": "reject", "message": "not before the audit"}), config)
    told = said(resumed)["c1"]
    assert (told["status"], told["reason"]) == ("denied", "approval_denied")
    assert "not before the audit" in told["message"]
    assert remote.status(approval_id) is ApprovalStatus.DENIED
    assert remote.executions("transfer", account) == 0


async def test_a_replayed_run_dedupes_an_executed_call(remote: Remote, tk: Client) -> None:
    note = unique("note")
    graph = graph_for(remote, tk, ("post_note", {"text": note}, "c1"))
    config = thread()
    assert said(await graph.ainvoke(ask(), config)) == {"c1": {"posted": note}}
    before_tools = [s async for s in graph.aget_state_history(config)
                    if s.next == ("tools",)][-1]
    assert said(await graph.ainvoke(None, before_tools.config)) == {"c1": {"posted": note}}
    assert remote.executions("post_note", note) == 1


def test_the_sync_graph_over_the_sync_client(remote: Remote, tk: Client) -> None:
    account = unique("acct")
    graph = graph_for(remote, tk, ("transfer", {"account": account, "amount": 50}, "c1"))
    config = thread()
    assert graph.invoke(ask(), config)["__interrupt__"][0].value["kind"] == "approve"
    for _ in range(2):  # resumed, then the resume redelivered: one transfer
        resumed = graph.invoke(Command(resume={"type": "approve"}), config)
        assert said(resumed) == {"c1": {"transferred": 50, "to": account}}
    assert remote.executions("transfer", account) == 1


async def test_tools_of_an_async_client_are_built_with_abuild(remote: Remote,
                                                              atk: AsyncClient) -> None:
    """An ``AsyncClient`` has no blocking face: the blocking builder says which to use."""
    with pytest.raises(UserError, match="abuild"):
        build_tools(atk, agent=AGENT, framework="langchain")
    assert {t.name for t in await abuild(atk.toolbox(AGENT))} == {
        "lookup", "transfer", "post_note", "send_email", "deploy"}


async def test_a_server_gone_after_the_tools_were_built_answers_unavailable(
        tmp_path: Path) -> None:
    with running(tmp_path) as gone:
        tk = AsyncClient(gone.url, gone.agent_token, timeout=2, max_retries=1, max_wait_s=2)
        tools = await abuild(tk.toolbox(AGENT), approver=gone.approver_token)
    try:
        graph = agent_graph(Scripted(calls=[("post_note", {"text": "x"}, "c1")]), tools)
        told = said(await graph.ainvoke(ask(), thread()))["c1"]
    finally:
        await tk.aclose()
    assert (told["status"], told["reason"], told["tool"]) == ("failed", "unavailable",
                                                             "post_note")
    assert gone.executions("post_note", "x") == 0
