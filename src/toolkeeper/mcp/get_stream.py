"""The standalone ``GET`` stream of a 2025-11-25 session, held by its request's own task.

The SDK serves that stream with sse-starlette's ``EventSourceResponse``: per open stream,
a task group of five tasks (body, keep-alive, exit signal, writer, disconnect), two memory
streams between them and the session's router, ~500 objects the cyclic collector walks at
every full collection. Ten thousand idle sessions made ~1 GiB and full collections of
seconds, which the active callers' p99 paid. Here the stream is the request's task alone:
it waits for the client's disconnect with a deadline (the keep-alive period), and the
session's message router writes each message straight to the response through a
:class:`LeanStream` standing where the SDK keeps the stream's queue. Same bytes on the wire
(the SDK's event data, sse-starlette's encoding and keep-alive comments), same 409 for a
second stream, same idle countdown, same end on ``DELETE``, idle expiry, close or shutdown.
Anything else (a replay with ``Last-Event-ID``, another process's session, a refused
check) is the SDK's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.abc
from mcp.server.streamable_http import GET_STREAM_KEY, check_accept_headers
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sse_starlette.event import ensure_bytes
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from toolkeeper.mcp.lean import PING_INTERVAL_S, keep_alive, sse_start

SEP = "\r\n"
"""sse-starlette's default line separator, which the SDK's responses use."""


@contextmanager
def in_flight(transport: Any) -> Iterator[None]:
    """As the SDK transport's ``handle_request`` holds a session while it serves one of
    its requests: the idle countdown stops, and restarts when the last one ends."""
    idle, timeout = transport.idle_scope, transport._idle_timeout
    if idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout


class LeanStream:
    """Both ends of the SDK's standalone-stream queue for one open ``GET``: ``send`` writes
    the message to the response (raising ``ClosedResourceError`` once the stream ended, as
    a closed queue does); ``close``/``aclose`` (the transport's terminate and
    ``close_standalone_sse_stream``) end the response."""

    __slots__ = ("_send", "_transport", "closed", "waiting")

    def __init__(self, transport: Any, send: Send) -> None:
        self._transport, self._send = transport, send
        self.closed = False
        self.waiting: anyio.CancelScope | None = None

    async def send(self, item: Any) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        chunk = ensure_bytes(self._transport._create_event_data(item), SEP)
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    def close(self) -> None:
        self.closed = True
        if self.waiting is not None:
            self.waiting.cancel()

    async def aclose(self) -> None:
        self.close()


class GetStreams:
    """The lean ``GET`` streams open in this process."""

    def __init__(self) -> None:
        self._open: set[LeanStream] = set()
        self._watched = False
        self.exiting = False
        """The server is shutting down: streams end (and new ones are the SDK's)."""

    def open(self) -> int:
        return len(self._open)

    async def serve(self, scope: Scope, receive: Receive, send: Send, transport: Any,
                    sid: str, tg: anyio.abc.TaskGroup) -> None:
        """Hold the stream until the client leaves or the session or server ends it."""
        if not self._watched:
            self._watched = True
            tg.start_soon(self._on_exit)
        stream = LeanStream(transport, send)
        transport._request_streams[GET_STREAM_KEY] = (stream, stream)
        self._open.add(stream)
        try:
            with in_flight(transport):
                await send(sse_start(sid))
                connected = await _hold(stream, receive, send)
        finally:
            stream.closed = True
            self._open.discard(stream)
            if transport._request_streams.get(GET_STREAM_KEY, (None,))[0] is stream:
                del transport._request_streams[GET_STREAM_KEY]
        if connected:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _on_exit(self) -> None:
        """Shutdown ends every stream, as sse-starlette's exit watcher does (uvicorn then
        need not wait out its graceful timeout for them)."""
        await EventSourceResponse._listen_for_exit_signal()
        self.exiting = True
        for stream in list(self._open):
            stream.close()


async def _hold(stream: LeanStream, receive: Receive, send: Send) -> bool:
    """Wait for the client's disconnect, a keep-alive comment every period, until the
    stream is closed; whether the client is still there."""
    while not stream.closed:
        with anyio.CancelScope(deadline=anyio.current_time() + PING_INTERVAL_S) as waiting:
            stream.waiting = waiting
            while (await receive())["type"] != "http.disconnect":
                pass  # the GET's (empty) body
            return False
        stream.waiting = None
        if not stream.closed:
            await send({"type": "http.response.body", "body": keep_alive(), "more_body": True})
    return True


def taken(scope: Scope, headers: dict[bytes, bytes], transport: Any) -> bool:
    """Whether a ``GET`` on a live session of this process is one the lean stream serves
    exactly as the SDK would (else the SDK answers it: replay, refusals, 409)."""
    if transport is None or transport.is_terminated or transport._read_stream_writer is None:
        return False
    idle = transport.idle_scope
    version = headers.get(b"mcp-protocol-version")
    return not ((idle is not None and idle.cancel_called)
                or GET_STREAM_KEY in transport._request_streams
                or b"last-event-id" in headers
                or (version is not None
                    and version.strip().decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS)
                or not check_accept_headers(Request(scope))[1])
