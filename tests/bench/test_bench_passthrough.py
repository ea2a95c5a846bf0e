"""The MCP benchmarks' passthrough floor (issue 32): it must carry a call in both protocol
eras exactly as the upstream would answer it, or its figures are not a floor of the same
work."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator

import httpx
import pytest

from toolkeeper.bench.mcp import ECHO, passthrough
from toolkeeper.bench.procs import Served, serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Served, Served]]:
    with contextlib.ExitStack() as stack:
        up = stack.enter_context(
            serving([sys.executable, "-m", "toolkeeper.bench.mcp_upstream", "{port}"]))
        yield up, stack.enter_context(passthrough(f"{up.base}/mcp"))


async def _call(served: Served, mode: str) -> tuple[str, str]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import TextContent

    from mcp import Client

    async with httpx2.AsyncClient(timeout=10) as http, Client(
            streamable_http_client(f"{served.base}/mcp", http_client=http), mode=mode,
            cache=None) as client:
        result = await client.call_tool("echo", ECHO)
        assert not result.is_error and isinstance(result.content[0], TextContent)
        return client.protocol_version, result.content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_call_through_the_passthrough_speaks_the_era_it_would_speak_directly(
        pair: tuple[Served, Served], mode: str) -> None:
    up, forwarder = pair
    direct = asyncio.run(_call(up, mode))
    through = asyncio.run(_call(forwarder, mode))
    assert through == direct == (direct[0], ECHO["text"])
    # 2026-07-28 needs its Mcp-Method header forwarded: without it the client would fall
    # back to a 2025 session and the floor would measure other work than the direct side
    assert (direct[0] >= "2026") == (mode == "auto")


def test_the_passthrough_refuses_the_stream_a_2025_client_may_open(
        pair: tuple[Served, Served]) -> None:
    answer = httpx.get(f"{pair[1].base}/mcp", headers={"Accept": "text/event-stream"},
                       timeout=10)
    assert answer.status_code == 405 and "POST" in answer.headers["allow"]
