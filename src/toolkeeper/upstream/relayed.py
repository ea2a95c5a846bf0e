"""Prompts, resources, completions and subscriptions on an upstream connection, whichever
client holds it: the lean HTTP client sends any request as it is; the SDK's client
(stdio servers, and HTTP servers the lean client cannot handshake with) has a method per
request. Either way the answer is the wire dict, and every wait is bounded."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio

from toolkeeper.upstream.extras import MAX_PROMPTS, MAX_RESOURCES, MAX_TEMPLATES

log = logging.getLogger("toolkeeper.upstream")
METHOD_NOT_FOUND = -32601
_TASKS: set[asyncio.Task[None]] = set()
"""Upstream listen streams (held here: the loop keeps only weak references)."""
MAX_PAGES = 20
"""Of one listing (each page bounded by the client's own response cap)."""


def _dump(result: Any) -> dict[str, Any]:
    if isinstance(result, dict):
        return result
    out: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


async def tools_of(client: Any) -> list[Any]:
    """The server's tools; none when it serves only prompts or resources."""
    from mcp.shared.exceptions import MCPError

    try:
        return list((await client.list_tools()).tools)
    except MCPError as exc:
        if exc.code == METHOD_NOT_FOUND:
            return []
        raise


async def relay_request(client: Any, method: str, params: dict[str, Any],
                        timeout_s: float) -> dict[str, Any]:
    """``method`` on ``client``; ``MCPError`` as the upstream answered it."""
    from mcp.shared.exceptions import MCPError

    from toolkeeper.upstream.http_client import LeanHttpClient

    if isinstance(client, LeanHttpClient):
        return await client.request(method, params, timeout_s=timeout_s)
    try:
        with anyio.fail_after(timeout_s):
            return _dump(await _sdk(client, method, params))
    except TimeoutError:
        raise MCPError(code=-32001, message="timed out") from None


async def _sdk(client: Any, method: str, params: dict[str, Any]) -> Any:
    import mcp_types as types

    cursor = params.get("cursor")
    if method == "prompts/list":
        return await client.list_prompts(cursor=cursor)
    if method == "prompts/get":
        return await client.get_prompt(params["name"], params.get("arguments") or None)
    if method == "resources/list":
        return await client.list_resources(cursor=cursor)
    if method == "resources/templates/list":
        return await client.list_resource_templates(cursor=cursor)
    if method == "resources/read":
        return await client.read_resource(params["uri"])
    if method == "completion/complete":
        req = types.CompleteRequestParams.model_validate(params)
        context = req.context.arguments if req.context is not None else None
        return await client.complete(req.ref, {"name": req.argument.name,
                                               "value": req.argument.value}, context)
    if method == "resources/subscribe":
        return await client.session.subscribe_resource(params["uri"])
    if method == "resources/unsubscribe":
        return await client.session.unsubscribe_resource(params["uri"])
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=METHOD_NOT_FOUND, message=f"{method} is not relayed")


async def _listing(client: Any, method: str, key: str, model: Any, cap: int,
                   timeout_s: float) -> list[Any] | None:
    """Every page of a listing, bounded; ``None`` when the server offers none."""
    from mcp.shared.exceptions import MCPError

    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        try:
            page = model.model_validate(await relay_request(
                client, method, {"cursor": cursor} if cursor else {}, timeout_s))
        except MCPError as exc:
            if exc.code == METHOD_NOT_FOUND and not items:
                return None
            raise
        items += getattr(page, key)
        cursor = page.next_cursor
        if not cursor or len(items) > cap:
            break
    return items


async def list_extras(client: Any, timeout_s: float) -> dict[str, list[Any] | None]:
    """The server's prompts, resources and resource templates (``None``: it offers none).
    A malformed listing raises (``pydantic.ValidationError``): nothing is synced from it."""
    import mcp_types as types

    caps = getattr(client, "server_capabilities", None)
    offers = {"prompts": caps is None or getattr(caps, "prompts", None) is not None,
              "resources": caps is None or getattr(caps, "resources", None) is not None}
    out: dict[str, list[Any] | None] = {"prompts": None, "resources": None, "templates": None}
    if offers["prompts"]:
        out["prompts"] = await _listing(client, "prompts/list", "prompts",
                                        types.ListPromptsResult, MAX_PROMPTS, timeout_s)
    if offers["resources"]:
        out["resources"] = await _listing(client, "resources/list", "resources",
                                          types.ListResourcesResult, MAX_RESOURCES, timeout_s)
        out["templates"] = await _listing(
            client, "resources/templates/list", "resource_templates",
            types.ListResourceTemplatesResult, MAX_TEMPLATES, timeout_s)
    return out


async def watch_resource(client: Any, uri: str, updated: Any, timeout_s: float) -> None:
    """On the pool's loop: ``updated(uri)`` whenever the upstream says ``uri`` changed. A
    2026-07-28 SDK client gets a ``subscriptions/listen`` stream of its own (a task on this
    loop until the connection ends); a 2025-era one ``resources/subscribe`` (its
    notifications reach the pool's message handler). The lean HTTP client reads no
    notifications: its servers' updates are not relayed (``MCPError``)."""
    from mcp.shared.exceptions import MCPError

    from toolkeeper.upstream.http_client import LeanHttpClient

    if isinstance(client, LeanHttpClient):
        raise MCPError(code=METHOD_NOT_FOUND, message="the lean HTTP client reads no "
                       "notifications")
    if getattr(client, "protocol_version", None) != "2026-07-28":
        with anyio.fail_after(timeout_s):
            await client.session.subscribe_resource(uri)
        return
    from mcp.shared.subscriptions import ResourceUpdated

    ready = asyncio.get_running_loop().create_future()

    async def listen() -> None:
        try:
            async with client.listen(resource_subscriptions=[uri]) as sub:
                if not ready.done():
                    ready.set_result(None)
                async for event in sub:
                    if isinstance(event, ResourceUpdated):
                        updated(event.uri)
        except Exception as exc:  # the connection's own failure handling takes over
            if not ready.done():
                ready.set_exception(exc)
            log.info("upstream listen stream for %s ended: %s", uri[:200], exc)

    _TASKS.add(task := asyncio.get_running_loop().create_task(listen()))
    task.add_done_callback(_TASKS.discard)
    with anyio.fail_after(timeout_s):
        await ready
