"""Built-in ``calculate`` tool: arithmetic without ``eval``.

The expression is parsed with ``ast`` and walked over a whitelist: numbers, ``+ - * / // % **``,
unary ``+``/``-``, parentheses, the constants ``pi`` and ``e`` and the functions ``abs, round,
min, max, sqrt, floor, ceil, log, exp, sin, cos, tan``. Anything else (names, attributes,
strings, comparisons, calls with keywords…) is ``expression_invalid``. ``**`` is bounded by
``max_exponent`` and integer results by ``max_result_digits`` *before* they are computed, so
``9**9**9`` is refused at once instead of hanging.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from pydantic import Field

from toolkeeper.bounds import AtMost
from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

Number = int | float
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos, ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    # name: (function, min args, max args)
    "abs": (abs, 1, 1), "round": (round, 1, 2), "min": (min, 1, 50), "max": (max, 1, 50),
    "sqrt": (math.sqrt, 1, 1), "floor": (math.floor, 1, 1), "ceil": (math.ceil, 1, 1),
    "log": (math.log, 1, 2), "exp": (math.exp, 1, 1), "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1), "tan": (math.tan, 1, 1),
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


class CalculatePolicy(ToolPolicy):
    """Bounds of the calculate tool."""

    max_expression_length: Annotated[int, AtMost()] = Field(default=1000, ge=1, le=10_000)
    """Longer expressions are refused (``payload_too_large``)."""
    max_exponent: Annotated[int, AtMost()] = Field(default=1000, ge=1)
    """``a ** b`` with ``|b|`` above this is refused (``expression_invalid``)."""
    max_result_digits: Annotated[int, AtMost()] = Field(default=1000, ge=1, le=4000)
    """Integer results and intermediates longer than this are refused (``output_too_large``)."""


def _invalid(message: str) -> ToolError:
    return ToolError(Reason.EXPRESSION_INVALID, message)


class _Evaluator:
    """Walks a parsed expression over the whitelist, enforcing the policy's bounds."""

    def __init__(self, policy: CalculatePolicy) -> None:
        self.policy = policy

    def eval(self, node: ast.AST) -> Number:
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise _invalid(f"unsupported literal {node.value!r}")
            return self.bounded(node.value)
        if isinstance(node, ast.Name):
            if node.id not in _CONSTANTS:
                raise _invalid(f"unknown name {node.id!r}")
            return _CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return self.bounded(_UNARY[type(node.op)](self.eval(node.operand)))
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise _invalid(f"{type(node).__name__} is not allowed in an expression")

    def binary(self, node: ast.BinOp) -> Number:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Pow):
            return self.power(left, right)
        func = _BINARY.get(type(node.op))
        if func is None:
            raise _invalid(f"operator {type(node.op).__name__} is not allowed")
        return self.bounded(func(left, right))

    def power(self, base: Number, exponent: Number) -> Number:
        if abs(exponent) > self.policy.max_exponent:
            raise ToolDenied(
                Reason.EXPRESSION_INVALID,
                f"exponent {exponent} exceeds max_exponent {self.policy.max_exponent}",
            )
        if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and base:
            # Estimate the digit count first: computing a huge power is the hang we prevent.
            estimate = exponent * math.log10(abs(base)) if abs(base) > 1 else 0
            if estimate > self.policy.max_result_digits:
                raise ToolDenied(
                    Reason.OUTPUT_TOO_LARGE,
                    f"result would have ~{int(estimate)} digits > {self.policy.max_result_digits}",
                )
        result = base**exponent
        if isinstance(result, complex):
            raise _invalid("result is a complex number")
        return self.bounded(result)

    def call(self, node: ast.Call) -> Number:
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise _invalid("only abs, round, min, max, sqrt, floor, ceil, log, exp, sin, cos, "
                           "tan may be called")
        func, low, high = _FUNCTIONS[node.func.id]
        if node.keywords or not low <= len(node.args) <= high:
            raise _invalid(f"{node.func.id}() takes {low} to {high} positional arguments")
        args = [self.eval(arg) for arg in node.args]
        if node.func.id == "round" and len(args) == 2:
            if not isinstance(args[1], int):
                raise _invalid("round() digits must be an integer")
            if abs(args[1]) > self.policy.max_result_digits:
                # round(5, -10**20) computes 10**(10**20) first: the hang we prevent
                raise _invalid(f"round() digits beyond ±{self.policy.max_result_digits}")
        return self.bounded(func(*args))

    def bounded(self, value: Any) -> Number:
        if isinstance(value, float) and not math.isfinite(value):
            raise _invalid("result is not a finite number")
        if isinstance(value, int) and _digits(value) > self.policy.max_result_digits:
            raise ToolDenied(
                Reason.OUTPUT_TOO_LARGE,
                f"result exceeds max_result_digits {self.policy.max_result_digits}",
            )
        return value  # type: ignore[no-any-return]


def _digits(value: Number) -> int:
    if isinstance(value, float):
        return 1
    # bit_length avoids str(), which is itself quadratic (and capped) for huge ints.
    return max(1, math.ceil(abs(value).bit_length() * math.log10(2)))


def evaluate(expression: str, policy: CalculatePolicy) -> Number:
    """Evaluate an arithmetic expression under ``policy``; never calls ``eval``."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise _invalid(f"not a valid expression: {exc.msg if isinstance(exc, SyntaxError) else exc}"
                       ) from None
    except (RecursionError, MemoryError):
        raise _invalid("expression is nested too deeply") from None
    try:
        return _Evaluator(policy).eval(tree)
    except ZeroDivisionError:
        raise _invalid("division by zero") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise _invalid(f"cannot evaluate: {exc}") from None
    except RecursionError:
        raise _invalid("expression is nested too deeply") from None


class CalculateTool(BaseTool):
    """Evaluate arithmetic safely (no ``eval``): operators, parentheses and a few math functions."""

    tool_name = "calculate"
    description = "Evaluate an arithmetic expression (+ - * / // % **, sqrt, log, sin, pi…)."
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(
            description="Evaluate one expression.",
            input_schema={
                "type": "object",
                "properties": {"expression": {"type": "string", "minLength": 1,
                                              "maxLength": 1000}},
                "required": ["expression"],
                "additionalProperties": False,
            },
            side_effect=SideEffect.PURE,
        )
    }
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(is_pure=True, timeout_s=5.0)
    policy_model = CalculatePolicy
    inline = True

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Evaluate ``request["expression"]`` and return ``{"expression", "result"}``."""
        policy = self.checked_policy(action, context, CalculatePolicy)
        expression = request.get("expression")
        if not isinstance(expression, str) or not expression.strip():
            context.fail(Reason.INVALID_ARGUMENTS, "expression must be a non-empty string")
        if len(expression) > policy.max_expression_length:
            context.deny(Reason.PAYLOAD_TOO_LARGE,
                         f"expression longer than {policy.max_expression_length} characters")
        return {"expression": expression, "result": evaluate(expression, policy)}
