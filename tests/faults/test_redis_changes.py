"""Issue 13 item 2: Redis killed under two replicas on one PostgreSQL — definition changes
(a tool published, a profile changed) still reach the other replica and its connected MCP
agents (``tools/list_changed`` in both protocol eras), through the database's change counter,
within a bounded time, with a log line and ``toolkeeper_redis_fallbacks_total`` on each
side. Printed: how long a change took through Redis, and after Redis died."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.mcp.mcp_fixtures import McpServer, connect, serving
from tests.support.redisserver import RedisServer, RedisUnavailable
from tests.support.required import missing
from tests.support.waiting import wait_until
from toolkeeper import Activation, Gateway, Profile, Risk, SideEffect, tool

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
V = "2026-07-28"
BOUND_S = 10.0
"""A change must reach the other replica's agents within this (the counter is polled about
once a second; through Redis it is immediate)."""


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def late_tool(n: int) -> int:
    """Published on one replica after Redis died."""
    return n


@pytest.fixture
def redis_server() -> Iterator[tuple[RedisServer, str]]:
    server = RedisServer()
    try:
        url = server.start()
    except RedisUnavailable as exc:
        missing(f"REDIS NOT AVAILABLE, Redis fault test NOT RUN: {exc}")
    yield server, url
    server.stop()


def _grant(gw: Gateway, *tools: str) -> None:
    gw.registry.put_profile(Profile(name="reading", autonomy=3, activations=tuple(
        Activation(tool=t) for t in tools)), replace=True)


def _publish_late_tool(gw: Gateway) -> None:
    gw.registry.register(late_tool)
    _grant(gw, "add", "pay", "late_tool")


def _fallbacks(gw: Gateway, use: str) -> float:
    for line in gw.metrics.render().decode().splitlines():
        if line.startswith(f'toolkeeper_redis_fallbacks_total{{use="{use}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def _heard_within(stream: Any, legacy_heard: anyio.Event, started: float) -> float:
    with anyio.fail_after(BOUND_S):
        event = await stream.__anext__()
        await legacy_heard.wait()
    assert type(event).__name__ == "ToolsListChanged"
    return time.monotonic() - started


async def _two_changes(b: McpServer, a: Gateway, server: RedisServer) -> tuple[float, float]:
    """A change on replica A with Redis up, then one after Redis is killed: how long each
    took to reach replica B's agents (both eras)."""
    legacy_heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            legacy_heard.set()

    async with connect(b, "reader", "legacy", message_handler=on_message) as legacy, \
            connect(b, "reader", V) as modern:
        for client in (legacy, modern):
            assert [t.name for t in (await client.list_tools()).tools] == ["add"]
        async with modern.listen(tools_list_changed=True) as stream:
            started = time.monotonic()
            await anyio.to_thread.run_sync(_grant, a, "add", "pay")
            through_redis = await _heard_within(stream, legacy_heard, started)
            legacy_heard = anyio.Event()
            assert server.proc is not None
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=10)
            # both replicas notice the lost subscription (a log line and the metric)
            await anyio.to_thread.run_sync(lambda: wait_until(
                lambda: all(_fallbacks(gw, "change_listen") >= 1 for gw in (a, b.gw)),
                timeout=BOUND_S, what="both replicas notice that Redis is gone"))
            started = time.monotonic()
            await anyio.to_thread.run_sync(_publish_late_tool, a)
            through_database = await _heard_within(stream, legacy_heard, started)
        for client in (legacy, modern):
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["add", "late_tool", "pay"], names
        done = await modern.call_tool("late_tool", {"n": 7})
        assert done.structured_content == {"result": 7}
    return through_redis, through_database


async def test_killed_redis_leaves_changes_to_the_database_counter_within_a_bound(
        pg_url: str, redis_server: tuple[RedisServer, str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    server, url = redis_server
    monkeypatch.setenv("TOOLKEEPER_REDIS_URL", url)  # both replicas use Redis
    caplog.set_level(logging.WARNING, logger="toolkeeper.redis")
    with serving(pg_url) as b:
        a = await anyio.to_thread.run_sync(Gateway.open, pg_url)
        try:
            through_redis, through_database = await _two_changes(b, a, server)
        finally:
            await anyio.to_thread.run_sync(a.close)
        assert _fallbacks(a, "change_announce") >= 1  # the writes made without Redis
        assert _fallbacks(b.gw, "change_announce") == 0
    assert "change not announced" in caplog.text
    assert caplog.text.count("changes of other processes are read from the database") >= 2
    print(f"\nchange reached the other replica's MCP agents: through Redis "
          f"{through_redis * 1000:.0f} ms; Redis killed, through the database's change "
          f"counter {through_database * 1000:.0f} ms (bound {BOUND_S:.0f} s)")
