"""Built-in ``mcp_call``: call a named tool on a configured upstream MCP server (SPEC §11).

The server must be configured under ``servers:`` and the (server, tool) pair allowed by the
policy: nothing is reachable by default. Imported ``{server}_{tool}`` tools are the usual
way to reach upstream tools (each pinned by hash, each with its own risk); this built-in is
for the long tail an operator chooses to open, at the risk set on the activation.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from toolkeeper.bounds import Subset, tool_covered
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.mcp import call_upstream
from toolkeeper.providers.native import BaseTool

_NAME = {"type": "string", "minLength": 1, "maxLength": 128}


class McpCallPolicy(ToolPolicy):
    """Which upstream tools ``mcp_call`` may reach."""

    allowed_tools: Annotated[tuple[str, ...], Subset(covered=tool_covered)] = ()
    """``server/tool`` or ``server/*`` entries; empty (default) allows nothing."""


class McpCallTool(BaseTool):
    """Call ``tool`` on upstream MCP ``server`` with ``arguments``."""

    tool_name = "mcp_call"
    description = "Call a tool of a configured upstream MCP server (allow-listed)."
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(input_schema={
        "type": "object", "additionalProperties": False, "required": ["server", "tool"],
        "properties": {"server": _NAME, "tool": _NAME,
                       "arguments": {"type": "object"}}})}
    risk_default = Risk.HIGH
    side_effect = SideEffect.IRREVERSIBLE
    execution = ExecutionMeta(timeout_s=30.0, max_retries=0)
    policy_model = McpCallPolicy

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        server, tool = request["server"], request["tool"]
        allowed = getattr(context.policy, "allowed_tools", ())
        if f"{server}/{tool}" not in allowed and f"{server}/*" not in allowed:
            context.deny(Reason.ACTION_NOT_ALLOWED,
                         f"{server}/{tool} is not in this agent's mcp_call allow-list")
        return await call_upstream(context, server, tool, dict(request.get("arguments") or {}))
