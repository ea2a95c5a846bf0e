"""SPEC §7 MCP bad input: malformed JSON-RPC, unknown methods, oversize messages, wrong-era
headers, missing, unknown or non-agent tokens — each gets the protocol's error, and the
server keeps serving everyone else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp_fixtures import ERAS, McpServer, connect, serving

LEGACY = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('bad')}/tk.db",
                 max_body_bytes=50_000) as s:
        yield s


def _post(srv: McpServer, body: Any, who: str | None = "bot", raw: bytes | None = None,
          **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {srv.tokens[who]}"} if who else {}
    return httpx.post(srv.url, headers={**LEGACY, **auth, **headers}, timeout=10,
                      content=raw if raw is not None else None,
                      json=body if raw is None else None)


def _rpc_error(resp: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error of a plain JSON or a one-event SSE answer."""
    text = resp.text
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    import json

    err: dict[str, Any] = json.loads(text)["error"]
    return err


@pytest.mark.parametrize(("who", "token", "status"), [
    (None, None, 401), (None, "tk_" + "x" * 43, 401), (None, "not-even-a-token", 401),
    ("admin", None, 403)])
def test_missing_unknown_and_non_agent_tokens_are_refused(srv: McpServer, who: str | None,
                                                          token: str | None,
                                                          status: int) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = _post(srv, INIT, who=who, **headers)
    assert resp.status_code == status
    assert _rpc_error(resp)["code"] == -32001
    if status == 401:
        assert resp.headers["www-authenticate"].startswith("Bearer")


def test_an_oversize_message_is_413_with_a_jsonrpc_error(srv: McpServer) -> None:
    big = {**INIT, "params": {**INIT["params"], "pad": "x" * 60_000}}
    resp = _post(srv, big)
    assert resp.status_code == 413 and _rpc_error(resp)["code"] == -32600


def test_malformed_json_is_a_parse_error(srv: McpServer) -> None:
    resp = _post(srv, None, raw=b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert resp.status_code == 400 and _rpc_error(resp)["code"] == -32700
    modern = _post(srv, None, raw=b"{nope", **{"MCP-Protocol-Version": "2026-07-28"})
    assert modern.status_code == 400 and _rpc_error(modern)["code"] == -32700


@pytest.mark.parametrize("bad_id", [{"a": 1}, [1], True])
def test_an_id_that_is_not_a_string_number_or_null_is_an_invalid_request(
        srv: McpServer, bad_id: Any) -> None:
    # JSON-RPC 2.0 §4: an id is a string, a number or null; anything else is not a
    # notification to accept with 202 and drop, but an Invalid Request (on both eras)
    opened = _post(srv, INIT)
    legacy = {**INIT, "id": bad_id}
    resp = _post(srv, legacy)
    assert resp.status_code == 400 and _rpc_error(resp)["code"] == -32600
    assert "id" in _rpc_error(resp)["message"] and resp.json()["id"] is None
    listing = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list", "params": {}}
    resp = _post(srv, listing, **{"Mcp-Session-Id": opened.headers["mcp-session-id"],
                                  "MCP-Protocol-Version": "2025-11-25"})
    assert resp.status_code == 400 and _rpc_error(resp)["code"] == -32600
    modern = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list",
              "params": {"_meta": ENVELOPE}}
    resp = _post(srv, modern, **{"MCP-Protocol-Version": "2026-07-28",
                                 "Mcp-Method": "tools/list"})
    assert resp.status_code == 400 and _rpc_error(resp)["code"] == -32600


def test_an_unknown_method_is_method_not_found(srv: McpServer) -> None:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/explode",
            "params": {"_meta": ENVELOPE}}
    resp = _post(srv, body, **{"MCP-Protocol-Version": "2026-07-28",
                               "Mcp-Method": "tools/explode"})
    assert _rpc_error(resp)["code"] == -32601


def test_wrong_era_headers_are_refused(srv: McpServer) -> None:
    # initialize belongs to 2025-11-25; a 2026-07-28 header makes it a malformed request
    resp = _post(srv, INIT, **{"MCP-Protocol-Version": "2026-07-28"})
    assert resp.status_code == 400 and _rpc_error(resp)["code"] in (-32602, -32600)
    # a version nobody speaks
    resp = _post(srv, {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}},
                 **{"MCP-Protocol-Version": "1999-01-01", "Mcp-Method": "tools/list"})
    assert resp.status_code == 400
    # a 2026 request whose routing header contradicts its body
    body = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    resp = _post(srv, body, **{"MCP-Protocol-Version": "2026-07-28",
                               "Mcp-Method": "tools/call"})
    assert resp.status_code == 400 and _rpc_error(resp)["code"] == -32020


def test_a_session_is_bound_to_the_token_that_opened_it(srv: McpServer) -> None:
    opened = _post(srv, INIT)
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
    hijack = _post(srv, listing, who="reader", **{"Mcp-Session-Id": session,
                                                  "MCP-Protocol-Version": "2025-11-25"})
    assert hijack.status_code == 404


def test_a_user_left_in_the_scope_by_an_outer_middleware_is_not_trusted(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """``/mcp`` replaces whatever ``scope["user"]`` an outer middleware set with the
    token's identity: one shared stand-in user would let any token use any session."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    stand_in = AuthenticatedUser(AccessToken(token="x", client_id="everyone", scopes=[]))

    def around(_gw: Any, app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            await app({**scope, "user": stand_in}, receive, send)
        return wrapped

    with serving(f"sqlite:///{tmp_path_factory.mktemp('user')}/tk.db", around=around) as s:
        session = _post(s, INIT).headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
        routing = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        assert _post(s, listing, who="reader", **routing).status_code == 404
        assert _post(s, listing, **routing).status_code == 200


@pytest.mark.parametrize("era", ERAS)
async def test_the_server_keeps_serving_after_bad_input(srv: McpServer, era: str) -> None:
    for _ in range(3):
        _post(srv, None, raw=b"\xff\xfe garbage")
        _post(srv, INIT, who=None)
    async with connect(srv, "reader", era) as c:
        assert (await c.call_tool("add", {"a": 20, "b": 22})).structured_content == {
            "result": 42}
