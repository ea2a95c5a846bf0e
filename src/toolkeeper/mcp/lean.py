"""The MCP hot path: plain ``tools/list`` and ``tools/call`` — stateless (2026-07-28), or
on an established 2025-11-25 session — answered without the SDK's per-request task groups
and stream plumbing (issue 12 item 1).

The official SDK stays the reference: :func:`plan` takes a request only when it has the
plainest shape the SDK would answer with a JSON body (the SDK's own envelope ladder
accepts it, no ``Mcp-Param-*`` or session headers, no cursor, progress token, elicitation
capability or extra ``_meta``); anything else — and anything in doubt — is ``None`` and
goes to the SDK unchanged. The answer is built by the same :class:`McpFace` methods and
serialised as the SDK serialises it. ``mcp_fast_path: false`` turns the path off.

On a 2025-11-25 session (:func:`plan_in_session`) the request must also be one the SDK
would hand to a live, initialized session of this process that already had a request
served here (so its ``list_changed`` delivery is set up) and whose client cannot elicit
(an in-band confirmation needs the SDK's session). An answer ready within 15 s goes back
as one JSON body (``application/json``, as the SDK's ``json_response`` mode answers; the
transport lets the server choose either form): the SDK's SSE answer made its own 2025-era
client open a new connection for every call, since the client stops reading at the
answer's event and a response not read to its end cannot be reused. A longer call gets the
SDK's SSE response: the same headers, a keep-alive comment every 15 s, one ``message``
event.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from mcp.server.caching import apply_cache_hint
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INTERNAL_ERROR,
    SERVER_INFO_META_KEY,
    CacheableResult,
)
from mcp_types import PROTOCOL_VERSION_META_KEY as VERSION_KEY
from mcp_types import methods as sdk_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Scope, Send

from toolkeeper.mcp import results
from toolkeeper.mcp.request_state import call_digest
from toolkeeper.mcp.tasks import refuse_required
from toolkeeper.mcp.views import key_of

if TYPE_CHECKING:
    from toolkeeper.mcp.server import McpFace
    from toolkeeper.model.call import Principal

log = logging.getLogger("toolkeeper.mcp")
META_KEYS = frozenset({VERSION_KEY, CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY})
PARAM_KEYS = {"tools/list": frozenset({"_meta"}),
              "tools/call": frozenset({"_meta", "name", "arguments"})}


@dataclass(frozen=True)
class Plan:
    """A request the lean path answers."""

    ident: str | int
    method: str
    params: dict[str, Any]
    version: str
    session: str | None = None
    """The 2025-11-25 session's id (``None``: stateless 2026-07-28)."""


def _accepts_both(accept: str) -> bool:
    types_ = {t.split(";")[0].strip().lower() for t in accept.split(",")}
    return "*/*" in types_ or (bool(types_ & {"application/json", "application/*"})
                               and bool(types_ & {"text/event-stream", "text/*"}))


ROUTING = frozenset({b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
"""The routing headers; the SDK refuses a request carrying one twice
(``find_duplicated_routing_header``)."""
READ = frozenset({b"content-type", b"accept"})
"""The other headers the lean path's checks read (the transport check reads its own)."""


def _plain_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str] | None:
    """The headers the SDK's ladder reads (``Mcp-*``, Content-Type, Accept; the last of
    each, as the SDK's folded mapping has them), or ``None`` when they need the SDK. One
    pass over the raw lines, decoding only those: every 2026-07-28 request comes here."""
    headers: dict[str, str] = {}
    for name, value in raw:  # ASGI: names are lowercase
        if name.startswith(b"mcp-"):
            if name == b"mcp-session-id" or name.startswith(b"mcp-param-") or (
                    name in ROUTING and name.decode("latin-1") in headers):
                return None
        elif name not in READ:
            continue
        headers[name.decode("latin-1")] = value.decode("latin-1")
    if (headers.get("mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS
            or not headers.get("content-type", "").startswith("application/json")
            or not _accepts_both(headers.get("accept", ""))):
        return None
    return headers


def _plain_params(method: str, params: Any) -> bool:
    if not isinstance(params, dict) or not params.keys() <= PARAM_KEYS[method]:
        return False
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not meta.keys() <= META_KEYS:
        return False
    caps, info = meta.get(CLIENT_CAPABILITIES_META_KEY), meta.get(CLIENT_INFO_META_KEY)
    if not isinstance(caps, dict) or caps:
        return False  # an upstream may ask a client that can answer: the SDK's job
    if info is not None and not (isinstance(info, dict) and info.keys() <= {"name", "version"}
                                 and all(isinstance(v, str) for v in info.values())
                                 and len(info) == 2):
        return False
    if method == "tools/call":
        return isinstance(params.get("name"), str) and isinstance(
            params.get("arguments", {}), dict)
    return True


def plan(scope: Scope, msg: Any) -> Plan | None:
    """What the lean path answers for this POST (its parsed JSON, ``msg``), or ``None``
    (the SDK answers)."""
    headers = _plain_headers(scope["headers"])
    if headers is None:
        return None
    if (not isinstance(msg, dict) or msg.keys() != {"jsonrpc", "id", "method", "params"}
            or msg["jsonrpc"] != "2.0" or msg["method"] not in PARAM_KEYS):
        return None
    ident = msg["id"]
    if isinstance(ident, bool) or not isinstance(ident, str | int):
        return None
    if not _plain_params(msg["method"], msg["params"]):
        return None
    verdict = classify_inbound_request(msg, headers=headers)
    if not isinstance(verdict, InboundModernRoute):
        return None
    return Plan(ident, msg["method"], msg["params"], verdict.protocol_version)


SESSION_PARAMS = {"tools/list": frozenset(), "tools/call": frozenset({"name", "arguments"})}
"""What a plain request on a 2025-11-25 session carries (``_meta``, e.g. a progress token,
goes to the SDK)."""


def _has_json_type(content_type: str) -> bool:
    """The SDK transport's own Content-Type test."""
    return any(part.strip() == "application/json"
               for part in content_type.split(";")[0].split(","))


def plan_in_session(scope: Scope, msg: Any, sid: str, version: str) -> Plan | None:
    """What the lean path answers for this POST (its parsed JSON, ``msg``) on session
    ``sid`` (negotiated ``version``), or ``None`` (the SDK answers)."""
    pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
    headers = dict(pairs)
    mcp_headers = [k for k, _ in pairs if k.startswith("mcp-")]
    if (headers.get("mcp-protocol-version") != version
            or headers.get("mcp-session-id") != sid
            or sorted(mcp_headers) != ["mcp-protocol-version", "mcp-session-id"]
            or not _has_json_type(headers.get("content-type", ""))
            or not _accepts_both(headers.get("accept", ""))):
        return None
    if (not isinstance(msg, dict) or not {"jsonrpc", "id", "method"} <= msg.keys()
            or not msg.keys() <= {"jsonrpc", "id", "method", "params"}
            or msg["jsonrpc"] != "2.0" or msg["method"] not in SESSION_PARAMS):
        return None
    ident, method, params = msg["id"], msg["method"], msg.get("params", {})
    if isinstance(ident, bool) or not isinstance(ident, str | int):
        return None
    if not isinstance(params, dict) or not params.keys() <= SESSION_PARAMS[method]:
        return None
    if method == "tools/call" and not (isinstance(params.get("name"), str) and isinstance(
            params.get("arguments", {}), dict)):
        return None
    return Plan(ident, method, params, version, sid)


def _shape(server: Any, job: Plan, result: Any) -> dict[str, Any]:
    """The wire form of a handler's result, as the SDK's runner shapes a core result:
    cache hint, the per-version sieve and, in the 2026 era, ``resultType`` and the
    ``serverInfo`` stamp. ``result`` may be a wire dict already (``results.plain_wire``)."""
    if isinstance(result, dict):
        dumped = result
    else:
        hint = server.cache_hints.get(job.method)
        if hint is not None and isinstance(result, CacheableResult):
            result = apply_cache_hint(result, hint)
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            dumped = sdk_methods.serialize_server_result(job.method, job.version, dumped)
        except ValidationError:
            log.exception("handler for %r returned an invalid result", job.method)
            raise MCPError(code=INTERNAL_ERROR,
                           message="Handler returned an invalid result") from None
    if job.session is not None:
        return dumped
    if dumped.get("resultType") is None:
        dumped["resultType"] = "complete"
    meta = dumped.get("_meta")
    if meta is None:
        dumped["_meta"] = {SERVER_INFO_META_KEY: _stamp(server)}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: _stamp(server)}
    return dumped


_STAMPS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _stamp(server: Any) -> dict[str, Any]:
    """The server's ``serverInfo`` stamp, dumped once per server. The SDK deep-copies it on
    every access so that a caller mutating its response cannot corrupt later ones; the
    lean path serialises the response at once and never mutates it, so one copy serves."""
    stamp = _STAMPS.get(server)
    if stamp is None:
        stamp = _STAMPS[server] = server.server_info_stamp
    return stamp


async def answer(face: McpFace, who: Principal, job: Plan) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON-RPC reply the SDK would send for ``job``."""
    try:
        if job.method == "tools/list":
            result: Any = face.list_for(who)
        else:
            params = job.params
            if job.session is not None:  # as the SDK's handler tracks its session
                face.notifier.shown(key_of(who), None)
            _, request = face.request_for(who, params["name"], params.get("arguments"), None)
            refuse_required(face.gw, who, request.tool)  # no tasks extension declared here
            done, asked = await face.rounds.run(None, who, request,
                                                modern=job.session is None)
            if asked is not None:  # -32021 (it declared no capability), or only a state
                result = face.rounds.relay(set(), who, call_digest(
                    request.tool, request.action or "", request.arguments), asked)
            else:
                plain = None if "tools/call" in face.server.cache_hints else \
                    results.plain_wire(done, job.version)
                result = results.wire(done) if plain is None else plain
        shaped = _shape(face.server, job, result)
    except MCPError as exc:
        error = modern_error_data(exc).model_dump(mode="json", by_alias=True,
                                                  exclude_none=True)
        status = 200 if job.session is not None else ERROR_CODE_HTTP_STATUS.get(
            error["code"], 200)
        return status, {"jsonrpc": "2.0", "id": job.ident, "error": error}
    except Exception:
        log.exception("MCP %s failed", job.method)
        return (200 if job.session is not None else ERROR_CODE_HTTP_STATUS.get(
            INTERNAL_ERROR, 200),
                {"jsonrpc": "2.0", "id": job.ident, "error": {
                    "code": INTERNAL_ERROR, "message": "internal error (logged by the gateway)"}})
    return 200, {"jsonrpc": "2.0", "id": job.ident, "result": shaped}


async def send_json(send: Send, status: int, reply: dict[str, Any]) -> None:
    body = orjson.dumps(reply)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-length", str(len(body)).encode()),
        (b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


PING_INTERVAL_S = 15.0
"""sse-starlette's keep-alive period, which the SDK's SSE responses use."""


async def send_event(send: Send, sid: str, answering: Any,
                     running: dict[tuple[str, Any], asyncio.Future[Any]], ident: Any) -> None:
    """The answer to request ``ident`` on session ``sid``: the reply ``answering`` (an
    awaitable of :func:`answer`) resolves to, as one JSON body if it is ready within
    :data:`PING_INTERVAL_S`; else the SDK's SSE response, its headers once that interval
    has passed, a keep-alive comment every interval while it runs, then the reply as one
    ``message`` event. While it runs it is in ``running``, where a
    ``notifications/cancelled`` finds it (:func:`cancel`): then, as the SDK's transport
    does, it is answered ``Request cancelled`` (as an SSE event)."""
    task = asyncio.ensure_future(answering)
    key = (sid, ident)
    running[key] = task
    started = False
    try:
        while True:
            done, _ = await asyncio.wait((task,), timeout=PING_INTERVAL_S)
            if done:
                break
            if not started:
                await send(sse_start(sid))
                started = True
            await send({"type": "http.response.body", "body": keep_alive(), "more_body": True})
    except BaseException:
        task.cancel()
        raise
    finally:
        if running.get(key) is task:
            del running[key]
    if not started and not task.cancelled():
        _status, reply = task.result()
        body = orjson.dumps(reply)
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-length", b"%d" % len(body)), (b"content-type", b"application/json"),
            (b"mcp-session-id", sid.encode("latin-1"))]})
        await send({"type": "http.response.body", "body": body})
        return
    if not started:
        await send(sse_start(sid))
    if task.cancelled():  # the SDK's 2025-era transport answers a cancelled request so
        event: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "error": {
            "code": REQUEST_CANCELLED, "message": "Request cancelled"}}
    else:
        _status, event = task.result()
    await send({"type": "http.response.body",
                "body": b"event: message\r\ndata: " + orjson.dumps(event) + b"\r\n\r\n"})


def cancel(running: dict[tuple[str, Any], asyncio.Future[Any]], sid: str, msg: Any) -> None:
    """Cancel the lean request a ``notifications/cancelled`` (``msg``, parsed) on session
    ``sid`` names (the SDK, which answers the notification, does not know it)."""
    if not isinstance(msg, dict) or msg.get("method") != "notifications/cancelled" \
            or "id" in msg or not isinstance(msg.get("params"), dict):
        return
    ident = msg["params"].get("requestId")
    if isinstance(ident, str | int) and not isinstance(ident, bool):
        task = running.get((sid, ident))
        if task is not None:
            task.cancel()


def keep_alive() -> bytes:
    """sse-starlette's keep-alive comment, as the SDK's SSE responses send it."""
    return f": ping - {datetime.now(UTC)}\r\n\r\n".encode()


def sse_start(sid: str) -> dict[str, Any]:
    return {"type": "http.response.start", "status": 200, "headers": [
        (b"cache-control", b"no-cache, no-transform"), (b"connection", b"keep-alive"),
        (b"content-type", b"text/event-stream"), (b"mcp-session-id", sid.encode("latin-1")),
        (b"x-accel-buffering", b"no")]}
