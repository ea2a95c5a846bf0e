"""The exception tree. Three families, never confused with each other:

    ToolkeeperError
    ├── CallStopped            the raising variant of a stopped call (``call_or_raise``)
    │   ├── ApprovalRequired   gate wants an approval / confirmation / preview
    │   ├── CallDenied         a policy, scope, limit or gate refused the call
    │   └── CallFailed         the tool ran (or may have) and did not succeed
    ├── ToolSignal             raised *by tools* inside execute/preview
    │   ├── ToolDenied         ``ctx.deny(reason)``: a stable policy refusal
    │   └── ToolError          the tool failed; ``retryable`` for transient faults
    │       └── UpstreamError  an upstream (HTTP, MCP) failed or was unreachable
    ├── OperationRefused       a management operation was refused (approve, resolve…)
    └── UserError              developer misuse: bad config, bad registration
        └── ConfigError        carries the file and position of the bad config

``ToolSignal``s are translated into call results at the provider boundary; a tool that
raises anything else fails the call with ``tool_error`` and its message (redacted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkeeper.model.call import CallResult


class ToolkeeperError(Exception):
    """Base of every toolkeeper exception."""


class CallStopped(ToolkeeperError):
    """A call did not succeed; ``result`` has its status and reason."""

    def __init__(self, result: CallResult) -> None:
        self.result = result
        self.reason = result.reason
        super().__init__(f"{result.tool}: {result.status.value} ({result.reason})")


class ApprovalRequired(CallStopped):
    """The gate needs an approval, a confirmation or a preview before the call can run."""


class CallDenied(CallStopped):
    """A pipeline step refused the call."""


class CallFailed(CallStopped):
    """The call ran, or may have run, and did not succeed."""


_STOPPED_BY_STATUS: dict[str, type[CallStopped]] = {
    "approval_required": ApprovalRequired,
    "confirmation_required": ApprovalRequired,
    "preview_required": ApprovalRequired,
    "denied": CallDenied,
    "superseded": CallDenied,
}


def stopped(result: CallResult) -> CallStopped:
    """The exception ``call_or_raise`` raises for a result that did not succeed (every face:
    the library and ``toolkeeper.client``); any status not named above is a ``CallFailed``."""
    return _STOPPED_BY_STATUS.get(str(result.status.value), CallFailed)(result)


class ToolSignal(ToolkeeperError):
    """Raised by tool code; translated into a call result by the pipeline."""

    def __init__(self, reason: str, message: str | None = None, **details: Any) -> None:
        self.reason = reason
        self.message = message or reason
        self.details = details
        super().__init__(self.message)


class ToolDenied(ToolSignal):
    """A tool's own policy refused the call (``ctx.deny("branch_prefix_required")``)."""


class ToolError(ToolSignal):
    """The tool failed. ``retryable`` marks transient faults (only retried if retry-safe)."""

    def __init__(
        self,
        reason: str = "tool_error",
        message: str | None = None,
        *,
        retryable: bool = False,
        may_have_executed: bool = False,
        **details: Any,
    ) -> None:
        self.retryable = retryable
        self.may_have_executed = may_have_executed
        super().__init__(reason, message, **details)


class UpstreamError(ToolError):
    """An upstream service failed or could not be reached."""

    def __init__(self, message: str, *, retryable: bool = True, **kw: Any) -> None:
        super().__init__("upstream_error", message, retryable=retryable, **kw)


class OperationRefused(ToolkeeperError):
    """A management operation (approve, resolve, publish, compensate…) was refused."""

    def __init__(self, reason: str, message: str, **details: Any) -> None:
        self.reason = reason
        self.message = message
        self.details = details
        super().__init__(f"{reason}: {message}")


class UserError(ToolkeeperError):
    """Developer misuse: the library was called or configured wrongly."""


class ConfigError(UserError):
    """Bad configuration, with the file position when known."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None,
        column: int | None = None, problems: list[str] | None = None,
    ) -> None:
        self.path, self.line, self.column = path, line, column
        self.problems = problems or [message]
        where = path or "<config>"
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {message}")
