"""Each adapter against a server that denies everything (issue 29, bad input): an agent
whose profile denies every gate, a token the server refuses, and a server that is down.
Nothing runs, nothing hangs, and what the model or the developer is told names why."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from agents import Runner, set_tracing_disabled

from tests.adapters.remote_support import Remote, unique
from tests.adapters.test_langchain import Scripted as ChatScript
from tests.adapters.test_langchain import agent_graph, ask
from tests.adapters.test_openai_agents import Script as SdkScript
from tests.adapters.test_openai_agents import said as sdk_said
from tests.adapters.test_pydantic_ai import Script as PaiScript
from toolkeeper.client import AsyncClient, Client, RequestRefused, ServerUnavailable
from toolkeeper.toolbox import build_tools

pytestmark = pytest.mark.slow  # a real server process: CI and `make test-all`

FRAMEWORKS = ("pydantic_ai", "openai_agents", "langchain")


@pytest.fixture(autouse=True)
def _no_trace_export() -> None:
    set_tracing_disabled(True)  # offline: the OpenAI Agents SDK would upload its traces


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_agent_denied_everything_is_given_no_tools(remote: Remote) -> None:
    with Client(remote.url, remote.server.tokens["blocked"], timeout=10) as tk:
        box = tk.toolbox("blocked")
        assert box.enabled_sync() == []
        why = {u.name: u.why_unavailable for u in box.unavailable_sync()}
        assert set(why) == {"lookup", "transfer", "post_note", "deploy"}
        assert set(why.values()) == {"gate_denied"}
        for framework in ("openai_agents", "langchain"):
            assert list(build_tools(box, framework=framework)) == []


async def test_a_call_made_anyway_is_refused_and_never_runs(remote: Remote) -> None:
    """A call of a tool the agent was not given (a stale tool list, a hand-made call) is
    refused by the gate and never executed."""
    note = unique("note")
    async with AsyncClient(remote.url, remote.server.tokens["blocked"], timeout=10) as tk:
        res = await tk.toolbox("blocked").execute("post_note", {"text": note})
        assert (res.status.value, str(res.reason)) == ("denied", "gate_denied")
    assert remote.executions("post_note", note) == 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
async def test_a_refused_token_is_a_clear_error(remote: Remote, framework: str) -> None:
    async with AsyncClient(remote.url, "tk_not-a-token", timeout=10) as tk:
        with pytest.raises(RequestRefused) as refused:
            await _use(tk, framework)
    assert refused.value.reason == "unauthenticated"


@pytest.mark.parametrize("framework", FRAMEWORKS)
async def test_a_server_that_is_down_is_unavailable_within_the_bound(framework: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    async with AsyncClient(url, "tk_whatever", timeout=2) as tk:
        with pytest.raises(ServerUnavailable) as down:
            await _use(tk, framework)
    assert down.value.reason == "unavailable"


async def _use(tk: AsyncClient, framework: str) -> Any:
    """Build ``framework``'s tools over ``tk`` and run one scripted turn with them."""
    box = tk.toolbox("bot")
    if framework == "pydantic_ai":
        agent = PaiScript(calls=[("lookup", {"city": "Oslo"}, "c1")]).agent(
            build_tools(box, framework="pydantic_ai"))
        return await agent.run("weather?")
    if framework == "openai_agents":
        from toolkeeper.adapters.openai_agents import build_async

        tools = await build_async(box)
        return sdk_said(await Runner.run(SdkScript(calls=[]).agent(tools), "hi", context={}))
    from toolkeeper.adapters.langchain import abuild

    graph = agent_graph(ChatScript(calls=[]), await abuild(box))
    return await graph.ainvoke(ask(), {"configurable": {"thread_id": unique("t")}})
