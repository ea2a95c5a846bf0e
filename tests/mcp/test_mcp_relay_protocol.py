"""Issue 28: what toolkeeper's ``/mcp`` relays of an upstream's call besides its result, and
the protocol details around it — against a real upstream (conformance_upstream.py, the
official SDK's ``MCPServer`` over streamable HTTP), driven by the official SDK client in
both eras or, where the wire itself is the point, by plain HTTP.

- progress: the upstream's ``notifications/progress`` reach the agent's request, and only
  when the agent asked (a progress token goes upstream only then);
- logging: messages at or above the agent's level (``logging/setLevel`` in 2025-11-25, the
  per-request ``_meta`` level in 2026-07-28), none without a level;
- client capabilities forwarded upstream; an upstream's ``-32021`` answered as ``-32021``
  (HTTP 400, ``data.requiredCapabilities``);
- ``Mcp-Method``/``Mcp-Name`` that disagree with the body: HTTP 400 ``HeaderMismatch``;
- ``traceparent`` continued into the call's ``execute_tool`` span and forwarded upstream.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import mcp_types as types
import pytest
from conformance_upstream import fronted
from mcp.shared.exceptions import MCPError
from mcp_fixtures import ERAS, McpServer, connect
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolkeeper import Activation
from toolkeeper.upstream.downstream import Downstream
from toolkeeper.upstream.notes import Notes

pytestmark = [
    pytest.mark.slow,  # a real upstream and a real gateway, each on a port
    # logging is deprecated in 2026-07-28 (SEP-2577): the SDK says so on every message
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]

MODERN = "2026-07-28"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def traced() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory,
        traced: InMemorySpanExporter) -> Iterator[McpServer]:
    with fronted(tmp_path_factory.mktemp("relay-protocol")) as s:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(traced))
        s.gw._tracer = provider.get_tracer("t")
        yield s


def _post(srv: McpServer, method: str, params: dict[str, Any], *,
          caps: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    """One 2026-07-28 request over plain HTTP: the status and every JSON-RPC message of
    the answer (a JSON body, or each event of an SSE stream)."""
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps or {}, **(meta or {})}}}
    sent = {"Authorization": f"Bearer {srv.tokens['bot']}", "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}
    if "name" in params:
        sent["Mcp-Name"] = params["name"]
    resp = httpx.post(srv.url, json=body, headers={**sent, **(headers or {})}, timeout=30)
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        return resp.status_code, [json.loads(line[5:]) for line in resp.text.splitlines()
                                  if line.startswith("data:") and line[5:].strip()]
    return resp.status_code, [resp.json()]


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


# -- progress ------------------------------------------------------------------------------

@pytest.mark.parametrize("era", ERAS)
async def test_an_upstreams_progress_reaches_the_agents_request(srv: McpServer,
                                                                era: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async with connect(srv, "bot", era) as client:
        result = await client.call_tool("test_tool_with_progress", {},
                                        progress_callback=progress)
    assert not result.is_error, result
    assert seen == [(0.0, 100.0, "Completed step 0 of 100"),
                    (50.0, 100.0, "Completed step 50 of 100"),
                    (100.0, 100.0, "Completed step 100 of 100")]
    assert _text(result) != "0"  # the upstream got a progress token (the gateway's own)


@pytest.mark.parametrize("era", ERAS)
async def test_no_progress_token_goes_upstream_unless_the_agent_sent_one(
        srv: McpServer, era: str) -> None:
    async with connect(srv, "bot", era) as client:
        result = await client.call_tool("test_tool_with_progress", {})
    assert _text(result) == "0"  # the fixture answers the token it saw, 0 for none


# -- logging ---------------------------------------------------------------------------------

async def _logs(srv: McpServer, era: str, level: str | None, tool: str) -> list[Any]:
    got: list[Any] = []

    async def sink(params: types.LoggingMessageNotificationParams) -> None:
        got.append((params.level, params.data))

    kwargs: dict[str, Any] = {"logging_callback": sink}
    if era != "legacy" and level is not None:
        kwargs["log_level"] = level
    async with connect(srv, "bot", era, **kwargs) as client:
        if era == "legacy" and level is not None:
            await client.set_logging_level(level)  # type: ignore[arg-type]
        result = await client.call_tool(tool, {})
    assert not result.is_error, result
    return got


@pytest.mark.parametrize("era", ERAS)
async def test_an_upstreams_log_messages_reach_the_agent_at_its_level(
        srv: McpServer, era: str) -> None:
    assert await _logs(srv, era, "debug", "test_tool_with_logging") == [
        ("info", "Tool execution started"), ("info", "Tool processing data"),
        ("info", "Tool execution completed")]
    # test_logging_tool logs once at info and once at error
    assert await _logs(srv, era, "error", "test_logging_tool") == [
        ("error", "an error message from test_logging_tool")]


@pytest.mark.parametrize("era", ERAS)
async def test_no_log_messages_without_a_level(srv: McpServer, era: str) -> None:
    assert await _logs(srv, era, None, "test_tool_with_logging") == []
    assert await _logs(srv, era, None, "test_logging_tool") == []


@pytest.mark.parametrize(("floor", "passed"), [
    (None, []), ("debug", ["info", "error"]), ("info", ["info", "error"]),
    ("warning", ["error"]), ("emergency", [])])
async def test_the_gateway_itself_relays_only_at_or_above_the_level(
        floor: str | None, passed: list[str]) -> None:
    """An upstream that ignores the level (a 2025-era one sends every level): the gateway's
    own filter, on the messages as they come off the upstream's response stream."""
    got: list[str] = []

    async def sink(level: str, data: Any, logger: str | None) -> None:
        got.append(level)

    notes = Notes(Downstream(log_level=floor, log=sink if floor else None), 1)
    for level in ("info", "error"):
        await notes.deliver({"jsonrpc": "2.0", "method": "notifications/message",
                             "params": {"level": level, "data": "x"}})
    await notes.deliver({"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "loud", "data": "not a level"}})
    assert got == passed


async def test_the_log_level_of_one_session_is_not_another_ones(srv: McpServer) -> None:
    got: list[Any] = []

    async def sink(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params.data)

    async with connect(srv, "bot", "legacy") as chatty:
        await chatty.set_logging_level("debug")
        async with connect(srv, "bot", "legacy", logging_callback=sink) as quiet:
            await quiet.call_tool("test_tool_with_logging", {})
    assert got == []


# -- client capabilities --------------------------------------------------------------------

def test_an_upstreams_missing_capability_is_the_agents_32021_with_http_400(
        srv: McpServer) -> None:
    status, [reply] = _post(srv, "tools/call", {"name": "test_missing_capability",
                                                "arguments": {}})
    assert status == 400, reply
    assert reply["error"]["code"] == -32021, reply
    assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_the_agents_capabilities_are_forwarded_upstream(srv: McpServer) -> None:
    status, replies = _post(srv, "tools/call", {"name": "test_missing_capability",
                                                "arguments": {}}, caps={"sampling": {}})
    assert status == 200, replies
    assert replies[-1]["result"]["content"][0]["text"] == \
        "Client declared sampling capability; proceeding."


async def test_a_2025_agent_without_the_capability_gets_32021(srv: McpServer) -> None:
    async with connect(srv, "bot", "legacy") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("test_missing_capability", {})
    assert refused.value.code == -32021
    assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}


# -- routing headers -------------------------------------------------------------------------

@pytest.mark.parametrize("header", [{"Mcp-Name": "test_audio_content"},
                                    {"Mcp-Method": "tools/list"}],
                         ids=["name", "method"])
def test_a_routing_header_that_disagrees_with_the_body_is_refused(
        srv: McpServer, header: dict[str, str]) -> None:
    status, [reply] = _post(srv, "tools/call", {"name": "test_simple_text", "arguments": {}},
                            headers=header)
    assert (status, reply["error"]["code"]) == (400, -32020), reply


def test_a_base64_routing_header_is_read_decoded(srv: McpServer) -> None:
    encoded = "=?base64?" + base64.b64encode(b"test_simple_text").decode() + "?="
    status, replies = _post(srv, "tools/call", {"name": "test_simple_text", "arguments": {}},
                            headers={"Mcp-Name": encoded})
    assert status == 200, replies
    wrong = "=?base64?" + base64.b64encode(b"test_audio_content").decode() + "?="
    status, [reply] = _post(srv, "tools/call", {"name": "test_simple_text", "arguments": {}},
                            headers={"Mcp-Name": wrong})
    assert (status, reply["error"]["code"]) == (400, -32020), reply


# -- trace context ---------------------------------------------------------------------------

def test_traceparent_is_continued_into_the_span_and_forwarded_upstream(
        srv: McpServer, traced: InMemorySpanExporter) -> None:
    traced.clear()
    status, replies = _post(srv, "tools/call", {"name": "tk_seen_meta", "arguments": {}},
                            meta={"traceparent": PARENT, "tracestate": "vendor=1"})
    assert status == 200, replies
    upstream_saw = json.loads(replies[-1]["result"]["content"][0]["text"])
    assert upstream_saw.get("traceparent") == PARENT
    assert upstream_saw.get("tracestate") == "vendor=1"
    [span] = [s for s in traced.get_finished_spans() if s.name == "execute_tool tk_seen_meta"]
    assert span.parent is not None and span.parent.is_remote
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == "00f067aa0ba902b7"


def test_a_malformed_traceparent_is_neither_continued_nor_forwarded(
        srv: McpServer, traced: InMemorySpanExporter) -> None:
    traced.clear()
    status, replies = _post(srv, "tools/call", {"name": "tk_seen_meta", "arguments": {}},
                            meta={"traceparent": "00-zz-not-a-trace"})
    assert status == 200, replies
    assert "traceparent" not in json.loads(replies[-1]["result"]["content"][0]["text"])
    [span] = [s for s in traced.get_finished_spans() if s.name == "execute_tool tk_seen_meta"]
    assert span.parent is None


# -- list results: cache hints, order ---------------------------------------------------------

@pytest.mark.parametrize(("method", "params", "meta"), [
    ("tools/list", {}, {}),  # the lean path
    ("tools/list", {}, {"traceparent": PARENT}),  # the SDK's
    ("prompts/list", {}, {}), ("resources/list", {}, {}),
    ("resources/templates/list", {}, {}),
    ("resources/read", {"uri": "test://static-text"}, {})])
def test_lists_depend_on_the_caller_so_they_are_private_and_stale_at_once(
        srv: McpServer, method: str, params: dict[str, Any], meta: dict[str, Any]) -> None:
    headers = {"Mcp-Name": params["uri"]} if "uri" in params else {}
    status, [reply] = _post(srv, method, params, meta=meta, headers=headers)
    assert status == 200, reply
    assert (reply["result"]["ttlMs"], reply["result"]["cacheScope"]) == (0, "private")


def test_tools_are_listed_in_a_deterministic_order(srv: McpServer) -> None:
    names = [[t["name"] for t in _post(srv, "tools/list", {})[1][0]["result"]["tools"]]
             for _ in range(2)]
    assert names[0] == names[1] == sorted(names[0])
    assert "test_simple_text" in names[0]


# -- names ------------------------------------------------------------------------------------

def test_upstream_names_the_gateway_rule_changes_never_share_a_name(srv: McpServer) -> None:
    """Gateway names are MCP's 1-128 characters of ``[A-Za-z0-9_.-]`` (no leading dot): a
    dotted upstream name is kept, a character outside the set becomes ``_``, a longer name is
    cut. Two upstream names landing on one gateway name: the one already named so keeps it,
    else neither is imported — never one drifting into the other."""
    from toolkeeper.upstream.servers import ServerConfig

    long = "x" * 130
    tools = [types.Tool(name=n, input_schema={"type": "object"}) for n in (
        "tk.dotted", "tk dotted", "tk_dotted", "only+dotted", long + "a", long + "b")]
    cfg = ServerConfig(name="conf", url="http://127.0.0.1:9/mcp", prefix="")  # as fronted
    report = srv.gw._upstream.listing(cfg, tools)
    again = srv.gw._upstream.listing(cfg, list(reversed(tools)))
    imported = {t.name: t.implementation["tool"] for t in srv.gw.catalog.all_tools()
                if "dotted" in t.name or t.name[:2] == "xx"}
    assert sorted(report.imported) == ["only_dotted", "tk.dotted", "tk_dotted"]
    assert imported == {"only_dotted": "only+dotted", "tk.dotted": "tk.dotted",
                        "tk_dotted": "tk_dotted"}
    assert again.quarantined == [] and sorted(again.unchanged) == [
        "only_dotted", "tk.dotted", "tk_dotted"]


def test_a_dotted_128_character_name_is_listed_and_called(srv: McpServer) -> None:
    """MCP's longest name, dots included, is a gateway name end to end: imported, listed
    over MCP, shown by REST."""
    from toolkeeper.upstream.servers import ServerConfig

    name = "a.b-" + "c" * 124
    assert len(name) == 128
    cfg = ServerConfig(name="conf", url="http://127.0.0.1:9/mcp", prefix="")
    assert srv.gw._upstream.listing(cfg, [types.Tool(
        name=name, input_schema={"type": "object"})]).imported == [name]
    auto = srv.gw.catalog.profiles[("default", "auto")].profile
    srv.gw.registry.put_profile(auto.model_copy(update={"activations": (
        *auto.activations, Activation(tool=name))}), replace=True)
    try:
        listed = [t["name"] for t in _post(srv, "tools/list", {})[1][0]["result"]["tools"]]
    finally:
        srv.gw.registry.put_profile(auto, replace=True)
    assert name in listed
    found = srv.gw.store.registry.tool(name, None)
    assert found is not None
    got = httpx.get(f"{srv.base}/tools/{found[0]}", timeout=20,
                    headers={"Authorization": f"Bearer {srv.tokens['admin']}"})
    assert got.status_code == 200 and got.json()["name"] == name, got.text


# -- x-mcp-header parameters (SEP-2243 Mcp-Param-*) -------------------------------------------

@pytest.mark.parametrize(("headers", "status"), [
    ({"Mcp-Param-Region": "eu-west"}, 200),
    ({"Mcp-Param-Region": "=?base64?" + base64.b64encode(b"eu-west").decode() + "?="}, 200),
    ({}, 400),  # omitted though the body has it (a request the lean path would take)
    ({"Mcp-Param-Region": "us-east"}, 400)],
    ids=["matching", "base64", "omitted", "mismatched"])
def test_mcp_param_headers_are_checked_against_the_callers_schema(
        srv: McpServer, headers: dict[str, str], status: int) -> None:
    got, replies = _post(srv, "tools/call", {"name": "test_x_mcp_header",
                                             "arguments": {"region": "eu-west"}},
                         headers=headers)
    assert got == status, replies
    if status == 400:
        assert replies[0]["error"]["code"] == -32020, replies
    else:
        assert replies[-1]["result"]["content"][0]["text"] == "region=eu-west"


async def test_a_session_that_set_a_level_is_served_by_the_sdk_not_the_lean_path(
        srv: McpServer) -> None:
    """A 2025 session the lean path would serve (a request already served here, no
    capability to answer questions): once it sets a log level its calls carry log messages,
    so they are the SDK's."""
    got: list[Any] = []

    async def sink(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params.data)

    async with connect(srv, "bot", "legacy", logging_callback=sink) as client:
        await client.list_tools()  # the session is known here: the lean path may serve it
        await client.call_tool("test_simple_text", {})
        await client.set_logging_level("info")
        await client.call_tool("test_tool_with_logging", {})
    assert got == ["Tool execution started", "Tool processing data", "Tool execution completed"]
