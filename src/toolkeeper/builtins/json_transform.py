"""Built-in ``json_transform`` tool: a JMESPath expression over JSON input.

Expressions are compiled once per tool instance (an LRU cache, not module state). Any JMESPath
error, at compile or search time, is ``expression_invalid``; input larger than
``max_input_bytes`` (serialized, compact UTF-8 JSON) is ``payload_too_large``; a result whose
serialized form exceeds ``max_output_chars`` is ``output_too_large`` (JSON cannot be truncated
into something still meaningful).
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, ClassVar

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult
from pydantic import Field

from toolkeeper.bounds import AtMost
from toolkeeper.errors import ToolError
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

_CACHE_SIZE = 256


class JsonTransformPolicy(ToolPolicy):
    """Bounds of the json_transform tool."""

    max_expression_length: Annotated[int, AtMost()] = Field(default=1000, ge=1, le=100_000)
    """Longer expressions are refused (``payload_too_large``)."""
    max_input_bytes: Annotated[int, AtMost()] = Field(default=1_000_000, ge=1)
    """Larger ``data`` (compact JSON, UTF-8) is refused (``payload_too_large``)."""
    max_output_chars: Annotated[int, AtMost()] = Field(default=100_000, ge=1)
    """A larger serialized result fails with ``output_too_large``."""


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class JsonTransformTool(BaseTool):
    """Query and reshape JSON with a JMESPath expression."""

    tool_name = "json_transform"
    description = "Apply a JMESPath expression to JSON data and return the result."
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(
            description="Evaluate expression (JMESPath) against data.",
            input_schema={
                "type": "object",
                "properties": {
                    "data": {},
                    "expression": {"type": "string", "minLength": 1, "maxLength": 10_000},
                },
                "required": ["data", "expression"],
                "additionalProperties": False,
            },
            side_effect=SideEffect.PURE,
        )
    }
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(is_pure=True, timeout_s=10.0)
    policy_model = JsonTransformPolicy
    inline = True

    def __init__(self) -> None:
        self._compile = functools.lru_cache(maxsize=_CACHE_SIZE)(jmespath.compile)

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Return ``{"result": search(expression, data)}``."""
        policy = self.checked_policy(action, context, JsonTransformPolicy)
        expression, data = request.get("expression"), request.get("data")
        if not isinstance(expression, str) or not expression.strip() or "data" not in request:
            context.fail(Reason.INVALID_ARGUMENTS, "need data and a non-empty expression")
        if len(expression) > policy.max_expression_length:
            context.deny(Reason.PAYLOAD_TOO_LARGE,
                         f"expression longer than {policy.max_expression_length} characters")
        try:
            size = len(_compact(data).encode())
        except (TypeError, ValueError) as exc:
            context.fail(Reason.INVALID_ARGUMENTS, f"data is not JSON: {exc}")
        if size > policy.max_input_bytes:
            context.deny(Reason.PAYLOAD_TOO_LARGE,
                         f"data is {size} bytes > max_input_bytes {policy.max_input_bytes}")
        result = self._search(expression, data)
        if len(_compact(result)) > policy.max_output_chars:
            raise ToolError(Reason.OUTPUT_TOO_LARGE,
                            f"result exceeds max_output_chars {policy.max_output_chars}")
        return {"result": result}

    def _search(self, expression: str, data: Any) -> Any:
        try:
            compiled: ParsedResult = self._compile(expression)
            return compiled.search(data)
        except JMESPathError as exc:
            raise ToolError(Reason.EXPRESSION_INVALID, f"JMESPath: {exc}") from None
        except RecursionError:
            raise ToolError(Reason.EXPRESSION_INVALID, "expression is nested too deeply") from None
