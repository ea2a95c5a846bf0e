"""Request-level guards as ASGI middleware: body size cap, JSON-only bodies, a nesting
limit, and JSON strings that are valid Unicode."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkeeper.api.errors import error_body
from toolkeeper.canonical import invalid_unicode
from toolkeeper.model.reasons import Reason

_BODY_METHODS = {b"POST", b"PUT", b"PATCH"}
MAX_JSON_DEPTH = 256
"""The deepest nesting (objects and arrays) a REST body may have: deeper bodies are 400
``json_too_deep`` before any parser recurses into them."""
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


def _no_body(scope: Scope, skip: tuple[str, ...]) -> bool:
    """Not a request whose body these guards look at (or a path that checks for itself)."""
    return scope["type"] != "http" or scope["method"].encode() not in _BODY_METHODS \
        or scope["path"] in skip


class BodyGuard:
    """413 ``payload_too_large`` past ``max_bytes`` (declared or streamed); 415
    ``unsupported_media_type`` for a non-JSON body on a JSON endpoint."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, skip: tuple[str, ...] = ()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.skip = skip
        """Paths that answer in their own protocol (``/mcp``: JSON-RPC errors)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _no_body(scope, self.skip):
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


def json_depth_over(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``body`` nests deeper than ``limit`` (brackets inside strings do not count;
    a body with fewer brackets than the limit costs two counts)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub(b"", body)):
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > limit:
            return True
    return False


async def _buffered(receive: Receive) -> tuple[list[Message], bytes]:
    """The whole request body (bounded by BodyGuard, outside the guards that buffer) and the
    messages it came in, to replay to the app."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    return messages, b"".join(m.get("body", b"") for m in messages)


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands out the buffered ``messages`` first, then the real one."""

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return replay


class _BodyGuard:
    """A middleware that reads a request body whole (bounded by BodyGuard, outside it),
    lets :meth:`refused` answer it, and otherwise replays it to the app. Paths in ``skip``
    and requests without a body pass straight through."""

    def __init__(self, app: ASGIApp, *, skip: tuple[str, ...] = ()) -> None:
        self.app = app
        self.skip = skip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _no_body(scope, self.skip):
            await self.app(scope, receive, send)
            return
        messages, body = await _buffered(receive)
        if await self.refused(body, send):
            return
        await self.app(scope, _replaying(messages, receive), send)

    async def refused(self, body: bytes, send: Send) -> bool:
        """Answer ``body`` with a refusal and say so, or leave it to the app."""
        raise NotImplementedError


class DepthGuard(_BodyGuard):
    """400 ``json_too_deep`` for a body nested deeper than :data:`MAX_JSON_DEPTH` (the
    parsers recurse per level: a stated limit, not a parser's stack, decides)."""

    async def refused(self, body: bytes, send: Send) -> bool:
        if not json_depth_over(body):
            return False
        await _reply(send, 400, Reason.JSON_TOO_DEEP,
                     f"the body nests deeper than {MAX_JSON_DEPTH} levels (the limit on JSON "
                     "nesting)")
        return True


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON ``\\uD800`` to ``\\uDFFF`` escape: half of a pair, or a lone surrogate."""


class UnicodeGuard(_BodyGuard):
    """422 ``invalid_arguments`` with the JSON pointer of the first string (key or value)
    of a JSON body that is not valid Unicode (a lone surrogate escape such as ``\\ud800``),
    before any route stores it. Surrogate pairs are fine; bodies without a surrogate escape
    (nearly all) cost one regular-expression scan. Paths in ``skip`` check for themselves
    (the execution routes: the pipeline refuses such arguments and audits the refusal)."""

    async def refused(self, body: bytes, send: Send) -> bool:
        if not _SURROGATE_ESCAPE.search(body):
            return False
        pointer = _bad_string(body)
        if pointer is None:
            return False
        message_text = "a string is not valid Unicode (a lone surrogate)"
        payload: Any = orjson.dumps(error_body(
            "invalid_arguments", message_text,
            {"errors": [{"pointer": pointer, "message": message_text}]}))
        await _send(send, 422, payload)
        return True


def _bad_string(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:  # malformed: the route answers that itself
        return None
    return invalid_unicode(data)


class _TooLarge(Exception):
    pass


async def _reply(send: Send, status: int, reason: str, message: str) -> None:
    await _send(send, status, orjson.dumps(error_body(reason, message)))


async def _send(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
