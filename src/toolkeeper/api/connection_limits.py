"""uvicorn's httptools protocol with the three bounds it lacks: a cap on a request's head
(request line + headers), a deadline for sending it, and a bounded drain of a body that
is still arriving when its answer has been written.

- ``max_header_bytes`` rides on uvicorn's ``h11_max_incomplete_event_size`` (the same bound
  for its h11 backend; httptools ignores it): a head larger than that is answered
  ``header_too_large`` 431 and the connection closed (after the drain below). Only the
  head's own bytes count: from the request line's first byte (the empty lines the parser
  skips before it count too) to the blank line that ends the headers (``\\r\\n\\r\\n``: the
  parser takes no other line end). curl writes a request's head and body in one write, so
  one read holds both; the body's bytes are the body's, bounded by ``max_body_bytes``.
  A head pipelined behind a request is counted from the first read after that request's
  body ended: the rest of the read in which it ended (at most one read) goes uncounted.
- The deadline is uvicorn's ``timeout_keep_alive``: a connection that has not completed a
  request's headers that long after it opened (or after its previous exchange ended) is
  closed, whether it sent nothing (idle) or trickles bytes (slowloris).
- The drain: an answer written before its request's body has all arrived (413 for a body
  past ``max_body_bytes``, 401 before reading, the 431 above) is followed by reading and
  discarding what the client still sends, up to :data:`DRAIN_MAX_BYTES` or
  :data:`DRAIN_MAX_SECONDS` after the answer, or until the client sends nothing for
  ``timeout_keep_alive``, whichever comes first; only then is the connection closed (or,
  when the body ends within those bounds and the connection is kept alive, the next
  request read). A socket closed with unread bytes makes the kernel send a reset, and the
  reset discards the answer before a client that is still sending its body reads it;
  nginx (``lingering_close``: 30 s, 5 s idle) and Go's ``net/http`` (256 KiB) drain for
  the same reason. When the connection is to close, the answer's end is signalled at once
  (``write_eof``) and the drain only keeps the socket from resetting it.

Beside the bounds, one write per answer: uvicorn writes an answer's head alone, then its
body; here the head waits for the body's first write (or the loop's next turn, for a
stream), so that a small answer reaches the client whole (issue 32: a head alone cost every
MCP call a wasted wake-up of the client).

All ride on uvicorn's own settings or on this module, so the class, named by its import
path, works unchanged in ``--workers`` processes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolkeeper.model.reasons import Reason

DEFAULT_MAX_HEADER_BYTES = 65_536
DRAIN_MAX_BYTES = 64 * 1024 * 1024
"""Bytes read and discarded after an early answer before the connection is cut: 32 times
the default body cap, ~0.1 s at loopback speed."""
DRAIN_MAX_SECONDS = 30.0
"""Seconds after an early answer before the connection is cut (nginx's
``lingering_time``)."""
_HEAD_END = b"\r\n\r\n"


def _refusal(max_bytes: int) -> bytes:
    body = orjson.dumps({"error": {
        "reason": Reason.HEADER_TOO_LARGE.value,
        "message": f"the request line and headers exceed {max_bytes} bytes",
        "details": {"max_header_bytes": max_bytes}}})
    return (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


class _CycleTransport(asyncio.Transport):
    """The transport a request's cycle writes its answer to: its ``close()`` drains the
    body the client is still sending before the socket closes; the answer's head (uvicorn
    writes it alone, on ``http.response.start``) waits for the body's first write, so that
    both go out in one write (:meth:`BoundedHttpToolsProtocol.hold_head`)."""

    def __init__(self, protocol: BoundedHttpToolsProtocol, cycle: Any) -> None:
        super().__init__()
        self._protocol = protocol
        self._cycle = cycle
        self._head_due = True

    def write(self, data: Any) -> None:
        if self._head_due and self._cycle.response_started:  # not a 100 Continue
            self._head_due = False
            self._protocol.hold_head(data)
        else:
            self._protocol.write_after_head(data)

    def is_closing(self) -> bool:
        return self._protocol.closing or self._protocol.transport.is_closing()

    def close(self) -> None:
        self._protocol.flush_head()
        self._protocol.close_after_drain()


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` that bounds the size and the arrival time of request heads,
    and drains (bounded) a body still arriving after its answer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_head = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_HEADER_BYTES
        self._head_bytes = 0
        self._reading_head = True
        self._head_begun = False
        """A byte other than the empty lines allowed before a request line has come."""
        self._tail = b""
        """The head's last bytes so far: its end may straddle two reads."""
        self._message_done = True
        """The parser has read the current request to its end (or there is none yet)."""
        self._head_timer: asyncio.TimerHandle | None = None
        self._draining = False
        self._parse_drained = True
        """Feed the drained bytes to the parser (a body: it may end, and the connection
        go on); else discard them (a head refused mid-way)."""
        self._drained = 0
        self._drain_until = 0.0
        self._last_read = 0.0
        self._drain_timer: asyncio.TimerHandle | None = None
        self.closing = False
        """The connection closes once the drain ends: nothing more is answered on it."""
        self._head = b""
        """An answer's head not written yet (:meth:`hold_head`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._cancel_drain_timer()
        super().connection_lost(exc)

    def hold_head(self, head: bytes) -> None:
        """Keep an answer's head until its body's first write (:meth:`write_after_head`),
        else until the loop's next turn (a stream whose first event comes later). Written
        alone, the head woke the client for a partial answer, and on a busy machine the
        woken client took the CPU from the body's write: a context switch, a wasted read
        and a second wake-up on every call's path."""
        self.flush_head()
        self._head = head
        self.loop.call_soon(self.flush_head)

    def write_after_head(self, data: Any) -> None:
        head, self._head = self._head, b""
        self.transport.write(head + data if head else data)

    def flush_head(self) -> None:
        """Write the held head now (before anything else reaches the socket)."""
        head, self._head = self._head, b""
        if head and not self.transport.is_closing():
            self.transport.write(head)

    def data_received(self, data: bytes) -> None:
        self.flush_head()  # a 400 or 431 for what follows is written after it
        if self._draining:
            self._drain(data)
            return
        if self._reading_head:
            self._count_head(data)
            if self._head_bytes > self._max_head:
                self._refuse_head()
                return
        super().data_received(data)

    def _drain(self, data: bytes) -> None:
        self._drained += len(data)
        self._last_read = self.loop.time()
        if self._drained > DRAIN_MAX_BYTES:
            self._close_now()
        elif self._parse_drained:  # the parser drops a body answered already, and says
            try:                   # where it ends (on_message_complete)
                self.parser.feed_data(data)
            except httptools.HttpParserError:  # no 400 after the answer: just close
                self._close_now()

    def _count_head(self, data: bytes) -> None:
        """Add the bytes of ``data`` up to the end of the head being read."""
        start = 0
        if not self._head_begun:
            start = len(data) - len(data.lstrip(b"\r\n"))
            if start == len(data):
                self._head_bytes += len(data)
                return
            self._head_begun = True
        at = (self._tail + data[start:start + 3]).find(_HEAD_END)
        if at >= 0:
            end = start + at + len(_HEAD_END) - len(self._tail)
        else:
            at = data.find(_HEAD_END, start)
            end = at + len(_HEAD_END) if at >= 0 else -1
        if end < 0:
            self._head_bytes += len(data)
            self._tail = (self._tail + data[max(start, len(data) - 3):])[-3:]
        else:
            self._head_bytes += end
            self._reading_head = False

    def _refuse_head(self) -> None:
        self._cancel_head_timer()
        self._reading_head = False
        self.transport.write(_refusal(self._max_head))
        self._parse_drained = False  # the parser is mid-head: nothing more for it
        self._linger()

    def on_message_begin(self) -> None:
        self._message_done = False
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        if self.closing:  # a request pipelined behind the last one answered: dropped
            return
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:
            self.cycle.transport = _CycleTransport(self, self.cycle)

    def on_message_complete(self) -> None:
        self._message_done = True
        self._head_bytes, self._reading_head, self._head_begun, self._tail = 0, True, False, b""
        super().on_message_complete()
        if self._draining:
            self._cancel_drain_timer()
            self._draining = False
            if self.closing:
                self._close_now()
            else:
                self._arm_head_timer()

    def on_response_complete(self) -> None:
        self.flush_head()  # a HEAD request's answer has no body
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if not self._message_done:  # answered before the body was all in: read it first
            self._unset_keepalive_if_required()
            if not self._draining:
                self._start_drain()
        elif not self.closing:
            self._arm_head_timer()

    def shutdown(self) -> None:
        self.flush_head()
        super().shutdown()

    def close_after_drain(self) -> None:
        """The cycle's close: at once when its request has been read to the end (or its
        answer was cut short), else once the rest of the body has drained."""
        if self._message_done or self.cycle is None or not self.cycle.response_complete:
            self._close_now()
        else:
            self._linger()

    def _linger(self) -> None:
        """Close once the drain ends; the answer is complete: the client learns so now."""
        self.flush_head()
        self.closing = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._start_drain()

    def _start_drain(self) -> None:
        self._cancel_drain_timer()
        self._draining, self._drained = True, 0
        self._last_read = self.loop.time()
        self._drain_until = self._last_read + DRAIN_MAX_SECONDS
        self.flow.resume_reading()
        self._drain_timer = self.loop.call_later(
            min(DRAIN_MAX_SECONDS, self.timeout_keep_alive), self._drain_late)

    def _drain_late(self) -> None:
        now = self.loop.time()
        idle_until = self._last_read + self.timeout_keep_alive
        if now >= self._drain_until or now >= idle_until:
            self._drain_timer = None
            self._close_now()
        else:
            self._drain_timer = self.loop.call_at(min(self._drain_until, idle_until),
                                                  self._drain_late)

    def _close_now(self) -> None:
        self.flush_head()
        self.closing = True
        self._draining = False
        self._cancel_drain_timer()
        self._cancel_head_timer()
        if not self.transport.is_closing():
            self.transport.close()

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.timeout_keep_alive, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self._reading_head and not self.transport.is_closing():
            self.transport.close()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _cancel_drain_timer(self) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
