"""One real MCP server of the lean client's handshake matrix, over streamable HTTP at
``http://127.0.0.1:<port>/mcp``, with one tool ``pure`` (``x`` → ``"pure <x>"``).

``python handshake_peer.py KIND PORT [json] [stateless]``, run with the interpreter of the venv that
holds the server's framework (``make handshake-peers``; the 2.x SDK's and mcp-server-time
from ``.venv``). KIND: ``sdk1-fastmcp`` and ``sdk1-lowlevel`` (``mcp`` 1.x), ``fastmcp``
(FastMCP 2.x/3.x, standalone), ``sdk2-lowlevel`` (``mcp`` 2.x), ``time`` (mcp-server-time's
own server, which ships for stdio, served over HTTP). ``json``: answers as JSON, else as
SSE (each framework's default); ``stateless``: no sessions (else stateful, the default).
Kept to the APIs each version documents, nothing patched.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def _sdk1_fastmcp(json: bool, stateless: bool) -> Any:
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("peer", json_response=json, stateless_http=stateless)

    @server.tool()
    def pure(x: int) -> str:
        """Echo x."""
        return f"pure {x}"
    return server.streamable_http_app()


def _fastmcp(json: bool, stateless: bool) -> Any:
    from fastmcp import FastMCP

    server = FastMCP("peer")

    @server.tool
    def pure(x: int) -> str:
        """Echo x."""
        return f"pure {x}"
    return server.http_app(path="/mcp", json_response=json, stateless_http=stateless)


def _sdk1_lowlevel(json: bool, stateless: bool) -> Any:
    import mcp.types as types
    from mcp.server.lowlevel import Server

    server: Any = Server("peer")

    @server.list_tools()  # type: ignore[misc]
    async def list_tools() -> list[Any]:
        return [types.Tool(name="pure", description="Echo x.", inputSchema=SCHEMA)]

    @server.call_tool()  # type: ignore[misc]
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[Any]:
        return [types.TextContent(type="text", text=f"pure {arguments['x']}")]
    return _mounted(server, json, stateless)


def _sdk2_lowlevel(json: bool, stateless: bool) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name="pure", description="Echo x.", input_schema=SCHEMA)])

    async def call_tool(ctx: Any, params: Any) -> Any:
        text = f"pure {(params.arguments or {})['x']}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    return _mounted(Server("peer", on_list_tools=list_tools, on_call_tool=call_tool), json,
                    stateless)


def _time(json: bool, stateless: bool) -> Any:
    from mcp_server_time.server import create_server

    return create_server("UTC").streamable_http_app(json_response=json,
                                                    stateless_http=stateless)


def _mounted(server: Any, json: bool, stateless: bool) -> Any:
    """A low-level server behind the SDK's session manager, as its docs show."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(app=server, json_response=json,
                                           stateless=stateless)

    class Endpoint:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with manager.run():
            yield
    return Starlette(routes=[Route("/mcp", endpoint=Endpoint())], lifespan=lifespan)


KINDS = {"sdk1-fastmcp": _sdk1_fastmcp, "sdk1-lowlevel": _sdk1_lowlevel, "fastmcp": _fastmcp,
         "sdk2-lowlevel": _sdk2_lowlevel, "time": _time}

if __name__ == "__main__":
    import uvicorn

    app = KINDS[sys.argv[1]]("json" in sys.argv[3:], "stateless" in sys.argv[3:])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
