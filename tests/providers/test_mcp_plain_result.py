"""The upstream answer's fast shape check (``plain_result``) never accepts what the SDK's
``CallToolResult`` model refuses: every shape below goes to both."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from pydantic import ValidationError

from toolkeeper.errors import ToolError
from toolkeeper.providers.mcp import output_of, plain_result

TEXT = {"type": "text", "text": "hi"}
SHAPES: list[Any] = [
    {"content": [TEXT]},
    {"content": [TEXT, TEXT], "isError": False},
    {"content": [], "isError": True},
    {"content": [TEXT], "structuredContent": {"a": [1, {"b": None}]}},
    {"content": [TEXT], "structuredContent": None},
    {"content": [TEXT], "resultType": "complete",
     "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up", "version": ""}}},
    {"content": [TEXT], "resultType": "anything"},
    {"content": [TEXT], "_meta": {}},
    {},
    {"content": None},
    {"content": TEXT},
    {"content": [TEXT], "isError": None},
    {"content": [TEXT], "isError": "yes"},
    {"content": [TEXT], "isError": 1},
    {"content": [TEXT], "structuredContent": [1]},
    {"content": [TEXT], "structuredContent": "x"},
    {"content": [TEXT], "_meta": 5},
    {"content": [TEXT], "_meta": None},
    {"content": [TEXT], "resultType": 5},
    {"content": [{"type": "text"}]},
    {"content": [{"type": "text", "text": 5}]},
    {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}]},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": "high"}}]},
    {"content": [{"type": "txt", "text": "x"}]},
    {"content": ["x"]},
    {"content": [TEXT], "extra": 1},
]


def _model_accepts(shape: Any) -> bool:
    try:
        types.CallToolResult.model_validate(shape)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("shape", SHAPES, ids=range(len(SHAPES)))
def test_the_fast_check_accepts_only_what_the_model_accepts(shape: Any) -> None:
    if plain_result(shape):
        assert _model_accepts(shape)
    accepted = _model_accepts(shape)
    try:
        output_of("up", shape)
    except ToolError as exc:
        assert not accepted or shape.get("isError"), exc
    else:
        assert accepted


def test_the_plain_shapes_of_real_upstreams_take_the_fast_check() -> None:
    assert all(plain_result(s) for s in SHAPES[:8])
