"""toolkeeper — the governed tool gateway for AI agents.

    from toolkeeper import Gateway, tool, SideEffect

    @tool(side_effect=SideEffect.PURE)
    def add(a: int, b: int) -> int:
        return a + b

    with Gateway.open("sqlite:///./toolkeeper.db") as gw:
        gw.registry.register(add)
        ...
        result = gw.call_sync("add", arguments={"a": 1, "b": 2}, agent="helper")
"""

import importlib as _importlib
from typing import TYPE_CHECKING
from typing import Any as _Any

# first, before anything imports httpx: its command-line client stays unimported
from toolkeeper import _httpx_cli  # noqa: F401
from toolkeeper.errors import (
    ApprovalRequired,
    CallDenied,
    CallFailed,
    CallStopped,
    ConfigError,
    OperationRefused,
    ToolDenied,
    ToolError,
    ToolkeeperError,
    ToolSignal,
    UpstreamError,
    UserError,
)
from toolkeeper.model import (
    ActionSpec,
    Activation,
    Adjuster,
    Agent,
    ApprovalStatus,
    Autonomy,
    CallRequest,
    CallResult,
    CallStatus,
    Compensation,
    Condition,
    EventType,
    ExecutionMeta,
    Gate,
    GateMatrix,
    Health,
    Limits,
    Mode,
    OutcomeState,
    PreviewResult,
    Principal,
    Profile,
    RateLimit,
    Reason,
    Risk,
    Role,
    SideEffect,
    ToolDefinition,
    ToolStatus,
)
from toolkeeper.version import __version__

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway
    from toolkeeper.pipeline.runtime import Settings
    from toolkeeper.providers.base import ToolContext, ToolPolicy
    from toolkeeper.providers.native import BaseTool, tool
    from toolkeeper.store import Store

# The server side loads when first named: ``toolkeeper.client``, the Toolbox's remote backend
# and the framework adapters import this package without it, and the slim distribution
# (toolkeeper-client) does not ship it at all.
_SERVER = {
    "Gateway": "toolkeeper.gateway",
    "Settings": "toolkeeper.pipeline.runtime",
    "ToolContext": "toolkeeper.providers.base",
    "ToolPolicy": "toolkeeper.providers.base",
    "BaseTool": "toolkeeper.providers.native",
    "tool": "toolkeeper.providers.native",
    "Store": "toolkeeper.store",
}


def __getattr__(name: str) -> _Any:
    module = _SERVER.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkeeper' has no attribute {name!r}")
    try:
        value = getattr(_importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("toolkeeper"):
            raise ImportError(
                f"toolkeeper.{name} is part of the server; this is the client distribution "
                "(toolkeeper-client). Install the server with: pip install toolkeeper"
            ) from exc
        raise
    globals()[name] = value
    return value

__all__ = [
    "ActionSpec",
    "Activation",
    "Adjuster",
    "Agent",
    "ApprovalRequired",
    "ApprovalStatus",
    "Autonomy",
    "BaseTool",
    "CallDenied",
    "CallFailed",
    "CallRequest",
    "CallResult",
    "CallStatus",
    "CallStopped",
    "Compensation",
    "Condition",
    "ConfigError",
    "EventType",
    "ExecutionMeta",
    "Gate",
    "GateMatrix",
    "Gateway",
    "Health",
    "Limits",
    "Mode",
    "OperationRefused",
    "OutcomeState",
    "PreviewResult",
    "Principal",
    "Profile",
    "RateLimit",
    "Reason",
    "Risk",
    "Role",
    "Settings",
    "SideEffect",
    "Store",
    "ToolContext",
    "ToolDefinition",
    "ToolDenied",
    "ToolError",
    "ToolPolicy",
    "ToolSignal",
    "ToolStatus",
    "ToolkeeperError",
    "UpstreamError",
    "UserError",
    "__version__",
    "tool",
]
