"""A pipeline result as an MCP ``CallToolResult`` (SPEC §7 MCP).

Success: an upstream MCP tool's own content blocks and ``structuredContent`` as it sent them
(:attr:`CallResult.mcp`, already redacted and capped); any other tool's output as text
content and, when it is an object, as ``structuredContent`` (anything else is wrapped as
``{"result": …}``). A stopped or failed call: ``isError`` with
one line a model can act on and ``structuredContent`` carrying status, reason and the
approval/preview data needed to continue.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import mcp_types as types
import orjson
from mcp_types import methods as sdk_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.providers.mcp import text_block

_NEXT = {
    CallStatus.APPROVAL_REQUIRED: "an approver must approve it; call again with the same "
                                  "arguments after approval",
    CallStatus.CONFIRMATION_REQUIRED: "confirm it (POST /approvals/{id}/confirm) and call again "
                                      "with the same arguments",
    CallStatus.PREVIEW_REQUIRED: "review the preview, then call again with the same arguments "
                                 "and preview_token",
    CallStatus.IN_PROGRESS: "an identical call is running; retry later",
    CallStatus.UNKNOWN: "its outcome is unknown; an operator must resolve it before a retry",
}
STOP_FIELDS = ("call_id", "status", "reason", "message", "approval_id", "preview",
               "preview_token", "retry_after", "details", "tool", "action")


def structured(result: CallResult) -> dict[str, Any]:
    """``structuredContent`` of a stopped or failed call."""
    full = result.to_dict()
    return {k: full[k] for k in STOP_FIELDS if full.get(k) is not None}


def one_line(result: CallResult) -> str:
    """The human/model-readable line of a stopped or failed call."""
    status = result.status.value
    head = status if not result.reason or result.reason == status else \
        f"{status} ({result.reason})"
    if result.message:
        head += f": {result.message}"
    nxt = _NEXT.get(result.status, "")
    if result.approval_id:
        nxt = nxt.replace("{id}", result.approval_id)
        if result.approval_id not in head + nxt:
            head += f" [approval {result.approval_id}]"
    else:
        nxt = nxt.replace("(POST /approvals/{id}/confirm) ", "")
    if result.retry_after is not None:
        nxt = f"retry after {result.retry_after:g} s"
    return f"{head}; {nxt}" if nxt else head


def wire(result: CallResult) -> types.CallToolResult:
    """The SDK's ``CallToolResult`` for ``result``, built directly (no dict round trip)."""
    if result.status is CallStatus.SUCCEEDED:
        if result.mcp is not None:
            return types.CallToolResult.model_validate({**result.mcp, "isError": False})
        output = result.output
        text = output if isinstance(output, str) else orjson.dumps(output).decode()
        data = output if isinstance(output, dict) else {"result": output}
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=data, is_error=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=one_line(result))],
        structured_content=structured(result), is_error=True)


@cache
def _sieve_keeps_plain(version: str) -> bool:
    """Whether the SDK's per-version serialisation of a ``tools/call`` result returns a
    plain one (text blocks, ``isError``, ``structuredContent``) exactly as given — asked
    of the SDK itself, once per protocol version."""
    probe = _plain([{"text": "x", "type": "text"}],
                   {"n": None, "list": [1.5, "s", True, {}]}, version)
    try:
        return sdk_methods.serialize_server_result("tools/call", version, probe) == probe
    except (KeyError, ValueError):
        return False


def plain_wire(result: CallResult, version: str) -> dict[str, Any] | None:
    """The wire form of a call that succeeded with plain text content, as the SDK's
    serialisation of :func:`wire` would give it for ``version`` (key order included), built
    without the three model passes; ``None`` for anything else (the model path answers)."""
    if result.status is not CallStatus.SUCCEEDED or not _sieve_keeps_plain(version):
        return None
    if result.mcp is not None:
        blocks = result.mcp.get("content")
        if not isinstance(blocks, list) or result.mcp.keys() - {"content", "structuredContent"}:
            return None
        if not all(text_block(b) for b in blocks):
            return None
        content = [{"text": b["text"], "type": "text"} for b in blocks]
        data = result.mcp.get("structuredContent")
        if data is not None and data.__class__ is not dict:
            return None
    else:
        output = result.output
        content = [{"text": output if isinstance(output, str) else orjson.dumps(output).decode(),
                    "type": "text"}]
        data = output if isinstance(output, dict) else {"result": output}
    return _plain(content, data, version)


def _plain(content: list[dict[str, Any]], data: dict[str, Any] | None,
           version: str) -> dict[str, Any]:
    """A succeeded call's wire dict in the order the SDK's serialisation leaves it."""
    out: dict[str, Any] = {"content": content, "isError": False}
    if version in MODERN_PROTOCOL_VERSIONS:
        out["resultType"] = "complete"
    if data is not None:
        out["structuredContent"] = data
    return out
