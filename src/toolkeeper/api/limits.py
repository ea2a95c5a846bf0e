"""Request-level guards as ASGI middleware: body size cap and JSON-only bodies."""

from __future__ import annotations

import contextlib
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkeeper.api.errors import error_body

_BODY_METHODS = {b"POST", b"PUT", b"PATCH"}


class BodyGuard:
    """413 ``payload_too_large`` past ``max_bytes`` (declared or streamed); 415
    ``unsupported_media_type`` for a non-JSON body on a JSON endpoint."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, skip: tuple[str, ...] = ()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.skip = skip
        """Paths that answer in their own protocol (``/mcp``: JSON-RPC errors)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"].encode() not in _BODY_METHODS \
                or scope["path"] in self.skip:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await _reply(send, 413, "payload_too_large",
                         f"the body exceeds {self.max_bytes} bytes")
            return
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        has_body = length not in (None, b"0") or b"transfer-encoding" in headers
        if has_body and ctype != b"application/json":
            await _reply(send, 415, "unsupported_media_type",
                         "send the body as application/json")
            return
        seen, over = 0, False

        async def limited() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = True
                    raise _TooLarge
            return message

        async def unless_over(message: Message) -> None:
            # the framework may turn _TooLarge into its own error response: drop it
            if not over:
                await send(message)

        with contextlib.suppress(_TooLarge):
            await self.app(scope, limited, unless_over)
        if over:
            await _reply(send, 413, "payload_too_large",
                         f"the body exceeds {self.max_bytes} bytes")


class _TooLarge(Exception):
    pass


async def _reply(send: Send, status: int, reason: str, message: str) -> None:
    body: Any = orjson.dumps(error_body(reason, message))
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
