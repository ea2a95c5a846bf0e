"""``/mcp``: streamable HTTP inside ``toolkeeper serve`` (SPEC §7 MCP).

Before a request reaches the SDK's session manager it must carry an agent's bearer token
(401 / 403 with a JSON-RPC error otherwise) and fit the body cap (413). The SDK is loaded
and its session manager started on the first ``/mcp`` request, inside the task group the
app's lifespan opened, so a server nobody reaches over MCP pays nothing for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import orjson
from starlette.types import Receive, Scope, Send

from toolkeeper.identity.refused import TokenRefused
from toolkeeper.identity.upstream_subject import carry

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway
    from toolkeeper.mcp.get_stream import GetStreams
    from toolkeeper.mcp.server import McpFace

log = logging.getLogger("toolkeeper.mcp")
PATH = "/mcp"


async def _jsonrpc_error(send: Send, status: int, code: int, message: str,
                         headers: dict[str, str] | None = None) -> None:
    body = orjson.dumps({"jsonrpc": "2.0", "id": None,
                         "error": {"code": code, "message": message}})
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


CREDENTIAL_KEY = "toolkeeper.mcp.credential"
"""Scope key of the request's ``(bearer token, principal)``, checked before anything else."""
_USER_KEY = "toolkeeper.mcp.user"
"""Scope key of the SDK user this endpoint made for the request (see :func:`_sdk_user`)."""


def _sdk_user(scope: Scope) -> Any:
    """The SDK's view of the caller (``scope["user"]``), made on first need: the SDK binds
    each session, and each sealed requestState, to this identity. The lean path's
    stateless answers never need it (a pydantic model per request, ~1 % of a call)."""
    user = scope.get(_USER_KEY)
    if user is None:  # whatever an outer middleware left in scope["user"] is replaced
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        token, who = scope[CREDENTIAL_KEY]
        user = scope[_USER_KEY] = scope["user"] = AuthenticatedUser(AccessToken(
            token=token, client_id=f"{who.tenant_id}/{who.agent}", scopes=[],
            subject=who.token_id or who.subject))
    return user


SECURITY_PASSES_MAX = 256
"""Distinct (Content-Type, Host, Origin) triples remembered as passing the SDK's check."""


def security_inputs(headers: Sequence[tuple[bytes, bytes]]
                    ) -> tuple[bytes | None, bytes | None, bytes | None]:
    """The first Content-Type, Host and Origin of a request: all that the SDK's transport
    check (``TransportSecurityMiddleware.validate_request``) reads."""
    found: dict[bytes, bytes] = {}
    for name, value in headers:
        name = name.lower()
        if name in (b"content-type", b"host", b"origin") and name not in found:
            found[name] = value
    return found.get(b"content-type"), found.get(b"host"), found.get(b"origin")


UNPARSABLE = object()
"""A POST body that is not JSON (the SDK answers it)."""


def _parsed(body: bytes) -> Any:
    """The POST's JSON, parsed once for every check before the SDK (or :data:`UNPARSABLE`)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return UNPARSABLE


def _headed(face: Any, who: Any, job: Any) -> bool:
    """Whether a lean ``tools/call`` names a tool with ``x-mcp-header`` parameters, whose
    ``Mcp-Param-*`` headers the SDK checks (so it is the SDK's)."""
    from toolkeeper.mcp.views import key_of

    return job.method == "tools/call" and job.params["name"] in face.listings.get(
        key_of(who)).param_headers


def _bad_id(message: Any) -> bool:
    """JSON-RPC 2.0 §4: an ``id`` is a string, a number or null (never a bool)."""
    if not isinstance(message, dict) or "id" not in message:
        return False
    ident = message["id"]
    return isinstance(ident, bool) or not isinstance(ident, str | int | float | None)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body; ``None`` past ``limit`` bytes."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands ``body`` over once, then defers to the real one."""
    sent = False

    async def again() -> Any:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}
    return again


class McpEndpoint:
    """The ASGI app at ``/mcp``."""

    def __init__(self, gw: Gateway, *, max_body_bytes: int,
                 allowed_hosts: Sequence[str] | None = None,
                 allowed_origins: Sequence[str] | None = None,
                 fast_path: bool = True, max_sessions: int = 10_000) -> None:
        self.gw = gw
        self.max_sessions = max_sessions
        self.fast_path = fast_path
        self._security: Any = None
        self._security_passed: set[tuple[bytes | None, bytes | None, bytes | None]] = set()
        """Header triples the transport check passed (its verdict depends on them alone)."""
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins
        self.face: McpFace | None = None
        self._app: Any = None
        self._manager: Any = None
        self._running: dict[tuple[str, Any], asyncio.Future[Any]] = {}
        """Requests on 2025-11-25 sessions the lean path is answering, by (session, id)."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._lock = anyio.Lock()
        self.get_streams: GetStreams | None = None
        """2025-11-25 sessions' standalone streams held lean (:mod:`toolkeeper.mcp.get_stream`)."""

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Enter in the app's lifespan: holds the task group the MCP machinery runs in."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                if self.face is not None:
                    self.face.close()
                tg.cancel_scope.cancel()
                self._tg = None

    async def _start(self) -> Any:
        async with self._lock:
            if self._app is not None:
                return self._app
            if self._tg is None:
                raise RuntimeError("the app's lifespan is not running")
            from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
            from mcp.server.transport_security import TransportSecuritySettings

            from toolkeeper.mcp.get_stream import GetStreams
            from toolkeeper.mcp.server import McpFace
            from toolkeeper.mcp.sessions import SessionSeal, SharedSessionManager
            from toolkeeper.mcp.state import state_key

            face = await anyio.to_thread.run_sync(McpFace, self.gw)
            security = None if self.allowed_hosts is None else TransportSecuritySettings(
                allowed_hosts=list(self.allowed_hosts),
                allowed_origins=list(self.allowed_origins or ()))
            seal = SessionSeal(await anyio.to_thread.run_sync(state_key, self.gw))
            manager = SharedSessionManager(
                app=face.server, max_request_body_size=self.max_body_bytes,
                security_settings=security, seal=seal, max_sessions=self.max_sessions)

            async def run_manager(*, task_status: anyio.abc.TaskStatus[None]
                                  = anyio.TASK_STATUS_IGNORED) -> None:
                async with manager.run():
                    task_status.started()
                    await anyio.sleep_forever()

            await self._tg.start(face.run)
            await self._tg.start(run_manager)
            self.face, self._app = face, StreamableHTTPASGIApp(manager)
            self._manager = manager
            self.get_streams = GetStreams()
            if security is not None:
                from mcp.server.transport_security import TransportSecurityMiddleware
                self._security = TransportSecurityMiddleware(security)
            return self._app

    @staticmethod
    def _invalid_id(parsed: Any) -> bool:
        """Whether the message (or one of a batch) has an id JSON-RPC does not allow (the
        SDK would take it for a notification: 202, dropped). Unparsable bodies pass on:
        the SDK answers them with its parse error."""
        if parsed is UNPARSABLE:
            return False
        return any(_bad_id(m) for m in (parsed if isinstance(parsed, list) else [parsed]))

    async def _lean(self, scope: Scope, send: Send, parsed: Any, who: Any,
                    sid: str | None) -> bool:
        """Answer on the lean path (:mod:`toolkeeper.mcp.lean`) when it takes the request
        (``sid``: the request's session id, if any)."""
        from toolkeeper.mcp import lean
        from toolkeeper.mcp.get_stream import in_flight

        face = self.face
        if face is None:
            return False
        if sid is None:
            job = lean.plan(scope, parsed)
            transport = None
        else:
            job, transport = self._in_session(scope, parsed, sid, face)
        if job is None or (face.listings.param_headers and _headed(face, who, job)):
            return False
        if self._security is not None and not await self._secure(scope):
            return False  # the SDK answers the refusal
        if transport is None:
            status, reply = await lean.answer(face, who, job)
            await lean.send_json(send, status, reply)
            return True
        assert job.session is not None
        with in_flight(transport):
            await lean.send_event(send, job.session, lean.answer(face, who, job),
                                  self._running, job.ident)
        return True

    async def _lean_get(self, scope: Scope, receive: Receive, send: Send,
                        headers: dict[bytes, bytes]) -> bool:
        """Hold a 2025-11-25 session's standalone stream lean when it is the SDK's plain case."""
        raw, manager, streams = headers.get(b"mcp-session-id"), self._manager, self.get_streams
        if raw is None or manager is None or streams is None or streams.exiting \
                or self._tg is None or not self.fast_path:
            return False
        from starlette.requests import Request

        from toolkeeper.mcp.get_stream import taken
        sid = raw.strip().decode("latin-1")
        transport = manager._server_instances.get(sid)
        if not taken(scope, headers, transport) or not self._owns(scope, sid) or (
                self._security is not None
                and await self._security.validate_request(Request(scope), is_post=False)):
            return False  # the SDK answers (refusals, replay, 409, adoption)
        await streams.serve(scope, receive, send, transport, sid, self._tg)
        return True

    async def _secure(self, scope: Scope) -> bool:
        """The SDK's transport check (content type, DNS-rebinding Host/Origin), run once per
        distinct header triple: its verdict is a function of those three values and the
        fixed settings. Refusals are not remembered (the SDK answers and logs each)."""
        inputs = security_inputs(scope["headers"])
        if inputs in self._security_passed:
            return True
        from starlette.requests import Request

        if await self._security.validate_request(Request(scope), is_post=True):
            return False
        if len(self._security_passed) >= SECURITY_PASSES_MAX:
            self._security_passed.clear()
        self._security_passed.add(inputs)
        return True

    def _cancel_lean(self, scope: Scope, parsed: Any, sid: str) -> None:
        """A ``notifications/cancelled`` from the session's owner stops the lean request it
        names, as the SDK's session would stop its own."""
        from toolkeeper.mcp import lean

        if self._owns(scope, sid):
            lean.cancel(self._running, sid, parsed)

    def _owns(self, scope: Scope, sid: str) -> bool:
        """Whether this request's credential opened session ``sid`` (the SDK's own test)."""
        from mcp.server.auth.middleware.bearer_auth import authorization_context

        return self._manager is not None and \
            self._manager._session_owners.get(sid) == authorization_context(_sdk_user(scope))

    def _in_session(self, scope: Scope, parsed: Any, sid: str,
                    face: McpFace) -> tuple[Any, Any]:
        """The lean plan for a POST on 2025-11-25 session ``sid`` and the session's
        transport, when the SDK would hand it to a live, initialized session of this
        process, owned by this credential, whose client cannot elicit and set no log level."""
        from toolkeeper.mcp import lean
        from toolkeeper.mcp.input_required import can_answer
        from toolkeeper.mcp.server import ELICIT_CAPABILITY

        manager = self._manager
        tracked = face.notifier.session(sid)
        transport = manager._server_instances.get(sid) if manager is not None else None
        if tracked is None or transport is None or transport.is_terminated \
                or (transport.idle_scope is not None and transport.idle_scope.cancel_called):
            return None, None
        conn = tracked[0]
        if (not self._owns(scope, sid) or not conn.initialize_accepted
                or conn.check_capability(ELICIT_CAPABILITY) or can_answer(conn)
                or face.levels.of(conn) is not None):  # its log messages: the SDK's
            return None, None
        return lean.plan_in_session(scope, parsed, sid, conn.protocol_version), transport

    async def _step_up(self, send: Send, parsed: Any, who: Any) -> bool:
        """A ``tools/call`` an OAuth token lacks the scopes for (its agent's profile has
        them): 403 ``insufficient_scope`` naming the OAuth scopes to ask for (MCP
        authorization, scope challenge), so the client can step up; ``False`` otherwise."""
        params = parsed.get("params") if isinstance(parsed, dict) else None
        name = params.get("name") if isinstance(params, dict) else None
        if parsed.get("method") != "tools/call" or not isinstance(name, str):
            return False
        from toolkeeper.mcp.views import step_up_scopes

        if self.face is None:
            await self._start()
        assert self.face is not None
        missing = step_up_scopes(self.face.listings, self.gw.catalog, who, name)
        if not missing:
            return False
        wanted = self.gw.bearers.oauth_scopes_for(who, missing)
        await _jsonrpc_error(send, 403, -32001, f"scope_missing: the token does not grant "
                             f"{', '.join(sorted(missing))}", {"www-authenticate":
                             self.gw.bearers.challenge(PATH, error="insufficient_scope",
                                                       scopes=wanted)})
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _jsonrpc_error(send, 413, -32600,
                                 f"the message exceeds {self.max_body_bytes} bytes")
            return
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        token = token.strip()
        who, refused = None, None
        if scheme.lower() == "bearer" and token:
            who = self.gw.cached_principal(token)
            if who is None:
                try:
                    who = await self.gw.authenticate_bearer(token)
                except TokenRefused as exc:
                    refused = exc
        if who is None:
            why = f"{refused.reason}: {refused.message}" if refused else \
                "unauthenticated: send an agent's token as Authorization: Bearer …"
            await _jsonrpc_error(send, refused.status if refused else 401, -32001, why, {
                "www-authenticate": self.gw.bearers.challenge(PATH, refused=refused)})
            return
        carry(who, token)  # token exchange for upstreams (never sent upstream)
        if who.agent is None:
            await _jsonrpc_error(send, 403, -32001, "MCP serves agents: this token is not an "
                                 "agent's (use the REST API for management)")
            return
        scope[CREDENTIAL_KEY] = (token, who)  # the SDK's user, made when it is needed
        # RFC 9110 §5.5: a field value excludes surrounding whitespace (the SDK compares
        # the routing headers of 2026-07-28 requests byte for byte)
        scope["headers"] = [(k, v.strip() if k.startswith(b"mcp-") else v)
                            for k, v in scope["headers"]]
        if scope.get("method") == "POST":
            body = await _read_body(receive, self.max_body_bytes)
            if body is None:
                await _jsonrpc_error(send, 413, -32600,
                                     f"the message exceeds {self.max_body_bytes} bytes")
                return
            parsed = _parsed(body)
            if self._invalid_id(parsed):
                await _jsonrpc_error(send, 400, -32600, "Invalid Request: a JSON-RPC id is "
                                     "a string, a number or null")
                return
            if who.scopes is not None and await self._step_up(send, parsed, who):
                return
            raw_sid = headers.get(b"mcp-session-id")  # the head's map, read once above
            sid = None if raw_sid is None else raw_sid.strip().decode("latin-1")
            if self.fast_path and self.face is not None and await self._lean(
                    scope, send, parsed, who, sid):
                return
            if self._running and sid is not None:  # cancelling a lean request? (the SDK
                self._cancel_lean(scope, parsed, sid)  # answers the notification itself)
            scope["toolkeeper.mcp.body"] = body  # sessions.BODY_KEY: mints a session's id
            receive = _replay(body, receive)
        elif scope.get("method") == "GET" and await self._lean_get(scope, receive, send, headers):
            return
        app = self._app or await self._start()
        from mcp.server.auth.middleware.auth_context import auth_context_var

        reset = auth_context_var.set(_sdk_user(scope))
        try:
            await app(scope, receive, send)
        finally:
            auth_context_var.reset(reset)

