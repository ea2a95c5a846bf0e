"""SPEC §7 MCP names and annotations: ``{tool}`` or ``{tool}_{action}``, valid names only,
collisions refused at registration, hints derived from policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ActionSpec, Gateway, SideEffect
from toolkeeper.errors import OperationRefused
from toolkeeper.model.mcp_names import listed, mcp_names, tool_annotations
from toolkeeper.model.tool import ToolDefinition


def _tool(name: str, *actions: str, **fields: Any) -> ToolDefinition:
    acts = {a: ActionSpec() for a in actions} if actions else {"run": ActionSpec()}
    return ToolDefinition(name=name, implementation_type="function",
                          implementation={"function": "f"}, actions=acts, **fields)


@pytest.fixture
def gw(tmp_path: Path) -> Any:
    with Gateway.open(f"sqlite:///{tmp_path}/n.db") as g:
        yield g


def test_one_action_keeps_the_tool_name_several_are_suffixed() -> None:
    assert mcp_names(_tool("lookup")) == {"lookup": "run"}
    assert mcp_names(_tool("bank", "pay", "refund")) == {"bank_pay": "pay",
                                                         "bank_refund": "refund"}


@pytest.mark.parametrize(("first", "second"), [
    (("bank_pay",), ("bank", "pay", "refund")),       # single-action name = tool_action
    (("bank", "pay", "refund"), ("bank_pay",)),       # the other way round
    (("a", "b_c", "x"), ("a_b", "c", "y")),           # a_b_c from both sides
])
def test_a_colliding_mcp_name_is_refused_at_registration(gw: Gateway, first: tuple[str, ...],
                                                         second: tuple[str, ...]) -> None:
    gw.registry.save(_tool(first[0], *first[1:]))
    with pytest.raises(OperationRefused) as info:
        gw.registry.save(_tool(second[0], *second[1:]))
    assert info.value.reason == "conflict" and "MCP name" in info.value.message
    # the same tool saved again is no collision with itself
    gw.registry.save(_tool(first[0], *first[1:], description="edited"))


def test_a_name_too_long_for_mcp_is_refused(gw: Gateway) -> None:
    with pytest.raises(OperationRefused) as info:
        gw.registry.save(_tool("t" * 120, "delete_everything", "read"))
    assert info.value.reason == "invalid_arguments"


@pytest.mark.parametrize("name", ["github.search", "a" * 128, "_x.y-z", "v1.2"])
def test_mcps_names_with_dots_up_to_128_characters_are_tool_names(gw: Gateway,
                                                                   name: str) -> None:
    gw.registry.save(_tool(name))
    assert mcp_names(_tool(name)) == {name: "run"}


@pytest.mark.parametrize("name", [".hidden", "..", "a" * 129, "a b", "a/b", "ä", ""])
def test_other_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="tool name must match"):
        _tool(name)


def test_annotations_come_from_policy() -> None:
    t = _tool("svc", "get", "put", "undo", "fire")
    t = t.model_copy(update={"actions": {
        "get": ActionSpec(side_effect=SideEffect.PURE),
        "put": ActionSpec(side_effect=SideEffect.IDEMPOTENT),
        "undo": ActionSpec(side_effect=SideEffect.COMPENSATABLE),
        "fire": ActionSpec(side_effect=SideEffect.IRREVERSIBLE)}})
    hints = {a: tool_annotations(t, a) for a in t.actions}
    assert hints["get"]["readOnlyHint"] and hints["get"]["idempotentHint"]
    assert hints["put"]["idempotentHint"] and not hints["put"]["readOnlyHint"]
    assert not hints["undo"]["destructiveHint"] and hints["fire"]["destructiveHint"]
    assert not any(h["openWorldHint"] for h in hints.values())
    http = _tool("web").model_copy(update={"implementation_type": "http"})
    assert tool_annotations(http, "run")["openWorldHint"] is True


def test_output_schemas_pass_only_when_they_describe_an_object() -> None:
    obj = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert listed(_tool("a", output_schema=obj), "run").output_schema == obj
    assert listed(_tool("b", output_schema={"type": "integer"}), "run").output_schema is None
