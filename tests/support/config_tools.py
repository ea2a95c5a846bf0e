"""Native tools the config tests reference by entry point,
``tests.support.config_tools:Name``."""

from __future__ import annotations

from typing import Any, ClassVar

from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.tool import ActionSpec
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool, tool


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW, inline=True)
def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class NotesPolicy(ToolPolicy):
    """Guardrails of the notes tool."""

    max_length: int = 100


class NotesTool(BaseTool):
    """Append to and read an in-memory notebook."""

    tool_name = "notes"
    actions: ClassVar[dict[str, ActionSpec]] = {
        "append": ActionSpec(input_schema={
            "type": "object", "properties": {"text": {"type": "string"}},
            "required": ["text"], "additionalProperties": False}),
        "read": ActionSpec(side_effect=SideEffect.PURE),
    }
    risk_map: ClassVar[dict[str, Risk]] = {"append": Risk.MEDIUM, "read": Risk.LOW}
    policy_model = NotesPolicy
    inline = True

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Not run by these tests; the definition is what matters."""
        return {"action": action}


class BareTool(BaseTool):
    """A BaseTool subclass without a policy model of its own."""

    tool_name = "bare"
    risk_default = Risk.LOW

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Echo."""
        return request


NOT_A_TOOL = 42
