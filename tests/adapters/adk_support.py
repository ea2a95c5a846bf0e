"""The Google ADK tests' scripted model and chat: a real ``LlmAgent`` run by an ADK
``Runner`` over an in-memory session service, its model a :class:`Script` (no network)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.sessions import Session
from google.adk.tools.base_tool import BaseTool
from google.genai import types
from pydantic import Field

from toolkeeper.adapters.google_adk import CONFIRMATION


class Script(BaseLlm):
    """A model that makes ``calls`` (name, arguments, function call id) on its first turn,
    then answers with what each call returned, as JSON ``{function call id: response}``."""

    model: str = "scripted"
    calls: Sequence[tuple[str, Any, str]] = ()
    seen: list[types.FunctionDeclaration] = Field(default_factory=list)
    turns: int = 0

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> Any:
        self.turns += 1
        self.seen[:] = [d for t in llm_request.config.tools or ()
                        for d in t.function_declarations or ()]
        last = llm_request.contents[-1]
        responses = {p.function_response.id: p.function_response.response
                     for p in last.parts or () if p.function_response is not None}
        if responses:
            parts = [types.Part(text=json.dumps(responses, default=str))]
        else:
            parts = [types.Part(function_call=types.FunctionCall(name=n, args=a, id=cid))
                     for n, a, cid in self.calls]
        yield LlmResponse(content=types.Content(role="model", parts=parts),
                          usage_metadata=types.GenerateContentResponseUsageMetadata(
                              prompt_token_count=0, candidates_token_count=0))

    def agent(self, tools: Sequence[BaseTool]) -> LlmAgent:
        return LlmAgent(name="bot", model=self, instruction="use the tools", tools=list(tools))


class Chat:
    """One ADK session with the agent: send a message, read what happened."""

    def __init__(self, agent: LlmAgent, *, resumable: bool = False) -> None:
        config = ResumabilityConfig(is_resumable=True) if resumable else None
        app = App(name="tk", root_agent=agent, resumability_config=config)
        self.runner = InMemoryRunner(app=app)
        self.session_id = ""

    async def send(self, message: str | types.Content) -> list[Event]:
        if not self.session_id:
            made = await self.runner.session_service.create_session(app_name="tk",
                                                                    user_id="u")
            self.session_id = made.id
        content = message if isinstance(message, types.Content) else \
            types.Content(role="user", parts=[types.Part(text=message)])
        return [event async for event in self.runner.run_async(
            user_id="u", session_id=self.session_id, new_message=content)]

    async def session(self) -> Session:
        got = await self.runner.session_service.get_session(
            app_name="tk", user_id="u", session_id=self.session_id)
        assert got is not None
        return got


def said(events: list[Event]) -> dict[str, Any]:
    """What the scripted model was told last, by function call id."""
    texts = [p.text for e in events for p in (e.content.parts or [] if e.content else [])
             if p.text]
    assert texts, f"the model said nothing: {events}"
    told: dict[str, Any] = json.loads(texts[-1])
    return told


def asked(events: list[Event]) -> list[str]:
    """The function call ids ADK asked a human to confirm in these events."""
    return [str((c.args or {})["originalFunctionCall"]["id"]) for e in events
            for c in e.get_function_calls() if c.name == CONFIRMATION]


def executed(events: list[Event]) -> dict[str, Any]:
    """The tools' function responses in these events, by function call id."""
    return {r.id: r.response for e in events for r in e.get_function_responses()
            if r.name != CONFIRMATION}
