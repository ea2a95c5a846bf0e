"""Reading a streamable-HTTP response's SSE stream piece by piece (the lean upstream client,
:mod:`toolkeeper.upstream.http_client`): the JSON-RPC response to one request, the server's
requests on the way, and (when kept) its notifications."""

from __future__ import annotations

from typing import Any

import orjson

from toolkeeper.upstream.notes import Notes


def loads(body: bytes) -> Any:
    """JSON, or ``None`` for an empty or malformed body."""
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


async def hand(sse: Sse, notes: Notes) -> None:
    """Hand the notifications read so far to ``notes``."""
    others, sse.others = sse.others, []
    for event in others:
        await notes.deliver(event)


class Sse:
    """An SSE stream read piece by piece until the JSON-RPC response to ``rid``: lines end
    with CRLF, LF or CR; ``data:`` lines gather until a blank line ends the event."""

    __slots__ = ("_data", "_keep", "_rest", "_rid", "answered", "others", "requests")

    def __init__(self, rid: int, *, keep: bool = False) -> None:
        self._rid = rid
        self._keep = keep
        self.requests: list[dict[str, Any]] = []
        """The server's requests seen on the stream, not yet answered."""
        self.answered = 0
        self._rest = bytearray()
        self._data: list[bytes] = []
        self.others: list[Any] = []
        """With ``keep``: the other events read so far (notifications), bounded."""

    def feed(self, piece: bytes) -> Any:
        """Our response if this piece completes it, else ``None``."""
        if b"\n" not in piece and b"\r" not in piece and not self._rest.endswith(b"\r"):
            self._rest += piece  # a long line: gathered without copying it again and again
            return None
        text = bytes(self._rest) + piece
        hold = text.endswith(b"\r")  # maybe half of a CRLF
        if hold:
            text = text[:-1]
        lines = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._rest = bytearray(lines.pop() + (b"\r" if hold else b""))
        for line in lines:
            if (event := self._line(line)) is not None:
                return event
        return None

    def _line(self, line: bytes) -> Any:
        if line.startswith(b"data:"):
            self._data.append(line[5:].lstrip())
        elif not line and self._data:
            event, self._data = loads(b"\n".join(self._data)), []
            if isinstance(event, dict) and event.get("id") == self._rid and (
                    "result" in event or "error" in event):
                return event
            if isinstance(event, dict) and isinstance(event.get("method"), str) \
                    and "id" in event:
                self.requests.append(event)
            elif self._keep and len(self.others) < 64:
                self.others.append(event)
        return None

    def end(self) -> Any:
        """At the end of the stream: the last event if no blank line ended it."""
        rest, self._rest = bytes(self._rest).rstrip(b"\r"), bytearray()
        if rest and (event := self._line(rest)) is not None:
            return event
        return loads(b"\n".join(self._data)) if self._data else None


__all__ = ["Sse", "hand", "loads"]
