"""SPEC §10 MCP item: one upstream tool called directly vs through toolkeeper over
streamable HTTP, by the same client (the official SDK's), in the same run.

The upstream (:mod:`toolkeeper.bench.mcp_upstream`) and ``toolkeeper serve`` (its config
imports the upstream's tool) run as separate processes on loopback. Latency: alternating
blocks of sequential calls on each side; added = governed - direct. Throughput: 16 calls in
flight on one connection for ``duration_s`` per side. Every wait bounded.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, Target, percentile
from toolkeeper.bench.procs import listening

NAME = "mcp"
ADDED_P50_MS = Target(op="<=", bound=1.5)
RATIO = Target(op=">=", bound=0.5)
IN_FLIGHT = 16
CONFIG = """version: 1
servers:
  - {{name: up, url: "{url}", side_effect: pure, risk: low}}
profiles:
  - {{name: bench, autonomy: 3, activations: [{{tool: up_echo}}]}}
agents:
  - {{name: bench-agent, profile: bench}}
"""


def bench_mcp(sizes: Sizes) -> BenchResult:
    result = BenchResult(name=NAME, title="MCP: upstream tool direct vs through toolkeeper "
                                          "(SPEC 10.3)")
    with tempfile.TemporaryDirectory(prefix="toolkeeper-mcp-") as tmp, \
            listening([sys.executable, "-m", "toolkeeper.bench.mcp_upstream", "{port}"]) as up:
        direct_url = f"{up}/mcp"
        cfg = Path(tmp) / "toolkeeper.yaml"
        cfg.write_text(CONFIG.format(url=direct_url))
        db = f"sqlite:///{tmp}/bench.db"
        token = _agent_token(db, cfg)
        serve = [sys.executable, "-m", "toolkeeper.cli", "--db", db, "serve", "--port",
                 "{port}", "--config", str(cfg), "--log-level", "warning", "--workers", "2"]
        with listening(serve) as gw_base:
            figures = asyncio.run(_measure(direct_url, f"{gw_base}/mcp", token, sizes))
    d, g = sorted(figures["direct"]), sorted(figures["governed"])
    d50, g50, d99, g99 = (percentile(d, 50), percentile(g, 50), percentile(d, 99),
                          percentile(g, 99))
    d_rate, g_rate = figures["direct_rate"][0], figures["governed_rate"][0]
    result.rows += [
        Row(metric="mcp_direct_p50", value=d50, unit="ms", decimals=2),
        Row(metric="mcp_direct_p99", value=d99, unit="ms", decimals=2),
        Row(metric="mcp_governed_p50", value=g50, unit="ms", decimals=2),
        Row(metric="mcp_governed_p99", value=g99, unit="ms", decimals=2),
        Row(metric="mcp_added_p50", value=g50 - d50, unit="ms", target=ADDED_P50_MS,
            decimals=2),
        Row(metric="mcp_added_p99", value=g99 - d99, unit="ms", decimals=2),
        Row(metric=f"mcp_direct_calls_per_s_{IN_FLIGHT}", value=d_rate, unit="calls/s",
            decimals=0),
        Row(metric=f"mcp_governed_calls_per_s_{IN_FLIGHT}", value=g_rate, unit="calls/s",
            decimals=0),
        Row(metric="mcp_throughput_ratio", value=g_rate / d_rate if d_rate else 0.0,
            unit="x", target=RATIO, decimals=2),
    ]
    result.notes.append(f"{len(d)} calls per side in alternating blocks, sequential; "
                        f"throughput: {IN_FLIGHT} in flight on one connection for "
                        f"{sizes.duration_s:g} s per side; the SDK client in mode auto "
                        "(2026-07-28 on both sides)")
    return result


def _agent_token(db: str, cfg: Path) -> str:
    from toolkeeper.gateway import Gateway

    with Gateway.open(db, config=cfg) as gw:
        if "up_echo" not in {t.name for t in gw.catalog.all_tools()}:
            raise BenchError("toolkeeper did not import the upstream's echo tool")
        return gw.store.tokens.create(tenant_id="default", role="agent",
                                      agent="bench-agent")[1]


async def _measure(direct: str, governed: str, token: str,
                   sizes: Sizes) -> dict[str, list[float]]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    out: dict[str, list[float]] = {"direct": [], "governed": []}
    headers = {"direct": {}, "governed": {"Authorization": f"Bearer {token}"}}
    urls = {"direct": direct, "governed": governed}
    clients: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers=headers["direct"]) as h1, \
            httpx2.AsyncClient(headers=headers["governed"]) as h2, \
            Client(streamable_http_client(urls["direct"], http_client=h1), mode="auto",
                   cache=None) as c1, \
            Client(streamable_http_client(urls["governed"], http_client=h2), mode="auto",
                   cache=None) as c2:
        clients = {"direct": c1, "governed": c2}
        for side, c in clients.items():  # warm up, and check both answer the same
            for _ in range(max(20, sizes.warmup // 20)):
                r = await c.call_tool(_tool(side), {"text": "hi"})
                if r.is_error:
                    raise BenchError(f"{side} call failed: {r.content}")
        deadline = time.monotonic() + sizes.budget_s
        per_block = max(10, sizes.block_calls // 5)
        for _ in range(sizes.blocks):
            for side, c in clients.items():
                for _ in range(per_block):
                    t0 = time.perf_counter_ns()
                    await c.call_tool(_tool(side), {"text": "hi"})
                    out[side].append((time.perf_counter_ns() - t0) / 1e6)
            if time.monotonic() > deadline:
                break
        for side, c in clients.items():
            out[f"{side}_rate"] = [await _rate(c, _tool(side), sizes.duration_s)]
    return out


def _tool(side: str) -> str:
    return "echo" if side == "direct" else "up_echo"


async def _rate(client: Any, tool: str, seconds: float) -> float:
    done = 0
    stop = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < stop:
            r = await client.call_tool(tool, {"text": "hi"})
            if r.is_error:
                raise BenchError(f"{tool} failed under load: {r.content}")
            done += 1

    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(IN_FLIGHT))),
                           seconds + 60)
    return done / (time.monotonic() - started)
