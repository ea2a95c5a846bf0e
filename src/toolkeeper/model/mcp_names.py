"""How governed tools look to MCP clients (SPEC §7 MCP): names, annotations, the listing.

A tool with one action is listed as ``{tool}``; a tool with several as ``{tool}_{action}``,
one MCP tool per action. Names match MCP's rule (1-128 of ``[A-Za-z0-9_.-]``, not starting
with a dot: :data:`~toolkeeper.model.tool.TOOL_NAME_RE`) and must not collide with
another tool's names in the same tenant: :func:`check_names` refuses such a tool when it is
registered, so a listing is always a function from name to (tool, action).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolkeeper.errors import OperationRefused
from toolkeeper.model.enums import SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import TOOL_NAME_RE, TOOL_NAME_RULE, ToolDefinition

MCP_NAME_RE = TOOL_NAME_RE
OPEN_WORLD = frozenset({"http", "mcp"})
"""Providers whose tools reach an open world (``openWorldHint``)."""


def mcp_name(tool: ToolDefinition, action: str) -> str:
    """The MCP name of one action of ``tool``."""
    return tool.name if len(tool.actions) == 1 else f"{tool.name}_{action}"


def mcp_names(tool: ToolDefinition) -> dict[str, str]:
    """MCP name → action, for every action of ``tool``."""
    return {mcp_name(tool, action): action for action in tool.actions}


def check_names(tool: ToolDefinition, lookup: Callable[[str], ToolDefinition | None]) -> None:
    """Refuse ``tool`` when one of its MCP names is invalid or is also an MCP name of another
    tool; ``lookup(name)`` finds the tool of that name sharing a listing with ``tool``.

    A clash needs equal names, so only a few tools can clash with a name: the tool named
    exactly so, and for each ``_`` in it the tool named by the part before whose action is
    the part after. Those are looked up; nothing scans the registry.
    """
    for name in mcp_names(tool):
        if not MCP_NAME_RE.match(name):
            raise OperationRefused(Reason.INVALID_ARGUMENTS, (
                f"{tool.name}: MCP name {name!r} must match {TOOL_NAME_RULE} "
                "(shorten the tool or action name)"))
        splits = [(name, None)] + [(name[:i], name[i + 1:])
                                   for i, c in enumerate(name) if c == "_"]
        for owner_name, action in splits:
            if owner_name == tool.name:
                continue
            other = lookup(owner_name)
            if other is None:
                continue
            if (action is None and len(other.actions) == 1) or (
                    action is not None and len(other.actions) > 1 and action in other.actions):
                raise OperationRefused(Reason.CONFLICT, (
                    f"{tool.name}: MCP name {name!r} is already a name of tool "
                    f"{other.name!r}; rename a tool or an action"))


def tool_annotations(tool: ToolDefinition, action: str) -> dict[str, Any]:
    """``ToolAnnotations`` derived from policy, never from the tool's own claims."""
    effect = tool.action_side_effect(action)
    title = tool.name if len(tool.actions) == 1 else f"{tool.name}: {action}"
    return {
        "title": title,
        "readOnlyHint": effect is SideEffect.PURE,
        "idempotentHint": effect in (SideEffect.PURE, SideEffect.IDEMPOTENT),
        "destructiveHint": effect is SideEffect.IRREVERSIBLE,
        "openWorldHint": tool.implementation_type in OPEN_WORLD,
    }


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry of an agent's ``tools/list``."""

    name: str
    tool: str
    action: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        """The MCP ``Tool`` object."""
        out: dict[str, Any] = {"name": self.name, "title": self.annotations["title"],
                               "description": self.description,
                               "inputSchema": self.input_schema,
                               "annotations": self.annotations}
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        return out


def listed(tool: ToolDefinition, action: str) -> Listed:
    """The listing entry for one callable action of ``tool`` (the version that runs)."""
    spec = tool.actions[action]
    parts = [p for p in (tool.description, spec.description) if p]
    output = spec.output_schema if spec.output_schema is not None else tool.output_schema
    # MCP output schemas describe structuredContent, which is always an object
    if output is not None and output.get("type") != "object":
        output = None
    schema = tool.action_input_schema(action)
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {}}
    return Listed(name=mcp_name(tool, action), tool=tool.name, action=action,
                  description=" — ".join(parts), input_schema=schema, output_schema=output,
                  annotations=tool_annotations(tool, action))
