"""A stateless (2026-07-28) upstream announces list changes only on a ``subscriptions/listen``
stream: toolkeeper holds one open per upstream connection (``upstream/listen.py``), re-lists
the server when it hears a change, and so tells the agents whose listing changed — in both
of their eras. Against ``conformance_upstream.py`` (the official SDK's ``MCPServer``, whose
``test_trigger_tool_change``/``test_trigger_prompt_change`` add one tool/prompt per call)
with the official SDK client."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conformance_upstream import DYNAMIC, DYNAMIC_PROMPTS, fronted
from mcp_fixtures import McpServer, connect

import toolkeeper.upstream.listen as listen

pytestmark = [pytest.mark.slow]  # a real upstream and a real gateway, each on a port
WAIT_S = 10
QUIET_S = 3.0
"""Longer than a heard change takes to reach the agent (well under a second here)."""


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[McpServer]:
    with fronted(tmp_path) as s:
        yield s


def _names(result: Any) -> list[str]:
    return [t.name for t in getattr(result, "tools", None) or result.prompts]


async def _heard(c: Any, trigger: str, **wanted: bool) -> str:
    """The kind of the first event ``c``'s listen stream (``wanted``) gets after the
    upstream's ``trigger`` tool changed a list (bounded)."""
    async with c.listen(**wanted) as sub:
        await c.call_tool(trigger, {})
        with anyio.fail_after(WAIT_S):
            event = await sub.__anext__()
    return type(event).__name__


async def test_a_new_upstream_tool_reaches_the_agents_listen_stream(srv: McpServer) -> None:
    async with connect(srv, "bot", "2026-07-28") as c:
        assert DYNAMIC[0] not in _names(await c.list_tools())
        assert await _heard(c, "test_trigger_tool_change",
                            tools_list_changed=True) == "ToolsListChanged"
        assert DYNAMIC[0] in _names(await c.list_tools())
        assert (await c.call_tool(DYNAMIC[0], {})).content[0].text == "dynamic"  # type: ignore[union-attr]


async def test_a_new_upstream_prompt_reaches_the_agents_listen_stream(srv: McpServer) -> None:
    async with connect(srv, "bot", "2026-07-28") as c:
        assert DYNAMIC_PROMPTS[0] not in _names(await c.list_prompts())
        assert await _heard(c, "test_trigger_prompt_change",
                            prompts_list_changed=True) == "PromptsListChanged"
        assert DYNAMIC_PROMPTS[0] in _names(await c.list_prompts())


async def test_a_2025_session_hears_the_upstreams_change_too(srv: McpServer) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(srv, "bot", "legacy", message_handler=on_message) as c:
        assert DYNAMIC[0] not in _names(await c.list_tools())
        await c.call_tool("test_trigger_tool_change", {})
        with anyio.fail_after(WAIT_S):
            await changed.wait()
        assert DYNAMIC[0] in _names(await c.list_tools())


@contextmanager
def _deaf() -> Iterator[None]:
    yield


async def test_without_the_listen_stream_the_change_is_not_seen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose: no listen stream towards the upstream, and the agent
    hears nothing and is not shown the new tool (until a periodic re-sync)."""
    monkeypatch.setattr(listen, "hearing", lambda *a, **k: _deaf())
    with fronted(tmp_path) as srv:
        async with connect(srv, "bot", "2026-07-28") as c:
            async with c.listen(tools_list_changed=True) as sub:
                await c.call_tool("test_trigger_tool_change", {})
                with anyio.move_on_after(QUIET_S) as quiet:
                    await sub.__anext__()
                assert quiet.cancelled_caught
            assert DYNAMIC[0] not in _names(await c.list_tools())


async def test_an_oversized_event_ends_the_stream_and_it_is_opened_again() -> None:
    """Read bounded: an event past MAX_EVENT_BYTES ends the stream (``hold`` pauses and
    opens it again); the change after it is heard on the new stream."""
    import httpx
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    opened: list[int] = []
    big = "x" * (listen.MAX_EVENT_BYTES + 1)
    change = b'data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'

    async def endpoint(request: Any) -> StreamingResponse:
        opened.append(1)

        async def body() -> Any:
            if len(opened) == 1:
                yield f'data: {{"jsonrpc":"2.0","method":"x","params":"{big}"}}\n\n'.encode()
                yield change  # after the oversized event: never read
            else:
                yield change
        return StreamingResponse(body(), media_type="text/event-stream")

    heard: list[str] = []
    app = Starlette(routes=[Route("/mcp", endpoint, methods=["POST"])])
    monkey_pause, listen.PAUSE_S = listen.PAUSE_S, 0.01  # type: ignore[misc]
    try:
        transport = httpx.ASGITransport(app=app)
        real = httpx.AsyncClient

        def client(**kwargs: Any) -> httpx.AsyncClient:
            return real(transport=transport, **kwargs)

        async def changed(kind: str) -> None:
            heard.append(kind)
            scope.cancel()  # the first change heard ends the test's stream holding

        async def token() -> str | None:
            return None

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(listen.httpx, "AsyncClient", client)
            with anyio.move_on_after(WAIT_S) as scope:
                await listen.hold("http://up/mcp", {}, token, changed, connect_timeout_s=5.0)
    finally:
        listen.PAUSE_S = monkey_pause  # type: ignore[misc]
    assert heard == ["tools"]
    assert len(opened) == 2


async def test_a_server_offering_no_listen_stream_is_asked_once() -> None:
    """A server answering ``subscriptions/listen`` with a JSON error (method not found) is
    not asked again and again every pause."""
    import httpx
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    asked: list[int] = []

    async def endpoint(request: Any) -> JSONResponse:
        asked.append(1)
        return JSONResponse({"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32601, "message": "Method not found"}})

    app = Starlette(routes=[Route("/mcp", endpoint, methods=["POST"])])
    real = httpx.AsyncClient

    def client(**kwargs: Any) -> httpx.AsyncClient:
        return real(transport=httpx.ASGITransport(app=app), **kwargs)

    async def token() -> str | None:
        return None

    async def changed(kind: str) -> None:
        raise AssertionError(kind)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(listen.httpx, "AsyncClient", client)
        mp.setattr(listen, "PAUSE_S", 0.01)
        with anyio.move_on_after(QUIET_S) as scope:  # hold returns: nothing to listen to
            await listen.hold("http://up/mcp", {}, token, changed, connect_timeout_s=5.0)
    assert not scope.cancelled_caught
    assert asked == [1]
