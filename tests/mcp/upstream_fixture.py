"""A small upstream MCP server for the upstream tests, on the SDK's low-level Server.

``python upstream_fixture.py stdio`` or ``python upstream_fixture.py http PORT``. The
description of ``echo`` is read from the file named by ``FIXTURE_DESCRIPTION`` on every
listing, so a test can change the upstream definition under a running gateway. Tools:
``echo`` (text; ``notify`` also announces a list change), ``pid`` (this process id:
connection reuse), ``slow`` (sleeps ``s``), ``fail`` (an isError result), ``whoami`` (the
Authorization header it received).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

_OBJ: dict[str, Any] = {"type": "object"}
BUS = InMemorySubscriptionBus()


def _description() -> str:
    path = os.environ.get("FIXTURE_DESCRIPTION")
    return Path(path).read_text().strip() if path else "Echo the text back."


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[
        types.Tool(name="echo", description=_description(), input_schema={
            "type": "object", "required": ["text"],
            "properties": {"text": {"type": "string"}}}),
        types.Tool(name="pid", description="The server's process id.", input_schema=_OBJ),
        types.Tool(name="slow", description="Sleep s seconds.", input_schema={
            "type": "object", "properties": {"s": {"type": "number"}}}),
        types.Tool(name="fail", description="Always an error result.", input_schema=_OBJ),
        types.Tool(name="whoami", description="The Authorization header seen.",
                   input_schema=_OBJ),
    ])


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "echo":
        if args.get("text") == "notify":  # tell the client the tool list changed
            await ctx.session.send_tool_list_changed()  # 2025-11-25
            await BUS.publish(ToolsListChanged())  # 2026-07-28 listen streams
        return _text(str(args.get("text", "")))
    if params.name == "pid":
        return types.CallToolResult(content=[types.TextContent(type="text", text="pid")],
                                    structured_content={"pid": os.getpid()})
    if params.name == "slow":
        await anyio.sleep(float(args.get("s", 1)))
        return _text("slept")
    if params.name == "fail":
        return types.CallToolResult(content=[types.TextContent(type="text", text="it broke")],
                                    is_error=True)
    if params.name == "whoami":
        request = ctx.request
        return _text(request.headers.get("authorization", "") if request is not None else "")
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")


def build() -> Server[Any]:
    return Server("fixture", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                  on_subscriptions_listen=ListenHandler(BUS))


async def _stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _http(port: int) -> None:
    serve_http(build(), port)


def serve_http(server: Any, port: int) -> None:
    """``server`` (the SDK's low-level server) over streamable HTTP at
    ``http://127.0.0.1:<port>/mcp`` until killed."""
    import contextlib

    import uvicorn
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from starlette.applications import Starlette
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(app=server)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with manager.run():
            yield

    app = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))],
                    lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(_stdio)
    else:
        _http(int(sys.argv[2]))
