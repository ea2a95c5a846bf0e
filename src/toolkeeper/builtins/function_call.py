"""Built-in ``function_call`` tool: one function of the operator's allow-list, by name.

The allow-list is the operator's (config ``functions:``, ``Gateway.open(functions=…)``); the
factory hands this tool a read-only view of it and nothing else (``UsesFunctions``). A name
outside the allow-list, or outside the policy's ``allowed_functions``, is refused with
``function_not_allowed`` before anything runs; ``arguments`` that do not fit the function's
signature are ``invalid_arguments``, also before it runs. The call itself is the ``function``
provider's: sync functions in a worker thread, async ones awaited, ``ctx`` passed to a
function that names it.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, ClassVar

from toolkeeper.bounds import Subset
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.function import FunctionProvider, UsesFunctions
from toolkeeper.providers.native import BaseTool

_SHOWN = 200
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "function_name": {"type": "string", "minLength": 1, "maxLength": _SHOWN,
                          "description": "A function of the operator's allow-list."},
        "arguments": {"type": "object", "default": {},
                      "description": "Keyword arguments passed to the function as they are."},
    },
    "required": ["function_name"],
    "additionalProperties": False,
}


class FunctionCallPolicy(ToolPolicy):
    """Which allow-listed functions the agent may call."""

    allowed_functions: Annotated[tuple[str, ...] | None, Subset(open="none")] = None
    """Names the agent may call, a subset of the operator's allow-list; ``None`` admits the
    whole allow-list (the operator opted each function in), ``()`` none."""


class FunctionCallTool(UsesFunctions, BaseTool):
    """Run a server-side function of the operator's allow-list by ``function_name``."""

    tool_name = "function_call"
    description = "Run an allow-listed server-side function by name with keyword arguments."
    capabilities = ("code",)
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(description=description, input_schema=INPUT_SCHEMA),
    }
    # What a function does is the operator's code: assume the worst until a deployment
    # registers the tool with the effect its functions really have.
    risk_default = Risk.MEDIUM
    side_effect = SideEffect.IRREVERSIBLE
    execution = ExecutionMeta(timeout_s=60.0)
    policy_model = FunctionCallPolicy

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Check name and arguments, then call the function."""
        policy = self.checked_policy(action, context, FunctionCallPolicy, label="function_call")
        name = request.get("function_name")
        if not isinstance(name, str) or not name:
            context.fail(Reason.INVALID_ARGUMENTS, "function_name must be a non-empty string")
        if name not in self.functions:
            context.deny(Reason.FUNCTION_NOT_ALLOWED,
                         f"function {name[:_SHOWN]!r} is not registered in the allow-list")
        if policy.allowed_functions is not None and name not in policy.allowed_functions:
            context.deny(Reason.FUNCTION_NOT_ALLOWED,
                         f"function {name[:_SHOWN]!r} is not allowed by the policy")
        arguments = request.get("arguments", {})
        if not isinstance(arguments, dict):
            context.fail(Reason.INVALID_ARGUMENTS, "arguments must be an object")
        _check_signature(context, name, self.functions[name], arguments)
        return await FunctionProvider(name, self.functions).execute(action, arguments, context)


def _check_signature(ctx: ToolContext, name: str, fn: Any, arguments: dict[str, Any]) -> None:
    """Refuse ``arguments`` the function cannot take (``invalid_arguments``), before it runs."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some C callables have none: let the call decide
        return
    if "ctx" in signature.parameters:
        if "ctx" in arguments:
            ctx.fail(Reason.INVALID_ARGUMENTS, "ctx is set by the gateway, not an argument")
        arguments = {**arguments, "ctx": None}
    try:
        signature.bind(**arguments)
    except TypeError as exc:  # its text names parameters only, never values
        ctx.fail(Reason.INVALID_ARGUMENTS, f"arguments do not fit {name[:_SHOWN]!r}: {exc}")
