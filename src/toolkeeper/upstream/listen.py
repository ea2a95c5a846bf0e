"""A 2026-07-28 upstream's list changes, heard on a ``subscriptions/listen`` stream held
open by the lean client's connection (the SDK client's own ``listen`` serves the others:
:meth:`toolkeeper.upstream.pool.UpstreamPool._listen`).

Stateless servers announce ``tools``/``prompts``/``resources`` list changes only there (not
on a call's own stream), so without it a tool an upstream adds is seen at the next periodic
re-sync. Each announcement hands the change's kind to ``changed`` (the pool re-lists the
server, which re-syncs the registry and so tells the agents whose listings changed). The
stream is read bounded (an event larger than :data:`MAX_EVENT_BYTES` ends it) and opened
again after a pause when it ends, until the connection stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import httpx
import orjson

from toolkeeper.upstream.asking import envelope

log = logging.getLogger("toolkeeper.upstream")
MODERN: Final = "2026-07-28"
KINDS: Final = {"notifications/tools/list_changed": "tools",
                "notifications/prompts/list_changed": "prompts",
                "notifications/resources/list_changed": "resources"}
MAX_EVENT_BYTES: Final = 64 * 1024
PAUSE_S: Final = 2.0
"""Before a stream that ended (or could not be opened) is opened again."""


@contextmanager
def hearing(loop: asyncio.AbstractEventLoop, cfg: Any, lean: Any,
            relist: Callable[[Any, Any], Awaitable[None]]) -> Iterator[None]:
    """Within: a stateless (2026-07-28) server's list changes re-list it
    (``relist(cfg, lean)``: the pool's, which re-syncs the registry)."""
    if lean.protocol_version != MODERN:
        yield
        return
    auth = lean.bearer

    async def token() -> str | None:
        return None if auth is None else str(await auth.current())

    async def changed(_kind: str) -> None:
        await relist(cfg, lean)
    task = loop.create_task(hold(lean.url, dict(lean.extra_headers), token, changed,
                                 connect_timeout_s=cfg.connect_timeout_s))
    try:
        yield
    finally:
        task.cancel()


def listen_message() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "_meta": envelope({"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}),
        "notifications": {"toolsListChanged": True, "promptsListChanged": True,
                          "resourcesListChanged": True}}}


async def hold(url: str, headers: dict[str, str], token: Callable[[], Awaitable[str | None]],
               changed: Callable[[str], Awaitable[None]], *, connect_timeout_s: float
               ) -> None:
    """Until cancelled: keep a listen stream open on ``url``, ``changed(kind)`` per change."""
    timeout = httpx.Timeout(None, connect=connect_timeout_s)
    async with httpx.AsyncClient(timeout=timeout) as http:
        while True:
            try:
                await _once(http, url, headers, await token(), changed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the pause below, then again
                log.info("upstream %s: listen stream ended: %s", url, str(exc)[:200])
            await asyncio.sleep(PAUSE_S)


async def _once(http: httpx.AsyncClient, url: str, headers: dict[str, str],
                token: str | None, changed: Callable[[str], Awaitable[None]]) -> None:
    sent = {**headers, "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json", "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen"}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with http.stream("POST", url, content=orjson.dumps(listen_message()),
                           headers=sent) as resp:
        kind = resp.headers.get("content-type", "").split(";")[0].strip()
        if resp.status_code != 200 or kind != "text/event-stream":
            raise RuntimeError(f"HTTP {resp.status_code} {kind or '(no content type)'}")
        data: list[bytes] = []
        size = 0
        async for line in _lines(resp.aiter_bytes()):
            if line.startswith(b"data:"):
                size += len(line)
                if size > MAX_EVENT_BYTES:
                    raise RuntimeError(f"an event larger than {MAX_EVENT_BYTES} bytes")
                data.append(line[5:].lstrip())
            elif not line and data:
                event, data, size = _loads(b"\n".join(data)), [], 0
                what = KINDS.get(event.get("method", "")) if isinstance(event, dict) else None
                if what is not None:
                    await changed(what)


async def _lines(pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The stream's lines (CRLF, LF or CR), none longer than :data:`MAX_EVENT_BYTES`."""
    rest = b""
    async for piece in pieces:
        text = rest + piece
        lines = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        rest = lines.pop()
        if text.endswith(b"\r"):  # maybe half of a CRLF: the next piece decides
            rest, lines = lines.pop() + b"\r" if lines else b"\r", lines
        if len(rest) > MAX_EVENT_BYTES:
            raise RuntimeError(f"a line longer than {MAX_EVENT_BYTES} bytes")
        for line in lines:
            yield line


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


__all__ = ["hearing", "hold", "listen_message"]
