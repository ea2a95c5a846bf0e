"""The upstream MCP server toolkeeper fronts in the conformance run: every fixture the
conformance suite's server scenarios call by name that is an upstream's own behaviour
(content shapes, progress, logging, sampling, elicitation, input-required rounds,
capability checks, list changes, prompts, ``test://`` resources, completions), on the
official SDK's ``MCPServer``, over streamable HTTP on a loopback port, in both protocol
eras (the SDK's session manager routes 2025-11-25 and 2026-07-28 requests itself).

The texts are the ones the suite checks (tests/peers/.../conformance/dist/index.js).
Not here: the tasks fixtures (greet, slow_compute, ...), which are the gateway's own
(mcp_fixtures.CONFORMANCE_TOOLS).

    with upstream() as url: ...            # in a thread of this process
    python conformance_upstream.py PORT    # as a process (``listening`` in bench.procs)
"""

from __future__ import annotations

import base64
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJ"
       "RU5ErkJggg==")
"""A 1x1 PNG (the suite checks only the shape and the MIME type)."""
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
MODERN = "2026-07-28"
ANSWERED: list[str] = []
"""Every completed run of ``multi_input`` (test_mcp_tasks counts them)."""
_NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
_OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]}, "else": {"required": ["email"]},
    "additionalProperties": False}


def _ask(message: str, schema: dict[str, Any] | None = None) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=message, requested_schema=schema or _NAME))


def _sample(text: str, tokens: int = 100) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(text=text))],
        max_tokens=tokens))


def _elicited(answer: Any, key: str) -> Any:
    if isinstance(answer, types.ElicitResult) and answer.content:
        return answer.content.get(key)
    return None


class _Reply(BaseModel):
    response: str = Field(description="The user's answer")


class _Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(default="active", description="User status",
                        json_schema_extra={"enum": ["active", "inactive", "pending"]})
    verified: bool = Field(default=True, description="Verification status")


class _Enums(BaseModel):
    untitledSingle: str = Field(description="An enum without titles",
                                json_schema_extra={"enum": ["active", "inactive", "pending"]})
    titledSingle: str = Field(description="An enum with titles", json_schema_extra={
        "oneOf": [{"const": "low", "title": "Low Priority"},
                  {"const": "medium", "title": "Medium Priority"},
                  {"const": "high", "title": "High Priority"}]})
    untitledMulti: list[str] = Field(description="Several, without titles",
                                     json_schema_extra={"items": {
                                         "type": "string", "enum": ["read", "write", "execute"]}})
    titledMulti: list[str] = Field(description="Several, with titles", json_schema_extra={
        "items": {"anyOf": [{"const": "feature", "title": "New Feature"},
                            {"const": "bug", "title": "Bug Fix"},
                            {"const": "docs", "title": "Documentation"}]}})
    legacyEnum: str = Field(description="The legacy enumNames form", json_schema_extra={
        "enum": ["small", "medium", "large"],
        "enumNames": ["Small Size", "Medium Size", "Large Size"]})


async def _elicit_text(ctx: Context, message: str, schema: type[BaseModel],
                       lead: str) -> str | types.InputRequiredResult:
    if ctx.protocol_version == MODERN:  # no request of its own mid-call: one round (mrtr)
        from mcp.server.elicitation import render_elicitation_schema

        got = (ctx.input_responses or {}).get("answer")
        if not isinstance(got, types.ElicitResult):
            return types.InputRequiredResult(input_requests={"answer": types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message=message, requested_schema=render_elicitation_schema(schema)))})
        content = schema.model_validate(got.content or {}).model_dump_json() \
            if got.action == "accept" else "{}"
        return f"{lead}: action={got.action}, content={content}"
    try:
        got = await ctx.elicit(message=message, schema=schema)
    except Exception as exc:  # the suite reads the text either way
        return f"Elicitation not supported or error: {exc}"
    content = got.data.model_dump_json() if got.action == "accept" else "{}"
    return f"{lead}: action={got.action}, content={content}"


def _tools(mcp: MCPServer) -> None:
    @mcp.tool()
    def test_simple_text() -> str:
        """Answers with simple text."""
        return "This is a simple text response for testing."

    @mcp.tool()
    def test_error_handling() -> str:
        """Always fails (an isError result)."""
        raise RuntimeError("This tool intentionally returns an error for testing")

    @mcp.tool()
    def test_image_content() -> list[types.ImageContent]:
        """Answers with an image."""
        return [types.ImageContent(data=PNG, mime_type="image/png")]

    @mcp.tool()
    def test_audio_content() -> list[types.AudioContent]:
        """Answers with audio."""
        return [types.AudioContent(data=WAV, mime_type="audio/wav")]

    @mcp.tool()
    def test_embedded_resource() -> list[types.EmbeddedResource]:
        """Answers with an embedded text resource."""
        return [types.EmbeddedResource(resource=types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain",
            text="This is an embedded resource content."))]

    @mcp.tool()
    def test_multiple_content_types() -> list[
            types.TextContent | types.ImageContent | types.EmbeddedResource]:
        """Answers with text, an image and an embedded resource."""
        return [types.TextContent(text="Multiple content types test:"),
                types.ImageContent(data=PNG, mime_type="image/png"),
                types.EmbeddedResource(resource=types.TextResourceContents(
                    uri="test://mixed-content-resource", mime_type="application/json",
                    text='{"test": "data", "value": 123}'))]

    @mcp.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Logs three messages at info while it runs."""
        for text in ("Tool execution started", "Tool processing data",
                     "Tool execution completed"):
            await ctx.log("info", text)
            await anyio.sleep(0.02)
        return "Tool with logging executed successfully"

    @mcp.tool()
    async def test_logging_tool(ctx: Context) -> str:
        """Logs at info and error (seen only by a caller that asked for a log level)."""
        await ctx.log("info", "an info message from test_logging_tool")
        await ctx.log("error", "an error message from test_logging_tool")
        return "logged"

    @mcp.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress 0, 50 and 100 of 100; answers the progress token it saw."""
        for step in (0, 50, 100):
            await ctx.report_progress(progress=step, total=100,
                                      message=f"Completed step {step} of 100")
            await anyio.sleep(0.02)
        meta = ctx.request_context.meta or {}
        return str(meta.get("progress_token", 0))

    @mcp.tool()
    async def test_sampling(prompt: str, ctx: Context) -> str | types.InputRequiredResult:
        """Asks the client's model (sampling) and answers what it said."""
        if ctx.protocol_version == MODERN:  # one round (mrtr)
            got = (ctx.input_responses or {}).get("answer")
            if not isinstance(got, types.CreateMessageResult):
                return types.InputRequiredResult(input_requests={"answer": _sample(prompt)})
            return "LLM response: " + (got.content.text if got.content.type == "text"
                                       else "No response")
        try:
            got = await ctx.session.create_message(
                messages=[types.SamplingMessage(role="user",
                                                content=types.TextContent(text=prompt))],
                max_tokens=100, related_request_id=ctx.request_id)
        except Exception as exc:
            return f"Sampling not supported or error: {exc}"
        text = got.content.text if got.content.type == "text" else "No response"
        return f"LLM response: {text}"

    @mcp.tool()
    async def test_elicitation(message: str,
                               ctx: Context) -> str | types.InputRequiredResult:
        """Asks the user (elicitation) and answers what they said."""
        return await _elicit_text(ctx, message, _Reply, "User response")

    @mcp.tool()
    async def test_elicitation_sep1034_defaults(
            ctx: Context) -> str | types.InputRequiredResult:
        """Asks with a default for every primitive type (SEP-1034)."""
        return await _elicit_text(ctx, "Please provide user information", _Defaults,
                                  "Elicitation result")

    @mcp.tool()
    async def test_elicitation_sep1330_enums(
            ctx: Context) -> str | types.InputRequiredResult:
        """Asks with every enum form (SEP-1330)."""
        return await _elicit_text(ctx, "Please select values using different enum schema "
                                  "types", _Enums, "Elicitation completed")

    @mcp.tool()
    async def test_streaming_elicitation(ctx: Context) -> str | types.InputRequiredResult:
        """Needs an answer from the user: 2026-07-28 asks by InputRequiredResult (never a
        request of its own on the response stream), 2025-11-25 by elicitation/create."""
        if ctx.protocol_version == MODERN:
            if ctx.input_responses and "answer" in ctx.input_responses:
                return f"answered: {_elicited(ctx.input_responses['answer'], 'name')}"
            return types.InputRequiredResult(input_requests={"answer": _ask("Your name?")})
        return await _elicit_text(ctx, "Your name?", _Reply, "User response")

    @mcp.tool()
    async def test_missing_capability(ctx: Context) -> str:
        """Needs the client's sampling capability: without it, -32021 with
        data.requiredCapabilities."""
        caps = ctx.client_capabilities
        if caps is None or caps.sampling is None:
            raise MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                           message="This tool requires the client 'sampling' capability",
                           data={"requiredCapabilities": {"sampling": {}}})
        return "Client declared sampling capability; proceeding."

    @mcp.tool()
    def test_x_mcp_header(region: Annotated[str, Field(
            description="Mirrored as the Mcp-Param-Region header",
            json_schema_extra={"x-mcp-header": "Region"})] = "<none>") -> str:
        """A parameter mirrored into a header (SEP-2243)."""
        return f"region={region}"

    @mcp.tool(name="json_schema_2020_12_tool")
    def json_schema_2020_12_tool() -> str:
        """An input schema with JSON Schema 2020-12 keywords."""
        return "json_schema_2020_12_tool"

    # MCPServer derives schemas from signatures; this one is the suite's, verbatim
    mcp._tool_manager._tools["json_schema_2020_12_tool"].parameters = SCHEMA_2020_12

    def dynamic() -> str:
        """Added and removed again by test_trigger_tool_change."""
        return "dynamic"

    @mcp.tool()
    async def tk_seen_meta(ctx: Context) -> str:
        """toolkeeper's own diagnostic: the request's _meta as this server received it."""
        return json.dumps(dict(ctx.request_context.meta or {}), sort_keys=True, default=str)

    @mcp.tool()
    async def test_trigger_tool_change(ctx: Context) -> str:
        """Changes the tool list (one more tool each time: DYNAMIC) and announces it."""
        for name in DYNAMIC:
            if mcp._tool_manager.get_tool(name) is None:
                mcp.add_tool(dynamic, name=name)
                break
        await ctx.notify_tools_changed()
        return "tool list changed"

    def dynamic_prompt() -> list[UserMessage]:
        """Added by test_trigger_prompt_change."""
        return [UserMessage(content=types.TextContent(text="dynamic"))]

    @mcp.tool()
    async def test_trigger_prompt_change(ctx: Context) -> str:
        """Changes the prompt list (one more prompt each time: DYNAMIC_PROMPTS) and
        announces it."""
        for name in DYNAMIC_PROMPTS:
            if mcp._prompt_manager.get_prompt(name) is None:
                mcp.add_prompt(Prompt.from_function(dynamic_prompt, name=name))
                break
        await ctx.notify_prompts_changed()
        return "prompt list changed"


DYNAMIC = tuple(f"test_dynamic_tool_{n}" for n in range(1, 9))
"""What test_trigger_tool_change adds, one per call (a gateway in front sees a change only
when the list really changes; the agent's profile enables these names in advance)."""
DYNAMIC_PROMPTS = tuple(f"test_dynamic_prompt_{n}" for n in range(1, 9))
"""Likewise, what test_trigger_prompt_change adds."""


def _rounds(mcp: MCPServer) -> None:
    @mcp.tool()
    async def test_input_required_result_elicitation(
            ctx: Context) -> str | types.InputRequiredResult:
        """One elicitation round (SEP-2322)."""
        got = ctx.input_responses or {}
        if "user_name" in got:
            return f"Hello, {_elicited(got['user_name'], 'name') or '?'}!"
        return types.InputRequiredResult(input_requests={"user_name": _ask("What is your name?")})

    @mcp.tool()
    async def test_input_required_result_sampling(
            ctx: Context) -> str | types.InputRequiredResult:
        """One sampling round."""
        got = ctx.input_responses or {}
        if "capital_question" in got:
            answer = got["capital_question"]
            text = (answer.content.text if isinstance(answer, types.CreateMessageResult)
                    and answer.content.type == "text" else "?")
            return f"Model said: {text}"
        return types.InputRequiredResult(input_requests={
            "capital_question": _sample("What is the capital of France?")})

    @mcp.tool()
    async def test_input_required_result_list_roots(
            ctx: Context) -> str | types.InputRequiredResult:
        """One roots/list round."""
        got = ctx.input_responses or {}
        if "client_roots" in got:
            roots = got["client_roots"]
            count = len(roots.roots) if isinstance(roots, types.ListRootsResult) else 0
            return f"Client exposed {count} root(s)."
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})

    @mcp.tool()
    async def test_input_required_result_request_state(
            ctx: Context) -> str | types.InputRequiredResult:
        """A round whose requestState must come back unchanged."""
        if "confirm" in (ctx.input_responses or {}) and ctx.request_state == "request-state-nonce":
            return "state-ok: confirmation received"
        return types.InputRequiredResult(input_requests={"confirm": _ask("Please confirm", _OK)},
                                         request_state="request-state-nonce")

    @mcp.tool()
    async def test_input_required_result_multiple_inputs(
            ctx: Context) -> str | types.InputRequiredResult:
        """Elicitation, sampling and roots asked together."""
        if {"user_name", "greeting", "client_roots"} <= (ctx.input_responses or {}).keys():
            return "All inputs received."
        return types.InputRequiredResult(input_requests={
            "user_name": _ask("What is your name?"), "greeting": _sample("Generate a greeting", 50),
            "client_roots": types.ListRootsRequest()}, request_state="multiple-inputs")

    @mcp.tool()
    async def test_input_required_result_multi_round(
            ctx: Context) -> str | types.InputRequiredResult:
        """Three rounds, the requestState changing each time."""
        state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
        got = ctx.input_responses or {}
        if state.get("round") == 1 and "step1" in got:
            return types.InputRequiredResult(input_requests={"step2": _ask(
                "Step 2: What is your favorite color?",
                {"type": "object", "properties": {"color": {"type": "string"}},
                 "required": ["color"]})},
                request_state=json.dumps({"round": 2, "name": _elicited(got["step1"], "name")}))
        if state.get("round") == 2 and "step2" in got:
            return f"{state.get('name')} likes {_elicited(got['step2'], 'color')}."
        return types.InputRequiredResult(
            input_requests={"step1": _ask("Step 1: What is your name?")},
            request_state=json.dumps({"round": 1}))

    @mcp.tool()
    async def test_input_required_result_tampered_state(
            ctx: Context) -> str | types.InputRequiredResult:
        """A round whose requestState a client may tamper with."""
        if ctx.request_state is None:
            return types.InputRequiredResult(
                input_requests={"confirm": _ask("Please confirm", _OK)}, request_state="round-1")
        return f"state-ok: {ctx.request_state}"

    @mcp.tool()
    async def test_input_required_result_capabilities(ctx: Context) -> types.InputRequiredResult:
        """Asks only what the client declared it can answer."""
        caps = ctx.client_capabilities
        asked: dict[str, Any] = {}
        if caps is None or caps.sampling is not None:
            asked["sample"] = _sample("Say hello", 50)
        if caps is None or caps.elicitation is not None:
            asked["ask"] = _ask("What is your name?")
        return types.InputRequiredResult(input_requests=asked, request_state="capability-gated")

    @mcp.tool()
    async def multi_input(ctx: Context) -> str | types.InputRequiredResult:
        """Two questions at once (tasks-mrtr-input; toolkeeper runs it as a task by the
        operator's servers[].tools.multi_input.task_support)."""
        got = ctx.input_responses or {}
        if {"first", "second"} <= got.keys() and ctx.request_state == "multi-input":
            ANSWERED.append(done := f"got {_elicited(got['first'], 'name')} and "
                                   f"{_elicited(got['second'], 'name')}")
            return done
        return types.InputRequiredResult(input_requests={
            "first": _ask("First: your name?"), "second": _ask("Second: your name?")},
            request_state="multi-input")

    @mcp.tool()
    async def test_tool_with_task(ctx: Context) -> str | types.InputRequiredResult:
        """Asks the user's name, then answers with it (tasks-mrtr-composition: the retry
        with the answer becomes toolkeeper's task)."""
        got = ctx.input_responses or {}
        if "user_name" in got:
            return f"Hello, {_elicited(got['user_name'], 'name') or '?'}, from a task!"
        return types.InputRequiredResult(input_requests={"user_name": _ask("What is your name?")})


def _prompts(mcp: MCPServer) -> None:
    @mcp.prompt()
    def test_simple_prompt() -> list[UserMessage]:
        """A prompt without arguments."""
        return [UserMessage(content=types.TextContent(text="This is a simple prompt for testing."))]

    @mcp.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        """A prompt with two required arguments."""
        return [UserMessage(content=types.TextContent(
            text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]

    @mcp.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
        """A prompt embedding a resource."""
        return [UserMessage(content=types.EmbeddedResource(resource=types.TextResourceContents(
                    uri=resourceUri, mime_type="text/plain",
                    text="Embedded resource content for testing."))),
                UserMessage(content=types.TextContent(
                    text="Please process the embedded resource above."))]

    @mcp.prompt()
    async def test_input_required_result_prompt(
            ctx: Context) -> list[UserMessage] | types.InputRequiredResult:
        """A prompt that asks for context first (SEP-2322 on prompts/get; mrtr)."""
        got = (ctx.input_responses or {}).get("user_context")
        if not isinstance(got, types.ElicitResult):
            return types.InputRequiredResult(input_requests={"user_context": _ask(
                "What context should the prompt use?", {
                    "type": "object", "properties": {"context": {"type": "string"}},
                    "required": ["context"]})})
        return [UserMessage(content=types.TextContent(
            text=f"Use this context: {_elicited(got, 'context')}"))]

    @mcp.prompt()
    def test_prompt_with_image() -> list[UserMessage]:
        """A prompt with an image."""
        return [UserMessage(content=types.ImageContent(data=PNG, mime_type="image/png")),
                UserMessage(content=types.TextContent(text="Please analyze the image above."))]


def _resources(mcp: MCPServer) -> None:
    @mcp.resource("test://static-text")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    @mcp.resource("test://static-binary")
    def static_binary() -> bytes:
        """A static binary resource (a PNG)."""
        return base64.b64decode(PNG)

    @mcp.resource("test://template/{id}/data")
    def template(id: str) -> str:
        """A template with one parameter."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @mcp.resource("test://watched-resource")
    def watched() -> str:
        """A resource one may subscribe to."""
        return "Watched resource content"

    async def accept(ctx: Any, params: Any) -> types.EmptyResult:
        return types.EmptyResult()

    low = mcp._lowlevel_server
    low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, accept)
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, accept)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, accept)

    @mcp.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        return types.Completion(values=[], total=0, has_more=False)


def build() -> MCPServer:
    """A fresh fixture server (its state is its own)."""
    mcp = MCPServer(name="toolkeeper-conformance-upstream", version="1.0.0")
    _tools(mcp)
    _rounds(mcp)
    _prompts(mcp)
    _resources(mcp)
    return mcp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def upstream(timeout_s: float = 20.0) -> Iterator[str]:
    """The fixture server on a free loopback port in a thread; yields its ``/mcp`` URL."""
    port = _free_port()
    app = build().streamable_http_app(host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True, name="conformance-upstream")
    thread.start()
    try:
        end = time.monotonic() + timeout_s
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the conformance upstream died while starting")
            if time.monotonic() > end:
                raise TimeoutError(f"the conformance upstream did not start in {timeout_s} s")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def fronted(tmp: Path, **serving_kwargs: Any) -> Iterator[Any]:
    """toolkeeper (``mcp_fixtures.serving``) fronting this server as ``conf`` under the
    upstream's own names (``prefix: ""``), its tools, prompts and resources enabled for
    ``bot`` without gates (side effect pure, risk low); yields the ``McpServer``."""
    import yaml
    from mcp_fixtures import CONFORMANCE_TOOLS, serving

    from toolkeeper import Activation, Profile

    with upstream() as url:
        config = tmp / "toolkeeper.yaml"
        config.write_text(yaml.safe_dump({"version": 1, "servers": [
            {"name": "conf", "url": url, "prefix": "", "side_effect": "pure",
             "risk": "low", "tools": {"multi_input": {"task_support": "optional"}}}]}))
        with serving(f"sqlite:///{tmp}/tk.db", extra=CONFORMANCE_TOOLS, config=config,
                     **serving_kwargs) as s:
            fronting = [t.name for t in s.gw.catalog.all_tools()
                        if "conf" in (t.categories or ())]
            assert "test_simple_text" in fronting, fronting
            own = ("add", "pay", "bank", *(t.tool_name for t in CONFORMANCE_TOOLS))
            names = (*own, *fronting, *DYNAMIC, *DYNAMIC_PROMPTS)
            s.gw.registry.put_profile(Profile(name="auto", autonomy=3, activations=tuple(
                Activation(tool=n) for n in names)), replace=True)
            yield s


if __name__ == "__main__":
    uvicorn.run(build().streamable_http_app(host="127.0.0.1"), host="127.0.0.1",
                port=int(sys.argv[1]), log_level="warning")
