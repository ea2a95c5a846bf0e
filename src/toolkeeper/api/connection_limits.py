"""uvicorn's httptools protocol with the two bounds it lacks: a cap on a request's head
(request line + headers) and a deadline for sending it.

- ``max_header_bytes`` rides on uvicorn's ``h11_max_incomplete_event_size`` (the same bound
  for its h11 backend; httptools ignores it): a head larger than that is answered
  ``header_too_large`` 431 and the connection closed.
- The deadline is uvicorn's ``timeout_keep_alive``: a connection that has not completed a
  request's headers that long after it opened (or after its previous response) is closed,
  whether it sent nothing (idle) or trickles bytes (slowloris).

Both ride on uvicorn's own settings so the class, named by its import path, works unchanged
in ``--workers`` processes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolkeeper.model.reasons import Reason

DEFAULT_MAX_HEADER_BYTES = 65_536


def _refusal(max_bytes: int) -> bytes:
    body = orjson.dumps({"error": {
        "reason": Reason.HEADER_TOO_LARGE.value,
        "message": f"the request line and headers exceed {max_bytes} bytes",
        "details": {"max_header_bytes": max_bytes}}})
    return (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` that bounds the size and the arrival time of request heads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_head = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_HEADER_BYTES
        self._head_bytes = 0
        self._in_body = False
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._in_body:
            self._head_bytes += len(data)
            if self._head_bytes > self._max_head:
                self._cancel_head_timer()
                self.transport.write(_refusal(self._max_head))
                self.transport.close()
                return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_body = True
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def _await_head(self) -> None:
        self._in_body, self._head_bytes = False, 0
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.timeout_keep_alive, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if not self._in_body and not self.transport.is_closing():
            self.transport.close()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
