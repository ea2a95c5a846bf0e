"""A lean streamable-HTTP client for upstream ``tools/call``, in either protocol era.

The SDK's client costs about 3 ms of Python per call on a 2-core machine, more than the
whole budget SPEC §10 gives the gateway's MCP hop (1.5 ms added). Upstream calls are one
request and one response, so this client does only that over one pooled ``httpx``
connection set. It asks ``server/discover`` first: a server speaking 2026-07-28 is then used
statelessly (each request carries the ``_meta`` envelope and routing headers, and answers
as plain JSON — the cheapest path through an SDK server); otherwise ``initialize`` once
(keeping ``Mcp-Session-Id``). Each answer is read as JSON or from the SSE stream until its
response arrives.
Server-to-client requests and notifications on that stream are ignored. A server it cannot
handshake with (e.g. one speaking only 2026-07-28) makes the pool fall back to the SDK's
client; stdio servers always use the SDK's.

Listings are validated with the SDK's own types (``mcp_types``), so callers see the same
``ListToolsResult`` as from the SDK client; a ``tools/call`` answer is handed on as its wire
dict, which the ``mcp`` provider checks against ``CallToolResult`` and passes on block by
block.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from toolkeeper.upstream.errors import UpstreamUnavailable
from toolkeeper.version import __version__

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
"""Handshake versions this client speaks (the first is asked for)."""
MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}
NAMED = {"tools/call", "resources/read", "prompts/get"}
"""2026-07-28 methods whose ``Mcp-Name`` header repeats ``params.name`` (or ``uri``)."""
ACCEPT = "application/json, text/event-stream"


class HandshakeRefused(Exception):
    """The server did not accept a 2025-era ``initialize`` (try the SDK's client)."""


class LeanHttpClient:
    """One upstream session over streamable HTTP; safe for concurrent requests."""

    def __init__(self, url: str, *, headers: Mapping[str, str], timeout_s: float,
                 connect_timeout_s: float) -> None:
        self.url = url
        self._http = httpx.AsyncClient(
            headers={**headers, "Accept": ACCEPT, "Content-Type": "application/json"},
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))
        self._ids = itertools.count(1)
        self._session: dict[str, str] = {}
        self.protocol_version: str | None = None

    async def start(self) -> None:
        from mcp.shared.exceptions import MCPError

        if await self._discover():
            return
        try:
            result = await self.request("initialize", {
                "protocolVersion": VERSIONS[0], "capabilities": {},
                "clientInfo": {"name": "toolkeeper", "version": __version__}})
        except MCPError as exc:
            raise HandshakeRefused(f"initialize refused: {exc.message}") from exc
        version = result.get("protocolVersion")
        if version not in VERSIONS:
            raise HandshakeRefused(f"the server offers protocol {version!r}")
        self.protocol_version = str(version)
        self._session["MCP-Protocol-Version"] = self.protocol_version
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, None,
                         None, self._session)

    async def _discover(self) -> bool:
        """Use the stateless 2026-07-28 era if the server offers it."""
        from mcp.shared.exceptions import MCPError

        self.protocol_version = MODERN
        try:
            found = await self.request("server/discover", {})
        except MCPError:
            found = {}
        if MODERN in (found.get("supportedVersions") or ()):
            return True
        self.protocol_version = None
        return False

    async def list_tools(self) -> Any:
        import mcp_types as types

        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(100):  # bounded pagination
            result = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            page = types.ListToolsResult.model_validate(result)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return types.ListToolsResult(tools=tools)

    async def call_tool(self, name: str, arguments: dict[str, Any], *,
                        read_timeout_seconds: float | None = None) -> dict[str, Any]:
        """The ``CallToolResult`` as the wire dict (unchecked: the provider validates it)."""
        return await self.request("tools/call", {"name": name, "arguments": arguments},
                                  timeout_s=read_timeout_seconds)

    async def request(self, method: str, params: dict[str, Any], *,
                      timeout_s: float | None = None) -> dict[str, Any]:
        rid = next(self._ids)
        headers = self._session
        if self.protocol_version == MODERN:
            params = {**params, "_meta": ENVELOPE}
            headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
            if method in NAMED:
                headers["Mcp-Name"] = str(params.get("name") or params.get("uri") or "")
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        answer = await self._post(message, rid, timeout_s, headers)
        assert answer is not None
        return answer

    async def _post(self, message: dict[str, Any], rid: int | None,
                    timeout_s: float | None, headers: dict[str, str]) -> dict[str, Any] | None:
        from mcp.shared.exceptions import MCPError

        timeout = httpx.USE_CLIENT_DEFAULT if timeout_s is None else httpx.Timeout(
            timeout_s, connect=min(timeout_s, 10.0))
        try:
            async with self._http.stream("POST", self.url, content=orjson.dumps(message),
                                         headers=headers, timeout=timeout) as resp:
                sid = resp.headers.get("mcp-session-id")
                if sid and "Mcp-Session-Id" not in self._session:
                    self._session["Mcp-Session-Id"] = sid
                if rid is None:
                    return None
                kind = resp.headers.get("content-type", "").split(";")[0].strip()
                if kind == "text/event-stream":
                    return _answer(await _from_sse(resp, rid), resp.status_code)
                body = await resp.aread()
                return _answer(_loads(body), resp.status_code)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise UpstreamUnavailable(f"cannot connect to {self.url}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise MCPError(code=-32001, message=f"timed out: {type(exc).__name__}") from exc
        except httpx.TransportError as exc:
            raise MCPError(code=-32000, message=f"connection lost: {exc}") from exc

    async def aclose(self) -> None:
        sid = self._session.get("Mcp-Session-Id")
        try:
            if sid:
                await self._http.delete(self.url, headers=self._session, timeout=2.0)
        except httpx.HTTPError:
            pass
        finally:
            await self._http.aclose()


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


async def _from_sse(resp: httpx.Response, rid: int) -> Any:
    """The JSON-RPC response to ``rid`` on an SSE stream (other events are skipped)."""
    data: list[str] = []
    async for line in resp.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            event, data = _loads("\n".join(data).encode()), []
            if isinstance(event, dict) and event.get("id") == rid and (
                    "result" in event or "error" in event):
                return event
    return _loads("\n".join(data).encode()) if data else None


def _answer(event: Any, status: int) -> dict[str, Any]:
    from mcp.shared.exceptions import MCPError

    if isinstance(event, dict) and isinstance(event.get("error"), dict):
        err = event["error"]
        raise MCPError(code=int(err.get("code", -32603)), message=str(err.get("message", "")),
                       data=err.get("data"))
    if isinstance(event, dict) and isinstance(event.get("result"), dict):
        result: dict[str, Any] = event["result"]
        return result
    if status == 404:  # the session is gone: the pool reconnects
        raise MCPError(code=-32000, message="the upstream session expired (404)")
    # 4xx: refused before running; 5xx or garbage: unknown whether it ran
    raise MCPError(code=-32600 if 400 <= status < 500 else -32000,
                   message=f"unexpected answer (HTTP {status})")
