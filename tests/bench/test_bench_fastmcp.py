"""The MCP benchmark's FastMCP peer: the proxy launcher starts a FastMCP proxy (from the bench
peers venv ``make bench`` creates) that forwards to the upstream, and stops it; the CPU
accounting counts a process's time. No timing is asserted."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from tests.support.required import missing
from toolkeeper.bench.mcp import _fastmcp, _peers_python
from toolkeeper.bench.proc_cpu import cpu_seconds
from toolkeeper.bench.procs import serving

PEERS = _peers_python()


async def _echo_through(base: str, times: int) -> list[str]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    async with httpx2.AsyncClient() as http, Client(
            streamable_http_client(f"{base}/mcp", http_client=http), mode="auto",
            cache=None) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
        texts = []
        for i in range(times):
            result = await client.call_tool("echo", {"text": f"hi {i}"})
            assert not result.is_error
            texts += [c.text for c in result.content]
        return texts


def _peers() -> str:
    """The bench peers venv's python; missing, a loud skip locally and a failure in CI."""
    if PEERS is None:
        message = ("NO BENCH PEERS VENV: the FastMCP proxy runs from .venv-bench-peers; "
                   "`make bench-peers` creates it (.ci/run does)")
        missing(message)
    return PEERS


@pytest.mark.slow
def test_fastmcp_proxy_starts_forwards_every_call_and_stops() -> None:
    peers = _peers()
    with serving([sys.executable, "-m", "toolkeeper.bench.mcp_upstream", "{port}"]) as up, \
            _fastmcp(peers, f"{up.base}/mcp") as proxy:
        texts = asyncio.run(_echo_through(proxy.base, 5))
        assert texts == [f"hi {i}" for i in range(5)]
        assert cpu_seconds(proxy.pid) > 0
        pid = proxy.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_cpu_seconds_counts_this_process() -> None:
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(200_000))
    assert cpu_seconds(os.getpid()) >= before > 0
