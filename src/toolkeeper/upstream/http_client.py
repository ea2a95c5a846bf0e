"""A lean streamable-HTTP client for upstream ``tools/call``, in either protocol era.

The SDK's client costs about 3 ms of Python per call on a 2-core machine, more than the
whole budget SPEC §10 gives the gateway's MCP hop (1.5 ms added). Upstream calls are one
request and one response, so this client does only that, over the keep-alive connections
of :mod:`toolkeeper.upstream.rawhttp` — or ``httpx``'s when the environment sets a proxy
(``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, which httpx honours) or the server answers
in a way the small client does not read (then for the rest of this client's life; a request
that surely did not go out, or one of the handshake, is sent again over httpx). It asks
``server/discover`` first: a server speaking 2026-07-28 is then used statelessly (each
request carries the ``_meta`` envelope and routing headers, and answers as plain JSON —
the cheapest path through an SDK server); otherwise ``initialize`` once (keeping
``Mcp-Session-Id``). Each answer is read as JSON or from the SSE stream until its response
arrives (the rest of that stream is then read in the background, bounded, so the connection
can serve again). Progress and log notifications on that stream go to the agent's request
(:mod:`toolkeeper.upstream.notes`); the server's requests on it (a 2025-era server's
elicitation, sampling or roots request) are answered through the agent's side of the call
(:mod:`toolkeeper.upstream.asking`).
A server it cannot handshake with (e.g. one speaking only 2026-07-28) makes the pool fall
back to the SDK's client; stdio servers always use the SDK's.

Listings are validated with the SDK's own types (``mcp_types``), so callers see the same
``ListToolsResult`` as from the SDK client; a ``tools/call`` answer is handed on as its wire
dict, which the ``mcp`` provider checks against ``CallToolResult`` and passes on block by
block.
"""

from __future__ import annotations

import itertools
import logging
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import orjson

from toolkeeper.upstream import rawhttp
from toolkeeper.upstream.asking import envelope
from toolkeeper.upstream.downstream import current
from toolkeeper.upstream.errors import Bearer, TokenRejected, UpstreamUnavailable
from toolkeeper.upstream.notes import Notes, meta_for
from toolkeeper.upstream.sse import Sse as _Sse
from toolkeeper.upstream.sse import hand as _hand
from toolkeeper.upstream.sse import loads as _loads
from toolkeeper.version import __version__

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
"""Handshake versions this client speaks (the first is asked for)."""
MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}
ASKABLE: dict[str, dict[str, Any]] = {"elicitation": {}, "sampling": {}}
"""What a 2025-era server may ask in the middle of a call: relayed to the agent when it can
answer (an error otherwise). Not ``roots``: servers ask for it outside any call."""
NAMED = {"tools/call", "resources/read", "prompts/get"}
"""2026-07-28 methods whose ``Mcp-Name`` header repeats ``params.name`` (or ``uri``)."""
ACCEPT = "application/json, text/event-stream"
HANDSHAKE = frozenset({"initialize", "server/discover"})
log = logging.getLogger(__name__)


class HandshakeRefused(Exception):
    """The server did not accept a 2025-era ``initialize`` (try the SDK's client); ``code``:
    ``initialize_refused`` (an error answer) or ``version_unsupported``."""

    def __init__(self, message: str, code: str = "initialize_refused") -> None:
        super().__init__(message)
        self.code = code


class _Unauthorized(Exception):
    """One 401 answer (the request is sent again once with a renewed token)."""


class LeanHttpClient:
    """One upstream session over streamable HTTP; safe for concurrent requests."""

    def __init__(self, url: str, *, headers: Mapping[str, str], timeout_s: float,
                 connect_timeout_s: float, auth: Bearer | None = None) -> None:
        self.url = url
        self.extra_headers = dict(headers)
        """The configured headers (a listen stream of the same server sends them too)."""
        self._auth = auth
        """The connection's own token (handshake, listings, calls without their own)."""
        self._headers = {**headers, "Accept": ACCEPT, "Content-Type": "application/json"}
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._http: httpx.AsyncClient | None = None
        self._raw: rawhttp.Pool | None = None
        self._retired: list[rawhttp.Pool] = []
        self._started = False
        self.fallback_reason: str | None = None
        """Why this client uses httpx (``None``: it uses :mod:`rawhttp`)."""
        proxies = {k for k, v in urllib.request.getproxies().items() if v} & {
            "http", "https", "all"}
        if proxies:
            self.fallback_reason = f"the environment sets a proxy ({', '.join(sorted(proxies))})"
        else:
            try:
                agent = {} if any(k.lower() == "user-agent" for k in headers) else {
                    "User-Agent": f"toolkeeper/{__version__}"}  # httpx sent its own
                self._raw = rawhttp.Pool(
                    url, headers={**agent, **self._headers},
                    connect_timeout_s=connect_timeout_s,
                    max_connections=64, max_idle=32, ssl_context=_ssl_context(url))
            except rawhttp.Unsupported as exc:
                self.fallback_reason = str(exc)
        self._ids = itertools.count(1)
        self._session: dict[str, str] = {}
        self.protocol_version: str | None = None

    @property
    def bearer(self) -> Bearer | None:
        return self._auth

    @property
    def transport(self) -> str:
        """``"raw"`` (:mod:`rawhttp`) or ``"httpx"``."""
        return "raw" if self._raw is not None else "httpx"

    def _httpx(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(self._timeout_s, connect=self._connect_timeout_s),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))
        return self._http

    async def start(self) -> None:
        if not await self._discover():
            await self.initialize()

    async def initialize(self) -> None:
        """The 2025-era handshake (``start`` does it when ``server/discover`` finds no
        2026-07-28 era; called alone, it holds a 2025-era session with a dual-era server)."""
        from mcp.shared.exceptions import MCPError

        try:
            result = await self.request("initialize", {
                "protocolVersion": VERSIONS[0], "capabilities": ASKABLE,
                "clientInfo": {"name": "toolkeeper", "version": __version__}})
        except MCPError as exc:
            raise HandshakeRefused(f"initialize refused: {exc.message}") from exc
        version = result.get("protocolVersion")
        if version not in VERSIONS:
            raise HandshakeRefused(f"the server offers protocol {version!r}",
                                   "version_unsupported")
        self.protocol_version = str(version)
        self._session["MCP-Protocol-Version"] = self.protocol_version
        headers = self._session
        if self._auth is not None:
            headers = {**headers, "Authorization": f"Bearer {await self._auth.current()}"}
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, None,
                         None, headers)
        self._started = True

    async def _discover(self) -> bool:
        """Use the stateless 2026-07-28 era if the server offers it."""
        from mcp.shared.exceptions import MCPError

        self.protocol_version = MODERN
        try:
            found = await self.request("server/discover", {})
        except MCPError:
            found = {}
        if MODERN in (found.get("supportedVersions") or ()):
            self._started = True
            return True
        self.protocol_version = None
        # A stateful 2025-era server (the 1.x SDK's) opens a session for any first request
        # and ends it when that request is not `initialize`: its id must not ride on the
        # handshake (404 "Session not found"). Ended politely for servers that keep it.
        if (sid := self._session.pop("Mcp-Session-Id", None)) is not None:
            await self._end({"Mcp-Session-Id": sid})
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
                        read_timeout_seconds: float | None = None,
                        bearer: Bearer | None = None,
                        extra: dict[str, Any] | None = None,
                        param_headers: dict[str, str] | None = None) -> dict[str, Any]:
        """The ``CallToolResult`` (or ``InputRequiredResult``) as the wire dict (unchecked:
        the provider validates it); ``extra``: a retry's ``inputResponses``/``requestState``;
        ``param_headers``: the tool's ``x-mcp-header`` arguments as ``Mcp-Param-*`` (sent to
        a 2026-07-28 server)."""
        return await self.request("tools/call", {"name": name, "arguments": arguments,
                                                 **(extra or {})},
                                  timeout_s=read_timeout_seconds, bearer=bearer,
                                  headers=param_headers)

    async def request(self, method: str, params: dict[str, Any], *,
                      timeout_s: float | None = None,
                      bearer: Bearer | None = None,
                      headers: dict[str, str] | None = None) -> dict[str, Any]:
        """One request; with a bearer (``bearer``, else the connection's), a 401 renews the
        token once and sends the request once more — safe because a 401 means the upstream
        refused it before doing anything — then raises :class:`TokenRejected`."""
        source = bearer or self._auth
        if source is None:
            try:
                return await self._request(method, params, timeout_s, None, headers)
            except _Unauthorized:
                raise TokenRejected(f"{self.url}: the upstream asks for authorization (401);"
                                    " give the server an `oauth` block") from None
        token = await source.current()
        try:
            return await self._request(method, params, timeout_s, token, headers)
        except _Unauthorized:
            token = await source.renew(token)
        try:
            return await self._request(method, params, timeout_s, token, headers)
        except _Unauthorized:
            raise TokenRejected(f"{self.url}: the upstream refused the gateway's renewed "
                                "OAuth token (401)") from None

    async def _request(self, method: str, params: dict[str, Any], timeout_s: float | None,
                       token: str | None, more: dict[str, str] | None = None
                       ) -> dict[str, Any]:
        rid = next(self._ids)
        headers = self._session
        ds = current() if method not in HANDSHAKE else None
        notes = Notes(ds, rid) if ds is not None and (ds.progress or ds.log) else None
        if self.protocol_version == MODERN:
            carried = meta_for(ds, rid, modern=True)
            params = {**params, "_meta": {**envelope(ENVELOPE), **carried} if carried
                      else envelope(ENVELOPE)}
            headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
            if method in NAMED:
                headers["Mcp-Name"] = str(params.get("name") or params.get("uri") or "")
            if more:
                headers.update(more)
        elif ds is not None and (extra := meta_for(ds, rid, modern=False)):
            params = {**params, "_meta": extra}
        if token is not None:
            headers = {**headers, "Authorization": f"Bearer {token}"}
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        answer = await self._post(message, rid, timeout_s, headers, notes)
        assert answer is not None
        return answer

    async def _post(self, message: dict[str, Any], rid: int | None,
                    timeout_s: float | None, headers: dict[str, str],
                    notes: Notes | None = None) -> dict[str, Any] | None:
        from mcp.shared.exceptions import MCPError

        body = orjson.dumps(message)
        raw = self._raw
        if raw is not None:
            try:
                return await self._raw_post(raw, body, rid, timeout_s, headers, notes)
            except rawhttp.Unsupported as exc:
                self._fall_back(raw, exc)
                if exc.sent and self._started:  # it may have run: not sent twice
                    raise MCPError(code=-32000, message=f"connection lost: {exc}") from exc
        return await self._httpx_post(body, rid, timeout_s, headers, notes)

    def _fall_back(self, raw: rawhttp.Pool, exc: rawhttp.Unsupported) -> None:
        if self._raw is raw:
            log.warning("upstream %s: using httpx from now on: %s", self.url, exc)
            self.fallback_reason = str(exc)
            self._raw = None
            self._retired.append(raw)

    async def _raw_post(self, raw: rawhttp.Pool, body: bytes, rid: int | None,
                        timeout_s: float | None, headers: dict[str, str],
                        notes: Notes | None = None) -> dict[str, Any] | None:
        from mcp.shared.exceptions import MCPError

        read_s = self._timeout_s if timeout_s is None else timeout_s
        connect_s = self._connect_timeout_s if timeout_s is None else min(timeout_s, 10.0)
        try:
            resp = await raw.request("POST", rawhttp.encode_headers(headers), body, read_s,
                                     connect_s)
            try:
                if self._is_sse(resp.headers) and rid is not None:
                    sse = _Sse(rid, keep=notes is not None)
                    while (piece := await resp.next_piece()) is not None:
                        event = sse.feed(piece)
                        await self._reply(sse, headers)
                        if sse.others and notes is not None:
                            await _hand(sse, notes)
                        if event is not None:
                            raw.drain_later(resp)  # the connection is reused once read
                            return _answer(event, resp.status)
                    return _answer(sse.end(), resp.status)
                if rid is None:
                    return None
                return _answer(_loads(await resp.read()), resp.status)
            finally:
                if rid is None:
                    resp.discard()
        except rawhttp.ConnectFailed as exc:
            raise UpstreamUnavailable(f"cannot connect to {self.url}: {exc}") from exc
        except rawhttp.ReadTimeout as exc:
            raise MCPError(code=-32001, message="timed out: ReadTimeout") from exc
        except rawhttp.Unsupported:
            raise
        except rawhttp.ProtocolFailure as exc:
            raise MCPError(code=-32000, message=f"connection lost: {exc}") from exc

    def _is_sse(self, headers: Mapping[str, str]) -> bool:
        """Keep the session id the answer carries (the first one); whether it is an SSE
        stream (else one JSON body)."""
        sid = headers.get("mcp-session-id")
        if sid and "Mcp-Session-Id" not in self._session:
            self._session["Mcp-Session-Id"] = sid
        kind = headers.get("content-type", "").split(";")[0].strip()
        return kind == "text/event-stream"

    async def _httpx_post(self, body: bytes, rid: int | None, timeout_s: float | None,
                          headers: dict[str, str], notes: Notes | None = None
                          ) -> dict[str, Any] | None:
        from mcp.shared.exceptions import MCPError

        timeout = httpx.USE_CLIENT_DEFAULT if timeout_s is None else httpx.Timeout(
            timeout_s, connect=min(timeout_s, 10.0))
        try:
            async with self._httpx().stream("POST", self.url, content=body,
                                            headers=headers, timeout=timeout) as resp:
                if self._is_sse(resp.headers) and rid is not None:
                    return _answer(await self._from_sse(resp.aiter_bytes(), rid, headers,
                                                        notes),
                                   resp.status_code)
                if rid is None:
                    return None
                return _answer(_loads(await resp.aread()), resp.status_code)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise UpstreamUnavailable(f"cannot connect to {self.url}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise MCPError(code=-32001, message=f"timed out: {type(exc).__name__}") from exc
        except httpx.TransportError as exc:
            raise MCPError(code=-32000, message=f"connection lost: {exc}") from exc

    async def _from_sse(self, pieces: AsyncIterator[bytes], rid: int,
                        headers: dict[str, str], notes: Notes | None = None) -> Any:
        """The JSON-RPC response to ``rid`` on an SSE stream (requests answered,
        notifications handed to ``notes``)."""
        sse = _Sse(rid, keep=notes is not None)
        async for piece in pieces:
            event = sse.feed(piece)
            await self._reply(sse, headers)
            if sse.others and notes is not None:
                await _hand(sse, notes)
            if event is not None:
                return event
        return sse.end()

    async def _reply(self, sse: _Sse, headers: dict[str, str]) -> None:
        """Answer the server's requests on this stream (2025-11-25: an elicitation,
        sampling or roots request in the middle of ``tools/call``) through the agent's
        side of the call (:mod:`toolkeeper.upstream.asking`)."""
        from toolkeeper.upstream.asking import reply_to

        while sse.requests:
            request = sse.requests.pop(0)
            sse.answered += 1
            await self._post(await reply_to(request, sse.answered), None, None, headers)

    async def _end(self, session: dict[str, str]) -> None:
        """Ask the server to end ``session`` (best effort: a failure changes nothing)."""
        try:
            if self._raw is not None:
                resp = await self._raw.request("DELETE", rawhttp.encode_headers(session),
                                               b"", 2.0, 2.0)
                resp.discard()
            else:
                await self._httpx().delete(self.url, headers=session, timeout=2.0)
        except (httpx.HTTPError, rawhttp.HttpFailure):
            pass

    async def aclose(self) -> None:
        try:
            if self._session.get("Mcp-Session-Id"):
                await self._end(self._session)
        finally:
            for raw in (self._raw, *self._retired):
                if raw is not None:
                    await raw.aclose()
            if self._http is not None:
                await self._http.aclose()


def _ssl_context(url: str) -> Any:
    """For https: the context httpx would use (its CA bundle, ``SSL_CERT_FILE``/``_DIR``),
    offering HTTP/1.1 by ALPN as httpx does."""
    if not url.lower().startswith("https:"):
        return None
    ctx = httpx.create_ssl_context()
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _answer(event: Any, status: int) -> dict[str, Any]:
    from mcp.shared.exceptions import MCPError

    if status == 401:  # the bearer token (or its absence) was refused: nothing ran
        raise _Unauthorized()
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
