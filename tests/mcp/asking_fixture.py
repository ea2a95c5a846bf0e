"""An upstream MCP server whose tools ask the client for input, on the SDK's low-level
Server over streamable HTTP: ``python asking_fixture.py PORT``.

In 2026-07-28 a tool answers ``InputRequiredResult`` (``inputRequests`` and its own
``requestState`` ``"up-<tool>-<rounds answered>"``, checked on the retry); in 2025-11-25
it asks in the middle of ``tools/call``. Tools: ``ask_name`` (elicitation: "hello
<name>"), ``ask_sample`` (sampling: "sampled <text>"), ``ask_roots`` (roots: "roots <n>"),
``ask_twice`` (two elicitation rounds), ``ask_later`` (2026-07-28: a round with only a
``requestState``). Every finished call is counted: ``count`` answers
how many ran.
"""

from __future__ import annotations

import sys
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

_OBJ: dict[str, Any] = {"type": "object"}
NAME_SCHEMA = {"type": "object", "required": ["name"],
               "properties": {"name": {"type": "string"}}}
RAN: dict[str, int] = {}
QUESTION: dict[str, Any] = {
    "ask_name": {"method": "elicitation/create", "params": {
        "mode": "form", "message": "What is your name?", "requestedSchema": NAME_SCHEMA}},
    "ask_sample": {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
        "maxTokens": 20}},
    "ask_roots": {"method": "roots/list", "params": {}},
}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[
        types.Tool(name=n, description=f"Asks the client ({n}).", input_schema=_OBJ)
        for n in ("ask_name", "ask_sample", "ask_roots", "ask_twice", "ask_later", "count")])


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _answer(tool: str, got: dict[str, Any]) -> str:
    if tool == "ask_sample":
        return f"sampled {got['content']['text']}"
    if tool == "ask_roots":
        return f"roots {len(got['roots'])}"
    return f"hello {got['content']['name']}"


async def _in_band(ctx: Any, tool: str) -> dict[str, Any]:
    """2025-11-25: the question sent to the client now."""
    q = QUESTION[tool]
    request: Any = {"elicitation/create": types.ElicitRequest,
                    "sampling/createMessage": types.CreateMessageRequest,
                    "roots/list": types.ListRootsRequest}[q["method"]].model_validate(q)
    kind: Any = {"elicitation/create": types.ElicitResult,
                 "sampling/createMessage": types.CreateMessageResult,
                 "roots/list": types.ListRootsResult}[q["method"]]
    from mcp.shared.message import ServerMessageMetadata

    got = await ctx.session.send_request(
        request, kind, metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
    return dict(got.model_dump(mode="json", by_alias=True, exclude_none=True))


async def call_tool(ctx: Any, params: types.CallToolRequestParams
                    ) -> types.CallToolResult | types.InputRequiredResult:
    tool = params.name
    if tool == "count":
        return types.CallToolResult(content=[types.TextContent(type="text", text="count")],
                                    structured_content=dict(RAN))
    if tool == "ask_later" and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        if params.request_state != "up-ask_later-0":  # only a state: "come back later"
            return types.InputRequiredResult(request_state="up-ask_later-0")
        RAN[tool] = RAN.get(tool, 0) + 1
        return _text("later state-ok")
    if tool not in (*QUESTION, "ask_twice"):
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {tool}")
    asked = "ask_name" if tool == "ask_twice" else tool
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        got = await _in_band(ctx, asked)
        RAN[tool] = RAN.get(tool, 0) + 1
        return _text(_answer(asked, got))
    answers = {k: v.model_dump(mode="json", by_alias=True, exclude_none=True)
               for k, v in (params.input_responses or {}).items()}
    state = params.request_state
    rounds = 2 if tool == "ask_twice" else 1
    if state is not None and not state.startswith(f"up-{tool}-"):
        raise MCPError(code=types.INVALID_PARAMS, message="not my requestState")
    answered = (int(state.rsplit("-", 1)[1]) if state else 0) + ("q" in answers)
    if "q" not in answers or answered < rounds:
        return types.InputRequiredResult.model_validate({
            "resultType": "input_required", "inputRequests": {"q": QUESTION[asked]},
            "requestState": f"up-{tool}-{answered}"})
    RAN[tool] = RAN.get(tool, 0) + 1
    return _text(_answer(asked, answers["q"]) + " state-ok")


def build() -> Server[Any]:
    return Server("asking", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    from upstream_fixture import serve_http

    serve_http(build(), int(sys.argv[1]))
