"""An upstream built with the SDK's high-level server (FastMCP, ``MCPServer`` in mcp 2.x),
over stdio: ``python fastmcp_fixture.py``. Tools: ``echo`` (a ``str`` return, which FastMCP
sends as text *and* as ``structuredContent`` ``{"result": …}`` with an output schema),
``media`` (text, audio, an embedded text resource and a resource link), ``attach`` (the text
as an embedded blob resource) and ``stamp`` (text and an image that differ on every call: a
replay is told apart from a re-run)."""

from __future__ import annotations

import base64
import time

import mcp_types as types
from mcp.server.mcpserver import MCPServer

AUDIO = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
server = MCPServer("fastmcp-fixture")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def media(text: str) -> list[types.ContentBlock]:
    """The text as text, as an embedded resource, and with audio and a resource link."""
    return [
        types.TextContent(text=text, annotations=types.Annotations(audience=["user"])),
        types.AudioContent(data=AUDIO, mime_type="audio/wav"),
        types.EmbeddedResource(resource=types.TextResourceContents(
            uri="memo://echo", mime_type="text/plain", text=text)),
        types.ResourceLink(uri="memo://elsewhere", name="elsewhere",
                           description="A resource the client may read", mime_type="text/plain"),
    ]


@server.tool()
def attach(text: str) -> list[types.ContentBlock]:
    """The text as a file: an embedded resource holding it base64-encoded."""
    return [types.EmbeddedResource(resource=types.BlobResourceContents(
        uri="memo://attached", mime_type="text/plain",
        blob=base64.b64encode(text.encode()).decode()))]


@server.tool()
def stamp() -> list[types.ContentBlock]:
    """A text and an image that no two calls share."""
    now = str(time.time_ns())
    return [types.TextContent(text=now),
            types.ImageContent(data=base64.b64encode(now.encode()).decode(),
                               mime_type="image/png")]


if __name__ == "__main__":
    server.run("stdio")
