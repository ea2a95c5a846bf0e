"""What an upstream MCP call may carry back to the agent's request that caused it.

The MCP face sets :data:`DOWNSTREAM` around its pipeline call (``McpFace._call_tool``); the
pipeline runs the ``mcp`` provider in a copy of that context, so the upstream client reads
it there. Nothing here is trusted for authorization: it only says where progress and log
messages of this call go, which client capabilities the agent declared (forwarded upstream,
so an upstream asks only for what the agent can answer), and the log level it asked for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
"""``(progress, total, message)`` → sent to the agent as ``notifications/progress``."""
LogSink = Callable[[str, Any, str | None], Awaitable[None]]
"""``(level, data, logger)`` → sent to the agent as ``notifications/message``."""
Ask = Callable[[dict[str, Any], str | None, bool], Awaitable[dict[str, Any] | None]]
"""``(inputRequests, upstream requestState, now)`` of an upstream that asks for input → the
agent's ``inputResponses`` (asked in-band), or ``None``: the agent answers in a retry of its
own (2026-07-28; the call then stops with ``input_required``) or cannot be asked. ``now``:
a 2025-era upstream waits for the answer in the middle of its call (no retry possible)."""


@dataclass(frozen=True, slots=True)
class Downstream:
    """The agent's side of one ``tools/call`` (or prompt/resource request)."""

    client_capabilities: dict[str, Any] = field(default_factory=dict)
    """The agent's declared capabilities, as on the wire (``{}``: none)."""
    log_level: str | None = None
    """The level the agent asked for (2026-07-28 ``_meta``, or ``logging/setLevel``);
    ``None``: send no log messages."""
    progress: Progress | None = None
    """Set when the agent's request carried a ``progressToken``."""
    log: LogSink | None = None
    traceparent: str | None = None
    """The agent's W3C ``traceparent`` (from ``_meta``), continued upstream."""
    tracestate: str | None = None
    """Its ``tracestate``, forwarded with it."""
    refused: dict[str, Any] = field(default_factory=dict)
    """Filled by the upstream call when the upstream answered ``-32021`` (a client
    capability the agent did not declare): ``{"requiredCapabilities": {...}}``; the MCP face
    answers the agent the same error."""
    ask: Ask | None = None
    """Set by the MCP face (``toolkeeper.mcp.input_required``): where an upstream's
    questions (elicitation, sampling, roots) go."""
    resume: dict[str, Any] | None = None
    """The agent's retry of an upstream's questions: ``inputResponses`` and the upstream's
    own ``requestState`` (unwrapped from toolkeeper's, verified), sent with the upstream
    ``tools/call``."""


DOWNSTREAM: ContextVar[Downstream | None] = ContextVar("toolkeeper_mcp_downstream",
                                                      default=None)


def current() -> Downstream | None:
    return DOWNSTREAM.get()
