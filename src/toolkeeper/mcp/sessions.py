"""2025-11-25 sessions every worker and replica can serve.

The SDK's session manager keeps sessions in one process's memory: a request carrying an
``Mcp-Session-Id`` minted by another worker (``serve --workers N``) or replica (behind a
round-robin balancer) was answered 404. Here a session id is sealed: an HMAC (key derived
from :func:`toolkeeper.mcp.state.state_key`, shared by every process over one store) over
what the session negotiated — protocol version, client capabilities and info — and a
digest of the credential that opened it. A process that does not know the id verifies the
seal and the credential, then *adopts* the session: a local, already initialized session
under the same id. A forged or altered id, or one presented with another credential, is
answered 404 "Session not found" like an unknown one.

Degraded, by design (README, MCP section): a DELETE ends the session in the process that
serves it (another process would adopt the id again while the credential is valid); an
in-band confirmation (elicitation) is answered only if the client's reply reaches the
process that asked — otherwise the call ends ``confirmation_required`` after the bounded
wait, with its approval id, as for a client that cannot elicit; ``list_changed`` reaches
a session through the process holding its GET stream once that process served it a
listing.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import logging
import os
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from anyio.abc import TaskStatus
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from starlette.types import Receive, Scope, Send

from toolkeeper.mcp.session_gc import SessionGc
from toolkeeper.mcp.state import b64url, unb64url

if TYPE_CHECKING:
    from mcp.shared.transport_context import TransportContext

log = logging.getLogger("toolkeeper.mcp")
BODY_KEY = "toolkeeper.mcp.body"
"""The scope key under which the endpoint leaves a POST's body (read once, already)."""
_PREFIX = "tk1."
_OPENING: contextvars.ContextVar[tuple[str, bytes | None]] = contextvars.ContextVar(
    "toolkeeper_mcp_opening", default=("", None))
"""Who opens a new session and with what ``initialize`` (the SDK's ``_admit_session``
is called without the request)."""
_MAX_ENDED = 10_000
FULL_RETRY_AFTER_S = 5
"""``Retry-After`` on the 503 a new session gets while ``max_sessions`` are open."""
_MAX_ID = 8192
"""Longer ids are refused unread (capabilities are small; a header is not a store)."""


class SessionSeal:
    """Mints and verifies sealed session ids."""

    def __init__(self, state_key: bytes) -> None:
        self._key = hmac.new(state_key, b"toolkeeper mcp session id v1", hashlib.sha256).digest()

    @staticmethod
    def owner(user: Any) -> str:
        """A digest of the credential (tenant/agent and token id), never the token."""
        if not isinstance(user, AuthenticatedUser):
            return ""
        ident = orjson.dumps(authorization_context(user), option=orjson.OPT_SORT_KEYS)
        return b64url(hashlib.sha256(ident).digest()[:16])

    def _mac(self, payload: str) -> str:
        return b64url(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def mint(self, owner: str, body: bytes | None) -> str:
        """An id for a session opened by ``owner`` with the ``initialize`` in ``body``."""
        claims: dict[str, Any] = {"o": owner, "n": b64url(os.urandom(12))}
        try:
            message = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            message = None
        if not isinstance(message, dict):
            message = {}
        params = message.get("params")
        if isinstance(params, dict) and message.get("method") == "initialize":
            asked = params.get("protocolVersion")
            claims["v"] = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS \
                else LATEST_HANDSHAKE_VERSION
            claims["c"] = params.get("capabilities")
            claims["i"] = params.get("clientInfo")
        payload = b64url(orjson.dumps(claims))
        return f"{_PREFIX}{payload}.{self._mac(payload)}"

    def open(self, session_id: str, owner: str) -> dict[str, Any] | None:
        """The claims of an authentic id opened by ``owner``; ``None`` otherwise."""
        if len(session_id) > _MAX_ID or not session_id.startswith(_PREFIX):
            return None
        payload, _, mac = session_id[len(_PREFIX):].partition(".")
        if not hmac.compare_digest(mac.encode("ascii", "replace"),
                                   self._mac(payload).encode("ascii")):
            return None
        try:
            claims = orjson.loads(unb64url(payload))
        except ValueError:
            return None
        if not isinstance(claims, dict) or claims.get("o") != owner \
                or claims.get("v") not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        return claims


def _retry_on_full(send: Send) -> Send:
    """``send``, adding ``Retry-After`` to a 503 (the SDK's answer when the manager is full:
    a bounded table of sessions, never an out-of-memory; the client tries again later)."""

    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 503:
            headers = [*message.get("headers", ()),
                       (b"retry-after", str(FULL_RETRY_AFTER_S).encode("ascii"))]
            message = {**message, "headers": headers}
        await send(message)
    return sending


class SharedSessionManager(StreamableHTTPSessionManager):
    """The SDK's manager, with sealed ids and adoption of sessions opened elsewhere."""

    def __init__(self, *args: Any, seal: SessionSeal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seal = seal
        self._ended: dict[str, None] = {}
        """Ids the client ended here (DELETE): never adopted again by this process."""
        self.gc = SessionGc()

    async def _discard_session(self, session_id: str,
                               transport: StreamableHTTPServerTransport) -> None:
        if transport.is_terminated:  # terminated before its discard: the client's DELETE
            self._ended[session_id] = None
            while len(self._ended) > _MAX_ENDED:
                del self._ended[next(iter(self._ended))]
        if self._server_instances.get(session_id) is transport:
            self.gc.ended(len(self._server_instances) - 1)
        await super()._discard_session(session_id, transport)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive,
                                       send: Send) -> None:
        headers = dict(scope["headers"])
        raw = headers.get(MCP_SESSION_ID_HEADER.encode("ascii"))
        owner = self.seal.owner(scope.get("user"))
        if raw is None:  # a new session: its id is minted in _admit_session
            token = _OPENING.set((owner, scope.get(BODY_KEY)))
            try:
                await super()._handle_stateful_request(scope, receive, _retry_on_full(send))
            finally:
                _OPENING.reset(token)
            return
        sid = raw.decode("latin-1")
        if sid not in self._server_instances and sid not in self._ended:
            claims = self.seal.open(sid, owner)
            if claims is not None:
                async with self._session_creation_lock:
                    if sid not in self._server_instances:
                        await self._adopt(sid, claims, scope.get("user"))
        await super()._handle_stateful_request(scope, receive, send)

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is None:
            return None
        old = transport.mcp_session_id
        assert old is not None
        owner, body = _OPENING.get()
        sid = self.seal.mint(owner, body)
        transport.mcp_session_id = sid
        self._server_instances[sid] = self._server_instances.pop(old)
        if old in self._session_owners:
            self._session_owners[sid] = self._session_owners.pop(old)
        log.info("MCP session …%s opened by pid %d", sid[-12:], os.getpid())
        self.gc.opened()
        return transport

    async def _adopt(self, sid: str, claims: dict[str, Any], user: Any) -> None:
        """Serve ``sid`` here from now on: an initialized session with what it negotiated."""
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return  # the SDK then answers 404: the client opens a new session
        transport = StreamableHTTPServerTransport(
            mcp_session_id=sid, is_json_response_enabled=self.json_response,
            event_store=self.event_store, security_settings=self.security_settings,
            retry_interval=self.retry_interval, idle_timeout=self.session_idle_timeout)

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with transport.connect() as (read_stream, write_stream):
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read_stream, write_stream, inline_methods=frozenset({"initialize"}))
                connection = Connection.from_envelope(
                    str(claims["v"]), claims.get("i"), claims.get("c"), outbound=dispatcher)
                connection.session_id = sid
                task_status.started()
                idle = transport.idle_scope or anyio.CancelScope()
                try:
                    with idle:
                        await serve_connection(self.app, dispatcher, connection=connection,
                                               lifespan_state=self._lifespan_state)
                except Exception:
                    log.exception("adopted MCP session crashed")
                finally:
                    await self._discard_session(sid, transport)

        assert self._task_group is not None
        await self._task_group.start(run)
        self._server_instances[sid] = transport
        if isinstance(user, AuthenticatedUser):
            self._session_owners[sid] = authorization_context(user)
        self.gc.opened()
        log.info("MCP session …%s adopted by pid %d", sid[-12:], os.getpid())
