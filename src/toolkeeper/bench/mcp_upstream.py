"""The MCP benchmark's upstream: one ``echo`` tool on the SDK's low-level server, over
streamable HTTP (``python -m toolkeeper.bench.mcp_upstream PORT``)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any


def app() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from starlette.applications import Starlette
    from starlette.routing import Route

    tool = types.Tool(name="echo", description="Echo the text back.", input_schema={
        "type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    manager = StreamableHTTPSessionManager(app=Server(
        "bench-upstream", on_list_tools=list_tools, on_call_tool=call_tool))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))],
                     lifespan=lifespan)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                loop="uvloop", http="httptools")
