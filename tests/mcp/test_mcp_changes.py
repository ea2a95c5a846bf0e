"""SPEC §7 MCP ``tools/list_changed``: an agent connected in either era is told when its
own effective tool set changes, and not when only another agent's does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp_fixtures import McpServer, connect, serving

from toolkeeper import Activation, Profile

WAIT_S = 10
"""Upper bound for a notification that must arrive."""
QUIET_S = 0.5
"""How long a session must stay quiet, once the server has acted on a change, for a
notification that must not arrive (an absence can only be observed over a window)."""


@pytest.fixture
def srv(tmp_path: Any) -> Iterator[McpServer]:
    with serving(f"sqlite:///{tmp_path}/tk.db") as s:
        yield s


def _grant(srv: McpServer, profile: str, tools: tuple[str, ...], autonomy: int = 3) -> None:
    srv.gw.registry.put_profile(Profile(name=profile, autonomy=autonomy,
                                        activations=tuple(Activation(tool=t) for t in tools)),
                                replace=True)


def _listener() -> tuple[list[Any], anyio.Event, Callable[[Any], Awaitable[None]]]:
    """``(heard, changed, handler)``: the list_changed notifications a session got."""
    heard: list[Any] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)
            changed.set()

    return heard, changed, on_message


async def test_a_2025_session_hears_its_own_change_only(srv: McpServer) -> None:
    heard, changed, on_message = _listener()
    _, intern_changed, on_intern_message = _listener()
    async with connect(srv, "reader", "legacy", message_handler=on_message) as c, \
            connect(srv, "intern", "legacy", message_handler=on_intern_message) as witness:
        assert [t.name for t in (await c.list_tools()).tools] == ["add"]
        await witness.list_tools()
        capabilities = c.server_capabilities
        assert capabilities.tools is not None and capabilities.tools.list_changed is True
        # another agent's (intern's) profile changes: intern hears it, so the server has
        # acted on the change; this session stays quiet (a window: nothing must arrive)
        await anyio.to_thread.run_sync(_grant, srv, "manual", ("add",), 0)
        with anyio.fail_after(WAIT_S):
            await intern_changed.wait()
        with anyio.move_on_after(QUIET_S):
            await changed.wait()
        assert heard == []
        await anyio.to_thread.run_sync(_grant, srv, "reading", ("add", "pay"))
        with anyio.fail_after(WAIT_S):
            await changed.wait()
        assert len(heard) == 1
        assert [t.name for t in (await c.list_tools()).tools] == ["add", "pay"]


async def test_a_2026_listen_stream_hears_its_own_change_only(srv: McpServer) -> None:
    async with connect(srv, "reader", "2026-07-28") as c, \
            connect(srv, "bot", "2026-07-28") as other:
        assert [t.name for t in (await c.list_tools()).tools] == ["add"]
        caps = c.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed is True
        async with c.listen(tools_list_changed=True) as sub, \
                other.listen(tools_list_changed=True) as other_sub:
            await anyio.to_thread.run_sync(_grant, srv, "reading", ("add", "bank"))
            with anyio.fail_after(WAIT_S):
                event = await sub.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
            # bot's listing did not change: its stream stays quiet (the server has acted:
            # reader heard, and bot's listing is compared first; a window: nothing must arrive)
            with anyio.move_on_after(QUIET_S) as quiet:
                await other_sub.__anext__()
            assert quiet.cancelled_caught
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["add", "bank_hold", "bank_refund"]


async def test_a_tool_leaving_the_catalog_is_a_change(srv: McpServer) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(srv, "bot", "legacy", message_handler=on_message) as c:
        assert "pay" in [t.name for t in (await c.list_tools()).tools]
        from toolkeeper.model.enums import ToolStatus

        await anyio.to_thread.run_sync(
            lambda: srv.gw.registry.set_status("pay", None, ToolStatus.DISABLED))
        with anyio.fail_after(WAIT_S):
            await changed.wait()
        assert "pay" not in [t.name for t in (await c.list_tools()).tools]
