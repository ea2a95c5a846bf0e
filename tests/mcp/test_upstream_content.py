"""SPEC §7 MCP, §2 step 10: an upstream MCP tool's result reaches the caller as the upstream
sent it. Through toolkeeper's ``/mcp`` the client gets the upstream's own content blocks
(text, image, audio, resource link, embedded resource, annotations) and
``structuredContent``, in both protocol eras; REST and the library carry the same blocks in
the result's ``mcp`` field, and an idempotent replay returns them again. Text is still
redacted of secrets and capped. Upstreams: the real ``@modelcontextprotocol/server-everything``
(npm, streamable HTTP) and a FastMCP server (``fastmcp_fixture.py``, stdio), behind a real
``toolkeeper serve``."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from mcp.client.streamable_http import streamable_http_client

from mcp import Client, StdioServerParameters
from peers import entry, node
from tests.support.loopback import CannedMcp, serving
from toolkeeper import Gateway
from toolkeeper.bench.procs import free_port, listening
from toolkeeper.secrets import MASK

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`

FASTMCP = Path(__file__).resolve().parent / "fastmcp_fixture.py"
SECRET = "sup3r-s3cret-upstream-value"
ERAS = ("legacy", "2026-07-28")
CAP = 40
"""``max_output_chars`` of the ``capper`` agent's upstream tools."""


@dataclass
class Served:
    url: str
    """toolkeeper's ``/mcp``."""
    base: str
    everything: str
    """server-everything's own ``/mcp`` (to ask it directly)."""
    tokens: dict[str, str]


def _config(tmp: Path, everything: str) -> Path:
    upstreams = ["ev_echo", "ev_get-tiny-image", "ev_get-resource-links",
                 "ev_get-resource-reference", "ev_get-annotated-message",
                 "ev_get-structured-content", "fm_echo", "fm_media", "fm_attach", "fm_stamp"]
    doc = {"version": 1, "database": f"sqlite:///{tmp}/tk.db", "secrets": {"backend": "env"},
           "servers": [
               {"name": "ev", "url": everything, "side_effect": "pure", "risk": "low"},
               {"name": "fm", "command": [sys.executable, str(FASTMCP)],
                "side_effect": "pure", "risk": "low"}],
           "profiles": [
               {"name": "all", "autonomy": 3, "activations": [{"tool": t} for t in upstreams]},
               {"name": "capped", "autonomy": 3, "activations": [
                   {"tool": t, "policy": {"max_output_chars": CAP}}
                   for t in ("ev_echo", "ev_get-tiny-image", "fm_media")]}],
           "agents": [{"name": "bot", "profile": "all"}, {"name": "capper", "profile": "capped"}]}
    path = tmp / "toolkeeper.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("content")
    env = {**os.environ, "TOOLKEEPER_SECRET_FM__TOKEN": SECRET}
    ev_port = free_port()
    with listening([node(), entry("server-everything"), "streamableHttp"],
                   {**env, "PORT": str(ev_port)}, port=ev_port) as ev_base:
        cfg = _config(tmp, f"{ev_base}/mcp")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TOOLKEEPER_SECRET_FM__TOKEN", SECRET)
            with Gateway.open(config=cfg) as gw:  # imports and pins the upstream tools
                tokens = {a: gw.store.tokens.create(tenant_id="default", role="agent",
                                                    agent=a)[1] for a in ("bot", "capper")}
        serve = [sys.executable, "-m", "toolkeeper.cli", "serve", "--config", str(cfg),
                 "--port", "{port}"]
        with listening(serve, env) as base:
            yield Served(url=f"{base}/mcp", base=base, everything=f"{ev_base}/mcp",
                         tokens=tokens)


@asynccontextmanager
async def _toolkeeper(srv: Served, who: str, era: str) -> AsyncIterator[Client]:
    """The official SDK client, as ``who``, on toolkeeper's ``/mcp`` in ``era``."""
    headers = {"Authorization": f"Bearer {srv.tokens[who]}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http, \
            Client(streamable_http_client(srv.url, http_client=http),
                   mode="legacy" if era == "legacy" else "auto",
                   read_timeout_seconds=30) as client:
        assert client.protocol_version == ("2025-11-25" if era == "legacy" else era)
        yield client


async def _direct(srv: Served, server: str, tool: str, arguments: dict[str, Any]
                  ) -> dict[str, Any]:
    """What the upstream itself answers, asked directly with the SDK client."""
    if server == "ev":
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0)) as http, \
                Client(streamable_http_client(srv.everything, http_client=http),
                       mode="legacy") as client:
            return _body(await client.call_tool(tool, arguments))
    params = StdioServerParameters(command=sys.executable, args=[str(FASTMCP)])
    async with Client(params) as client:
        return _body(await client.call_tool(tool, arguments))


def _body(result: Any) -> dict[str, Any]:
    """A ``CallToolResult`` as the client reads it: blocks, structured content, isError."""
    wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {k: wire[k] for k in ("content", "structuredContent", "isError") if k in wire}


def _untimed(body: dict[str, Any]) -> dict[str, Any]:
    """server-everything stamps its dynamic resources with the time of the call."""
    text = re.sub(r"\d{1,2}:\d{2}:\d{2}\s?[AP]M", "<time>", repr(body))
    return {"repr": re.sub(r"[A-Za-z0-9+/]{40,}=*", "<blob>", text) if "blob" in text
            else text}


CASES = [
    ("ev", "echo", {"message": "hi"}),
    ("ev", "get-tiny-image", {}),
    ("ev", "get-resource-links", {"count": 3}),
    ("ev", "get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
    ("ev", "get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),
    ("ev", "get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("ev", "get-structured-content", {"location": "Chicago"}),
    ("fm", "echo", {"text": "hi"}),
    ("fm", "media", {"text": "a memo"}),
    ("fm", "attach", {"text": "a file"}),
]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(("server", "tool", "arguments"), CASES,
                         ids=[f"{s}_{t}-{i}" for i, (s, t, _) in enumerate(CASES)])
async def test_the_client_gets_the_upstreams_own_blocks(
        served: Served, era: str, server: str, tool: str, arguments: dict[str, Any]) -> None:
    upstream = await _direct(served, server, tool, arguments)
    async with _toolkeeper(served, "bot", era) as client:
        through = _body(await client.call_tool(f"{server}_{tool}", arguments))
    if tool == "get-resource-reference":
        assert _untimed(through) == _untimed(upstream)
    else:
        assert through == upstream


@pytest.mark.parametrize("era", ERAS)
async def test_a_fastmcp_echo_answers_its_own_text_not_a_wrapped_result(
        served: Served, era: str) -> None:
    async with _toolkeeper(served, "bot", era) as client:
        res = await client.call_tool("fm_echo", {"text": "plain words"})
    assert [(b.type, getattr(b, "text", None)) for b in res.content] == [
        ("text", "plain words")]
    assert res.structured_content == {"result": "plain words"} and not res.is_error


def _rest(srv: Served, who: str, body: dict[str, Any]) -> dict[str, Any]:
    res = httpx.post(f"{srv.base}/tools/execute", json=body, timeout=60,
                     headers={"Authorization": f"Bearer {srv.tokens[who]}"})
    assert res.status_code == 200, res.text
    out: dict[str, Any] = res.json()
    return out


def test_rest_carries_the_blocks_and_a_replay_returns_the_same_ones(served: Served) -> None:
    call = {"tool": "fm_stamp", "arguments": {}, "idempotency_key": "stamp-once"}
    first = _rest(served, "bot", call)
    blocks = first["mcp"]["content"]
    assert [b["type"] for b in blocks] == ["text", "image"] and first["status"] == "succeeded"
    assert first["output"] == blocks[0]["text"]  # the text, as before, for REST readers
    again = _rest(served, "bot", call)
    assert again["deduped"] is True and again["mcp"] == first["mcp"]
    other = _rest(served, "bot", {**call, "idempotency_key": "stamp-twice"})
    assert other["mcp"] != first["mcp"]  # the upstream answers differently on a real run
    echo = _rest(served, "bot", {"tool": "ev_echo", "arguments": {"message": "x"}})
    assert echo["mcp"] == {"content": [{"type": "text", "text": "Echo: x"}]}
    assert echo["output"] == "Echo: x"


@pytest.mark.parametrize("era", ERAS)
async def test_a_replayed_call_gives_the_mcp_client_the_recorded_blocks(
        served: Served, era: str) -> None:
    meta = {"toolkeeper/idempotency_key": f"stamp-{era}"}
    async with _toolkeeper(served, "bot", era) as client:
        first = await client.call_tool("fm_stamp", {}, meta=meta)
        again = await client.call_tool("fm_stamp", {}, meta=meta)
    assert _body(again) == _body(first) and [b.type for b in first.content] == ["text", "image"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_secret_in_upstream_text_is_masked_in_every_block(
        served: Served, era: str) -> None:
    said = f"token={SECRET}"
    async with _toolkeeper(served, "bot", era) as client:
        echo = await client.call_tool("fm_echo", {"text": said})
        media = await client.call_tool("fm_media", {"text": said})
    masked = f"token={MASK}"
    assert _body(echo) == {"content": [{"type": "text", "text": masked}],
                           "structuredContent": {"result": masked}, "isError": False}
    blocks = _body(media)["content"]
    assert blocks[0]["text"] == masked and blocks[2]["resource"]["text"] == masked
    assert SECRET not in repr(blocks)


@pytest.mark.parametrize("era", ERAS)
async def test_upstream_text_is_capped_and_blobs_are_whole_or_left_out(
        served: Served, era: str) -> None:
    long = "x" * 200
    async with _toolkeeper(served, "capper", era) as client:
        echo = await client.call_tool("ev_echo", {"message": long})
        media = await client.call_tool("fm_media", {"text": long})
        image = await client.call_tool("ev_get-tiny-image", {})
    assert _body(echo)["content"] == [{"type": "text", "text": ("Echo: " + long)[:CAP]}]
    # the budget is shared in order: the first text takes all of it; the audio, over the
    # cap, is replaced by a note; the embedded text is cut to nothing; the link is kept
    kinds = [b["type"] for b in _body(media)["content"]]
    assert kinds == ["text", "text", "resource", "resource_link"], kinds
    blocks = _body(media)["content"]
    assert blocks[0]["text"] == long[:CAP] and "audio/wav" in blocks[1]["text"]
    assert blocks[2]["resource"]["text"] == ""
    # a blob is never cut (it would not decode): the tiny image does not fit in 40 chars
    sent = (await _direct(served, "ev", "get-tiny-image", {}))["content"]
    got = _body(image)["content"]
    assert [b["type"] for b in sent] == ["text", "image", "text"]
    assert got[1]["type"] == "text" and "image/png left out" in got[1]["text"]
    texts = sent[0]["text"] + sent[2]["text"]
    assert got[0]["text"] + got[2]["text"] == texts[:CAP] and len(texts) > CAP


def test_a_blob_that_holds_a_secret_is_withheld_whole(served: Served) -> None:
    res = _rest(served, "bot", {"tool": "fm_attach", "arguments": {"text": f"pw={SECRET}\n"}})
    # masking inside base64 would corrupt it; the block is replaced, and the result says so
    assert res["mcp"] == {"content": [
        {"type": "text", "text": "[text/plain withheld: it contains a secret value]"}]}
    assert res["details"] == {"withheld_blocks": 1} and res["status"] == "succeeded"


class _Garbled(CannedMcp):
    """An upstream whose ``tools/call`` answers something that is no ``CallToolResult`` (an
    image block without data); everything else as a 2025-11-25 server would."""

    def answers(self) -> dict[str, Any]:
        return {
            "initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "garbled", "version": "1"}},
            "tools/list": {"tools": [{"name": "look", "inputSchema": {"type": "object"}}]},
            "tools/call": {"content": [{"type": "image", "mimeType": "image/png"}]}}


def test_an_answer_that_is_no_tool_result_is_invalid_output(tmp_path: Path) -> None:
    with serving(_Garbled) as base:
        doc = {"version": 1, "servers": [{"name": "raw", "side_effect": "pure", "risk": "low",
                                          "url": f"{base}/mcp"}],
               "profiles": [{"name": "p", "autonomy": 3, "activations": [{"tool": "raw_look"}]}],
               "agents": [{"name": "a", "profile": "p"}]}
        cfg = tmp_path / "toolkeeper.yaml"
        cfg.write_text(yaml.safe_dump(doc))
        with Gateway.open(f"sqlite:///{tmp_path}/tk.db", config=cfg) as gw:
            res = gw.call_sync("raw_look", agent="a")
        assert (res.status.value, res.reason) == ("failed", "invalid_output"), res
        assert res.output is None and res.mcp is None
        assert "raw: the answer is not a tool result" in (res.message or "")
