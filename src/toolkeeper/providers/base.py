"""The provider contract: what the execute step needs from any kind of tool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from toolkeeper.bounds import AtMost, Subset
from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.enums import Autonomy
from toolkeeper.model.reasons import Reason

if TYPE_CHECKING:
    from toolkeeper.model.call import PreviewResult


class ToolPolicy(BaseModel):
    """Base of every tool's policy model: values come from the profile's activation.

    Subclass it with the tool's guardrails (seed: ToolPolicy). Unknown keys are refused so a
    typo in a profile cannot silently disable a guardrail.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_actions: Annotated[tuple[str, ...] | None, Subset(open="none")] = None
    """Actions this policy permits; ``None`` leaves it to the activation."""
    max_output_chars: Annotated[int | None, AtMost(none_is_unlimited=True)] = None
    """Caps the output below the tool's ``execution.max_output_chars``."""

    def refusal(self, action: str) -> tuple[Reason, str] | None:
        """Why this policy refuses ``action`` whatever the arguments — ``(reason, message)``
        — or ``None``: the one rule the call (resolve) and every listing read, so an action
        the policy can never run is not listed. Subclasses add their own switches."""
        if self.allowed_actions is not None and action not in self.allowed_actions:
            return Reason.ACTION_NOT_ALLOWED, f"{action} is not in the policy's allowed_actions"
        return None


SecretGetter = Callable[[str | None, str], Awaitable[str]]
CredentialGetter = Callable[[str, str], Awaitable[str | None]]


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """Everything a tool may know about the call; tools never read system state directly."""

    call_id: str
    tenant_id: str
    agent: str
    tool: str
    action: str
    tool_version: str
    autonomy: Autonomy
    granted_scopes: frozenset[str]
    policy: ToolPolicy
    connector_id: str | None = None
    idempotency_key: str | None = None
    turn_group_id: str | None = None
    trace_id: str | None = None
    task_id: str | None = None
    step_id: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    """The tool's implementation config, with ``${secret:…}`` references left unresolved."""
    timeout_s: float = 30.0
    """The tool's execution deadline (``execution.timeout_s``)."""
    upstreams: Any = None
    """The gateway's upstream MCP connections (``mcp`` tools and ``mcp_call``)."""
    chain: tuple[str, ...] = ()
    """The agents the call passed through before ``agent`` (``CallRequest.chain``)."""
    agents: Mapping[tuple[str, str], Any] = field(default_factory=dict)
    """The gateway's agents by ``(tenant_id, name)`` (``agent_call`` resolves its target
    here, within ``tenant_id`` only)."""
    tenant_bounds: Any = None
    """The operator's ceiling for tenant-written host values (``toolkeeper.bounds``)."""
    agent_calls: Any = None
    """The gateway's own record of the agent calls in flight (``agent_call``'s chain guard:
    ``toolkeeper.providers.agent_chains.InFlight``)."""
    _get_secret: SecretGetter | None = None
    """Look-ups in the scope of the tool definition's writer (its ``origin``)."""
    _secrets_of: Callable[[str], SecretGetter | None] | None = None
    """Look-ups in the scope of another record's writer, by that record's ``origin``."""
    _get_credential: CredentialGetter | None = None
    _resolved_secrets: list[str] = field(default_factory=list, repr=False)
    """The secret values this call resolved (for redaction): never in its repr."""

    async def secret(self, key: str, connector_id: str | None = None, *,
                     written_by: str | None = None) -> str:
        """Resolve a secret now, at use. Its value is redacted from everything returned.

        A reference resolves in the scope of whoever wrote it: by default the tool's own
        definition; ``written_by`` gives the ``origin`` of another record the reference
        was read from (an agent endpoint), whatever tool carries it."""
        if written_by is None:
            getter = self._get_secret
        else:
            getter = self._secrets_of(written_by) if self._secrets_of is not None else None
        if getter is None:
            raise ToolError("secret_not_found", f"no secrets store for {key!r}")
        value = await getter(connector_id or self.connector_id, key)
        self._resolved_secrets.append(value)
        return value

    async def credential(self, connector: str, key: str) -> str | None:
        """The calling tenant's own credential ``connector/key`` (never the operator's
        platform secrets), or ``None`` when it has none. Redacted like a secret."""
        if self._get_credential is None:
            return None
        value = await self._get_credential(connector, key)
        if value is not None:
            self._resolved_secrets.append(value)
        return value

    def mark_secret(self, value: str) -> None:
        """Treat ``value``, obtained elsewhere (the environment, a field inside a
        credential), as a secret: redacted from everything the call returns, logs, audits."""
        self._resolved_secrets.append(value)

    def deny(self, reason: str, message: str | None = None, **details: Any) -> NoReturn:
        """Refuse the call with a stable reason (``branch_prefix_required``)."""
        raise ToolDenied(reason, message, **details)

    def fail(self, reason: str = "tool_error", message: str | None = None,
             *, retryable: bool = False) -> NoReturn:
        raise ToolError(reason, message, retryable=retryable)


@runtime_checkable
class Provider(Protocol):
    """How the execute step runs one tool. One instance per tool definition."""

    policy_model: type[ToolPolicy]

    def supports_preview(self, action: str) -> bool: ...

    async def preview(
        self, action: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> PreviewResult | None: ...

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any: ...


class NoPreview:
    """For providers that cannot say what a call would do without doing it."""

    def supports_preview(self, action: str) -> bool:
        return False

    async def preview(self, action: str, arguments: dict[str, Any],
                      ctx: ToolContext) -> PreviewResult | None:
        return None
