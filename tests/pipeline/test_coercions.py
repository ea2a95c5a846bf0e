"""SPEC §2 step 3: only the documented coercions — a bare string for a single required
string field, and alias names declared in the schema — nothing else."""

from __future__ import annotations

from typing import Any, ClassVar

from toolkeeper import ActionSpec, BaseTool, Reason, Risk, SideEffect, ToolContext


class Search(BaseTool):
    """Search with one required string field that declares aliases."""

    tool_name = "search"
    side_effect = SideEffect.PURE
    risk_default = Risk.LOW
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(input_schema={
        "type": "object", "additionalProperties": False, "required": ["query"],
        "properties": {"query": {"type": "string", "x-aliases": ["q", "search"]},
                       "limit": {"type": "integer"}}})}

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return request


def test_bare_string_fills_the_single_required_string_field(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Search])
    assert gw.call_sync("search", arguments="cats", agent="bot").output == {"query": "cats"}


def test_declared_aliases_are_renamed(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Search])
    res = gw.call_sync("search", arguments={"q": "dogs", "limit": 3}, agent="bot")
    assert res.output == {"query": "dogs", "limit": 3}
    both = gw.call_sync("search", arguments={"query": "a", "q": "b"}, agent="bot")
    assert both.reason == Reason.INVALID_ARGUMENTS  # the alias stays and is unknown


def test_no_other_coercion_happens(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Search])
    assert gw.call_sync("search", arguments={"query": "a", "limit": "3"},
                        agent="bot").reason == Reason.INVALID_ARGUMENTS
    assert gw.call_sync("search", arguments=["cats"], agent="bot").reason == \
        Reason.INVALID_ARGUMENTS
    assert gw.call_sync("search", arguments=None, agent="bot").reason == \
        Reason.INVALID_ARGUMENTS  # None is {}, which lacks the required field
