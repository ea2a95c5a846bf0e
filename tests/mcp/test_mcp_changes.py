"""SPEC §7 MCP ``tools/list_changed``: an agent connected in either era is told when its
own effective tool set changes, and not when only another agent's does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp_fixtures import McpServer, connect, serving

from toolkeeper import Activation, Profile

WAIT_S = 10


@pytest.fixture
def srv(tmp_path: Any) -> Iterator[McpServer]:
    with serving(f"sqlite:///{tmp_path}/tk.db") as s:
        yield s


def _grant(srv: McpServer, profile: str, tools: tuple[str, ...], autonomy: int = 3) -> None:
    srv.gw.registry.put_profile(Profile(name=profile, autonomy=autonomy,
                                        activations=tuple(Activation(tool=t) for t in tools)))


async def test_a_2025_session_hears_its_own_change_only(srv: McpServer) -> None:
    heard: list[Any] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)
            changed.set()

    async with connect(srv, "reader", "legacy", message_handler=on_message) as c:
        assert [t.name for t in (await c.list_tools()).tools] == ["add"]
        capabilities = c.server_capabilities
        assert capabilities.tools is not None and capabilities.tools.list_changed is True
        # another agent's profile changes: nothing for this one
        await anyio.to_thread.run_sync(_grant, srv, "manual", ("add",), 0)
        await anyio.sleep(0.5)
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
            # bot's listing did not change: its stream stays quiet
            with anyio.move_on_after(0.5) as quiet:
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
