"""What every adapter tells a framework the same way: which results pause for a human,
what kind of decision each asks for, and what the model sees of a call."""

from __future__ import annotations

from typing import Any

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus

GATED = frozenset({CallStatus.APPROVAL_REQUIRED, CallStatus.CONFIRMATION_REQUIRED,
                   CallStatus.PREVIEW_REQUIRED})
"""Results that pause the run until a human decides."""

KIND = {CallStatus.APPROVAL_REQUIRED: "approve", CallStatus.CONFIRMATION_REQUIRED: "confirm",
        CallStatus.PREVIEW_REQUIRED: "preview"}
"""The decision each pause asks for."""

STOP_FIELDS = ("status", "reason", "message", "tool", "action", "approval_id", "retry_after",
               "details")


def call_key(framework: str, run: str | None, tool_call_id: str | None) -> str:
    """The idempotency key of one tool call of one run: a framework's re-run or resume of
    that tool call reaches the same call record (and approval) instead of a second one."""
    return f"{framework}:{run}:{tool_call_id}"


def stop_message(result: CallResult) -> dict[str, Any]:
    """What the model is told of a call that did not succeed: status, stable reason code,
    one line, and what it needs to act on (invalid argument pointers, retry_after)."""
    full = result.to_dict()
    return {k: full[k] for k in STOP_FIELDS if full.get(k) is not None}


def output_of(result: CallResult) -> Any:
    """A succeeded call's output as the model sees it (an upstream MCP tool's structured
    content, else its content blocks, when it has no plain output)."""
    if result.output is None and result.mcp is not None:
        return result.mcp.get("structuredContent", result.mcp.get("content"))
    return result.output
