"""Built-in ``json_transform`` tool: a JMESPath expression over JSON input.

Expressions are compiled once per tool instance (an LRU cache, not module state). Any JMESPath
error, at compile or search time, is ``expression_invalid``; input larger than
``max_input_bytes`` (serialized, compact UTF-8 JSON) is ``payload_too_large``; a result whose
serialized form exceeds ``max_output_chars`` is ``output_too_large`` (JSON cannot be truncated
into something still meaningful).

The search itself is bounded: JMESPath builds values by reference (``[@,@]|[@,@]|…`` doubles
a value per pipe at no cost, then serializing it is 2^n) and flattening copies
(``[@,@,@,@][]`` repeated multiplies real memory). Every value the interpreter makes is
measured (its serialized size, estimated once per distinct container) and may not exceed
``max_work_bytes``; a flatten is measured before it copies; and the interpreter takes at most
``max_steps`` steps. Past either, the call fails ``output_too_large``.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult
from jmespath.visitor import TreeInterpreter
from pydantic import Field

from toolkeeper.bounds import AtMost
from toolkeeper.errors import ToolError
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

if TYPE_CHECKING:
    from jmespath.visitor import _TreeNode

_CACHE_SIZE = 256


class JsonTransformPolicy(ToolPolicy):
    """Bounds of the json_transform tool."""

    max_expression_length: Annotated[int, AtMost()] = Field(default=1000, ge=1, le=100_000)
    """Longer expressions are refused (``payload_too_large``)."""
    max_input_bytes: Annotated[int, AtMost()] = Field(default=1_000_000, ge=1)
    """Larger ``data`` (compact JSON, UTF-8) is refused (``payload_too_large``)."""
    max_output_chars: Annotated[int, AtMost()] = Field(default=100_000, ge=1)
    """A larger serialized result fails with ``output_too_large``."""
    max_work_bytes: Annotated[int, AtMost()] = Field(default=4_000_000, ge=1, le=200_000_000)
    """No value made during the search (estimated serialized size) may exceed this
    (``output_too_large``): the bound on what an expression can multiply its input into."""
    max_steps: Annotated[int, AtMost()] = Field(default=1_000_000, ge=1, le=100_000_000)
    """Interpreter steps (expression nodes visited, per element of projections)."""


class _TooMuch(Exception):
    pass


class _BoundedInterpreter(TreeInterpreter):
    """JMESPath's interpreter, measuring every value it makes (see the module docstring)."""

    def __init__(self, max_bytes: int, max_steps: int) -> None:
        super().__init__()
        self.max_bytes, self.steps_left = max_bytes, max_steps
        self._sizes: dict[int, tuple[Any, int]] = {}  # id -> (value kept alive, size)

    def visit(self, node: _TreeNode, *args: Any, **kwargs: Any) -> Any:
        self.steps_left -= 1
        if self.steps_left < 0:
            raise _TooMuch("the expression takes more than max_steps steps")
        value = super().visit(node, *args, **kwargs)
        if isinstance(value, list | dict | str) and self.size(value) > self.max_bytes:
            raise _TooMuch("the expression makes a value larger than max_work_bytes")
        return value

    def visit_flatten(self, node: _TreeNode, value: Any) -> Any:
        base = self.visit(node["children"][0], value)
        if isinstance(base, list):
            total = sum(self.size(e) for e in base)
            if total > self.max_bytes:
                raise _TooMuch("the expression makes a value larger than max_work_bytes")
        flat: Any = {"type": "flatten", "children": [{"type": "identity", "children": []}]}
        return super().visit_flatten(flat, base)

    def size(self, value: Any) -> int:
        """The value's compact JSON size, roughly (containers measured once each)."""
        if isinstance(value, str):
            return len(value) + 2
        if not isinstance(value, list | dict):
            return 8
        known = self._sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        total = 2
        for item in (value if isinstance(value, list) else value.values()):
            total += self.size(item) + 1
            if total > self.max_bytes:
                break
        if isinstance(value, dict):
            total += sum(len(k) + 3 for k in value)
        self._sizes[id(value)] = (value, total)
        return total


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
        result = self._search(expression, data, policy)
        if len(_compact(result)) > policy.max_output_chars:
            raise ToolError(Reason.OUTPUT_TOO_LARGE,
                            f"result exceeds max_output_chars {policy.max_output_chars}")
        return {"result": result}

    def _search(self, expression: str, data: Any, policy: JsonTransformPolicy) -> Any:
        try:
            compiled: ParsedResult = self._compile(expression)
            interpreter = _BoundedInterpreter(policy.max_work_bytes, policy.max_steps)
            return interpreter.visit(compiled.parsed, data)
        except _TooMuch as exc:
            raise ToolError(Reason.OUTPUT_TOO_LARGE, str(exc)) from None
        except JMESPathError as exc:
            raise ToolError(Reason.EXPRESSION_INVALID, f"JMESPath: {exc}") from None
        except RecursionError:
            raise ToolError(Reason.EXPRESSION_INVALID, "expression is nested too deeply") from None
