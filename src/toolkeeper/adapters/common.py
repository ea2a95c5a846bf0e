"""What every adapter tells a framework the same way: which results pause for a human,
what kind of decision each asks for, and what the model sees of a call."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.toolbox import Toolbox, ToolInfo

GATED = frozenset({CallStatus.APPROVAL_REQUIRED, CallStatus.CONFIRMATION_REQUIRED,
                   CallStatus.PREVIEW_REQUIRED})
"""Results that pause the run until a human decides."""

KIND = {CallStatus.APPROVAL_REQUIRED: "approve", CallStatus.CONFIRMATION_REQUIRED: "confirm",
        CallStatus.PREVIEW_REQUIRED: "preview"}
"""The decision each pause asks for."""

STOP_FIELDS = ("status", "reason", "message", "tool", "action", "approval_id", "retry_after",
               "details")


def missing_extra(framework: str, extra: str) -> str:
    """What an adapter says when its framework is not installed: the client distribution's
    extra (everything an adapter needs), and the server's beside it."""
    return (f"the {framework} adapter needs the extra: pip install 'toolkeeper-client[{extra}]' "
            f"(beside the server: 'toolkeeper[{extra}]')")


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


def pause_record(result: CallResult, arguments: Any, turn_group_id: str | None) -> dict[str, Any]:
    """What an adapter keeps of a gated call (plain JSON): what the human deciding is shown
    (kind, reason, tool, action, arguments, preview) and what the resumed call needs back
    (``approval_id``, ``preview_token``, ``turn_group_id``)."""
    record: dict[str, Any] = {
        "kind": KIND[result.status], "status": result.status.value,
        "reason": str(result.reason), "message": result.message, "tool": result.tool,
        "action": result.action, "arguments": arguments, "approval_id": result.approval_id,
        "preview_token": result.preview_token, "preview": result.preview,
        "turn_group_id": turn_group_id}
    return {k: v for k, v in record.items() if v is not None}


def rejected(tool: str | None, action: str | None, note: str | None) -> dict[str, Any]:
    """What the model is told of a call the human rejected (reason ``approval_denied``)."""
    said = {"status": CallStatus.DENIED.value, "reason": Reason.APPROVAL_DENIED.value,
            "message": "the reviewer rejected the call" + (f": {note}" if note else ""),
            "tool": tool, "action": action}
    return {k: v for k, v in said.items() if v is not None}


def enabled_now(toolbox: Toolbox) -> list[ToolInfo]:
    """The agent's enabled tools, from synchronous code — also code that an event loop is
    running (an agent module loaded by an async server): a worker thread with its own loop
    asks then, rather than this thread's running one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return toolbox.enabled_sync()
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(toolbox.enabled_sync).result()
