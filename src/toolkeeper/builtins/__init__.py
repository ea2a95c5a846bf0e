"""Built-in tools (SPEC §11): each its own module with a policy model.

``BUILTINS`` maps a ``builtin_key`` to its tool class; :func:`definition` gives the global,
system definition that ``toolkeeper apply`` installs for a ``builtin:`` entry.
"""

from __future__ import annotations

from typing import Any

from toolkeeper.builtins.agent_call import AgentCallTool
from toolkeeper.builtins.calculate import CalculateTool
from toolkeeper.builtins.composio import ComposioTool
from toolkeeper.builtins.datetime_utils import DatetimeTool
from toolkeeper.builtins.filesystem import FilesystemTool
from toolkeeper.builtins.function_call import FunctionCallTool
from toolkeeper.builtins.git import GitTool
from toolkeeper.builtins.http_request import HttpRequestTool
from toolkeeper.builtins.json_transform import JsonTransformTool
from toolkeeper.builtins.mcp_call import McpCallTool
from toolkeeper.builtins.retrieval import RetrievalTool
from toolkeeper.builtins.shell import ShellTool
from toolkeeper.builtins.web_fetch import WebFetchTool
from toolkeeper.builtins.web_search import WebSearchTool
from toolkeeper.errors import UserError
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.native import BaseTool

BUILTINS: dict[str, type[BaseTool]] = {
    "agent_call": AgentCallTool,
    "calculate": CalculateTool,
    "composio": ComposioTool,
    "datetime_utils": DatetimeTool,
    "filesystem": FilesystemTool,
    "function_call": FunctionCallTool,
    "git": GitTool,
    "http_request": HttpRequestTool,
    "json_transform": JsonTransformTool,
    "mcp_call": McpCallTool,
    "retrieval": RetrievalTool,
    "shell": ShellTool,
    "web_fetch": WebFetchTool,
    "web_search": WebSearchTool,
}


def definition(key: str, **overrides: Any) -> ToolDefinition:
    """The built-in's definition as a global system tool (``tenant_id`` None)."""
    cls = BUILTINS.get(key)
    if cls is None:
        raise UserError(f"no built-in tool {key!r}; known: {', '.join(sorted(BUILTINS))}")
    fields: dict[str, Any] = {"is_system": True, "builtin_key": key,
                              "implementation_type": "builtin",
                              "implementation": {"builtin_key": key}}
    fields.update(overrides)
    return cls.definition(**fields)


__all__ = ["BUILTINS", "definition"]
