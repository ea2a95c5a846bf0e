"""An upstream MCP server with prompts and resources for the relay tests, on the SDK's
low-level Server, over stdio: ``python relay_fixture.py``.

Prompts: ``greet`` (argument ``name``, required; its description is read from the file named
by ``FIXTURE_PROMPT`` on every listing, so a test can change it under a running gateway),
``leak`` (a message holding the value of ``FIXTURE_SECRET``). Resources: ``memo://readme``
(text), ``memo://secret`` (text holding ``FIXTURE_SECRET``), ``memo://logo`` (a blob), the
template ``memo://note/{id}`` (ids are numbers, others are not found); ``FIXTURE_EXTRA``
set lists ``memo://extra`` too (a resource that appears). Completions for ``greet``'s
``name`` (one holds ``FIXTURE_SECRET``); reading ``memo://note/{id}`` tells the 2026-07-28
listen streams subscribed to it that it changed.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

BUS = InMemorySubscriptionBus()
HANDLER = ListenHandler(BUS)
LOGO = base64.b64encode(b"\x89PNG\r\n\x1a\nnot-really-a-png").decode()


def _secret() -> str:
    return os.environ.get("FIXTURE_SECRET", "none")


def _description() -> str:
    path = os.environ.get("FIXTURE_PROMPT")
    return Path(path).read_text().strip() if path and Path(path).exists() else "Greet someone."


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[
        types.Prompt(name="greet", description=_description(), arguments=[
            types.PromptArgument(name="name", description="Who", required=True)]),
        types.Prompt(name="leak", description="A message with a secret in it."),
    ])


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = params.arguments or {}
    if params.name == "greet":
        return types.GetPromptResult(description="A greeting", messages=[
            types.PromptMessage(role="user", content=types.TextContent(
                text=f"Say hello to {args.get('name', '?')}")),
            types.PromptMessage(role="assistant", content=types.TextContent(text="Hello!"))])
    if params.name == "leak":
        return types.GetPromptResult(messages=[types.PromptMessage(
            role="user", content=types.TextContent(text=f"key={_secret()}"))])
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    found = [types.Resource(uri="memo://readme", name="readme", mime_type="text/plain"),
             types.Resource(uri="memo://secret", name="secret", mime_type="text/plain"),
             types.Resource(uri="memo://logo", name="logo", mime_type="image/png")]
    if os.environ.get("FIXTURE_EXTRA") and Path(os.environ["FIXTURE_EXTRA"]).exists():
        found.append(types.Resource(uri="memo://extra", name="extra"))
    return types.ListResourcesResult(resources=found)


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
        uri_template="memo://note/{id}", name="note", mime_type="text/plain")])


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams
                        ) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "memo://readme":
        text = "Read me first."
    elif uri == "memo://secret":
        text = f"password={_secret()}"
    elif uri == "memo://extra":
        text = "extra"
    elif uri.startswith("memo://note/") and uri.rsplit("/", 1)[1].isdigit():
        text = f"Note {uri.rsplit('/', 1)[1]}"
        await BUS.publish(ResourceUpdated(uri=uri))  # 2026-07-28 listen streams hear it
    elif uri == "memo://logo":
        return types.ReadResourceResult(contents=[types.BlobResourceContents(
            uri=uri, mime_type="image/png", blob=LOGO)])
    else:
        raise MCPError(code=types.INVALID_PARAMS, message="Resource not found",
                       data={"uri": uri})
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=uri, mime_type="text/plain", text=text)])


async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
    names = ["alice", "albert", "bob", f"key-{_secret()}"]
    value = params.argument.value
    return types.CompleteResult(completion=types.Completion(
        values=[n for n in names if n.startswith(value)]))


async def subscribe(ctx: Any, params: Any) -> types.EmptyResult:
    return types.EmptyResult()


def build() -> Server[Any]:
    return Server("relay-fixture", version="1.0", on_list_prompts=list_prompts,
                  on_get_prompt=get_prompt, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource,
                  on_completion=complete, on_subscribe_resource=subscribe,
                  on_unsubscribe_resource=subscribe, on_subscriptions_listen=HANDLER)


async def _stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_stdio)
