"""SPEC §10 (the lean upstream client) with the MCP servers people run: the gateway's lean
client handshakes with each real server of the matrix and is the one used for its calls —
a server that falls back to the SDK's client fails here. Servers: FastMCP 2.x and 3.x, the
1.x SDK's FastMCP and low-level servers, the 2.x SDK's low-level server (both eras),
mcp-server-time (the 2.x SDK's high-level server), ``@modelcontextprotocol/server-everything``;
answers as SSE and as JSON, with sessions and without. Pinned in venvs of their own
(``make handshake-peers``).

And the fallback itself: logged once with its reason and counted in
``toolkeeper_upstream_sdk_fallbacks_total``, the call still served by the SDK's client.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from peers import entry, node, peer_python
from toolkeeper import Gateway
from toolkeeper.bench.procs import free_port, listening
from toolkeeper.upstream.http_client import HandshakeRefused, LeanHttpClient

pytestmark = pytest.mark.slow
PEER = Path(__file__).resolve().parent / "handshake_peer.py"
OLD, MODERN = "2025-11-25", "2026-07-28"


@dataclass(frozen=True)
class Peer:
    venv: str
    """A venv of ``make handshake-peers``; ``""``: the project's (2.x SDK); ``"node"``."""
    kind: str
    """``handshake_peer.py``'s KIND (or ``server-everything``)."""
    json: bool
    """Answers as JSON (else SSE)."""
    era: str
    """The protocol the lean client ends up speaking with it."""
    tool: str = "pure"
    stateless: bool = False
    """Sessions off on the server (its framework's ``stateless_http``)."""
    arguments: tuple[tuple[str, Any], ...] = (("x", 7),)
    answer: str = "pure 7"


TIME = {"tool": "get_current_time", "arguments": (("timezone", "UTC"),), "answer": "UTC"}
MATRIX = {
    "sdk1-fastmcp-sse": Peer("mcp1", "sdk1-fastmcp", False, OLD),
    "sdk1-fastmcp-json": Peer("mcp1", "sdk1-fastmcp", True, OLD),
    "sdk1-lowlevel-sse": Peer("mcp1", "sdk1-lowlevel", False, OLD),
    "sdk1-lowlevel-json": Peer("mcp1", "sdk1-lowlevel", True, OLD),
    "fastmcp2-sse": Peer("fastmcp2", "fastmcp", False, OLD),
    "fastmcp2-json": Peer("fastmcp2", "fastmcp", True, OLD),
    "fastmcp3-sse": Peer("fastmcp3", "fastmcp", False, OLD),
    "fastmcp3-json": Peer("fastmcp3", "fastmcp", True, OLD),
    "sdk1-fastmcp-stateless": Peer("mcp1", "sdk1-fastmcp", False, OLD, stateless=True),
    "sdk1-lowlevel-stateless-json": Peer("mcp1", "sdk1-lowlevel", True, OLD, stateless=True),
    "fastmcp2-stateless": Peer("fastmcp2", "fastmcp", False, OLD, stateless=True),
    "fastmcp3-stateless-json": Peer("fastmcp3", "fastmcp", True, OLD, stateless=True),
    "sdk2-lowlevel-sse": Peer("", "sdk2-lowlevel", False, MODERN),
    "sdk2-lowlevel-json": Peer("", "sdk2-lowlevel", True, MODERN),
    "mcp-server-time-sse": Peer("", "time", False, MODERN, **TIME),  # type: ignore[arg-type]
    "mcp-server-time-json": Peer("", "time", True, MODERN, **TIME),  # type: ignore[arg-type]
    "server-everything": Peer("node", "server-everything", False, OLD, tool="echo",
                              arguments=(("message", "hi"),), answer="Echo: hi"),
}


def _serve(peer: Peer) -> Any:
    """The running server of ``peer``: its base URL while the block runs."""
    if peer.venv == "node":
        port = free_port()  # server-everything takes its port from the environment
        return listening([node(), entry("server-everything"), "streamableHttp"],
                         {**os.environ, "PORT": str(port)}, port=port)
    python = peer_python(peer.venv) if peer.venv else sys.executable
    flags = [*(["json"] if peer.json else []), *(["stateless"] if peer.stateless else [])]
    return listening([python, str(PEER), peer.kind, "{port}", *flags])


def _gateway(tmp: Path, url: str, tool: str = "pure") -> Gateway:
    doc = {"version": 1, "secrets": {"backend": "env"},
           "servers": [{"name": "peer", "url": url, "side_effect": "pure", "risk": "low",
                        "connect_timeout_s": 20}],
           "profiles": [{"name": "p", "autonomy": 3, "activations": [{"tool": f"peer_{tool}"}]}],
           "agents": [{"name": "a", "profile": "p"}]}
    cfg = tmp / "toolkeeper.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    return Gateway.open(f"sqlite:///{tmp}/tk.db", config=cfg)


async def _lean(url: str, *, era: str | None = None) -> tuple[str | None, str, Any]:
    """The lean client alone: its era, transport and a ``tools/list`` (``era=OLD``: the
    2025-era handshake without asking ``server/discover`` first)."""
    client = LeanHttpClient(url, headers={}, timeout_s=20, connect_timeout_s=20)
    try:
        await asyncio.wait_for(client.initialize() if era == OLD else client.start(), 20)
        listed = await asyncio.wait_for(client.list_tools(), 20)
        return client.protocol_version, client.transport, listed
    finally:
        await client.aclose()


def _fallbacks(gw: Gateway) -> list[str]:
    return [line for line in gw.metrics.render().decode().splitlines()
            if line.startswith("toolkeeper_upstream_sdk_fallbacks_total{")]


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_the_lean_client_serves_each_real_server(name: str, tmp_path: Path) -> None:
    peer = MATRIX[name]
    with _serve(peer) as base:
        url = f"{base}/mcp"
        era, transport, listed = asyncio.run(_lean(url))
        assert (era, transport) == (peer.era, "raw")
        assert peer.tool in {t.name for t in listed.tools}
        with _gateway(tmp_path, url, peer.tool) as gw:
            for _ in range(2):  # the first call connects, the second reuses
                done = gw.call_sync(f"peer_{peer.tool}", agent="a",
                                    arguments=dict(peer.arguments))
                assert done.status.value == "succeeded", done
                assert peer.answer in str(done.output), done
            # the rule under test: a server of the matrix never falls back
            assert gw.upstreams.get().fallbacks.reasons == {}
            assert _fallbacks(gw) == []


@pytest.mark.parametrize("kind", ["sdk2-lowlevel", "time"])
def test_a_dual_era_server_also_holds_a_2025_session(kind: str) -> None:
    with _serve(Peer("", kind, False, OLD)) as base:
        era, transport, listed = asyncio.run(_lean(f"{base}/mcp", era=OLD))
        assert (era, transport) == (OLD, "raw") and listed.tools


def test_a_fallback_is_logged_once_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    async def refuse(self: LeanHttpClient) -> None:
        raise HandshakeRefused("initialize refused: as if the server did")

    # broken on purpose: the server refuses the lean client's 2025-era handshake
    monkeypatch.setattr(LeanHttpClient, "initialize", refuse)
    with _serve(MATRIX["sdk1-fastmcp-sse"]) as base, _gateway(tmp_path, f"{base}/mcp") as gw:
        with caplog.at_level(logging.WARNING, logger="toolkeeper.upstream"):
            for _ in range(3):
                done = gw.call_sync("peer_pure", agent="a", arguments={"x": 7})
                assert done.status.value == "succeeded" and "pure 7" in str(done.output)
        warned = [r.getMessage() for r in caplog.records
                  if "lean client cannot handshake" in r.getMessage()]
        assert len(warned) == 1 and "initialize_refused" in warned[0], warned
        assert _fallbacks(gw) == ['toolkeeper_upstream_sdk_fallbacks_total'
                                  '{reason="initialize_refused",server="peer"} 1.0']
