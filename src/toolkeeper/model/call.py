"""The call as the caller sees it: request, principal, result (SPEC §2, §7 Library)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkeeper.model.enums import CallStatus, Gate, Risk, Role
from toolkeeper.model.reasons import Reason


@dataclass(slots=True, kw_only=True)
class CallRequest:
    """One request to run ``tool.action(arguments)``."""

    tool: str
    """Tool name (or MCP-style ``{tool}_{action}``, resolved by the faces)."""
    action: str | None = None
    """``None`` selects the tool's only action."""
    arguments: Any = field(default_factory=dict)
    """Untrusted: validated by the pipeline, never assumed to be a dict."""
    idempotency_key: str | None = None
    turn_group_id: str | None = None
    task_id: str | None = None
    step_id: str | None = None
    trace_id: str | None = None
    approval_id: str | None = None
    preview_token: str | None = None
    scopes: Sequence[str] | None = None
    """Narrows the granted scopes for this call; can never widen them."""
    chain: Sequence[str] = ()
    """The agents this call passed through before its caller (``agent_call`` chains, oldest
    first; REST header ``Toolkeeper-Agent-Chain``). Only ever makes ``agent_call`` stricter:
    a target already on it is a cycle, a chain too long is over the depth limit."""
    critical: bool | None = None
    """In a sequential batch: whether this call failing stops the batch and rolls back the
    completed compensatable calls (SPEC §5); ``None`` means "when its risk is critical"."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """An authenticated caller: an agent, or a human/operator with roles."""

    name: str
    """Agent name for agents, token label for people."""
    tenant_id: str
    roles: frozenset[Role]
    agent: str | None = None
    """Set when the principal is an agent."""
    token_id: str | None = None
    subject: str | None = None
    """OAuth/OIDC principals: the ``sub`` at their identity provider (a person's or a
    client's); ``None`` for ``tk_…`` tokens and in-process agents."""
    issuer: str | None = None
    """OAuth/OIDC principals: the issuer that vouched for ``subject``."""
    scopes: frozenset[str] | None = None
    """An OAuth token's scopes, mapped to toolkeeper scopes: they narrow the profile's
    granted scopes like a request's ``scopes`` do; ``None`` narrows nothing."""

    def has_role(self, *roles: Role) -> bool:
        return Role.ADMIN in self.roles or any(r in self.roles for r in roles)


@dataclass(slots=True, kw_only=True)
class CallResult:
    """What a call ended with. Stopped calls carry ``status`` and ``reason``, never raise."""

    call_id: str
    status: CallStatus
    tool: str
    action: str | None = None
    reason: Reason | str | None = None
    """Stable code; a tool's own deny reason (``branch_prefix_required``) is passed through."""
    message: str | None = None
    output: Any = None
    mcp: dict[str, Any] | None = None
    """An upstream MCP tool's result as it sent it, for the MCP face to pass on:
    ``{"content": [blocks], "structuredContent": …}`` (the latter only when sent), text
    redacted and capped like any output; ``None`` for other tools."""
    details: dict[str, Any] | None = None
    """e.g. ``{"errors": [{"pointer": "/amount", "message": …}]}`` for invalid arguments."""
    tool_version: str | None = None
    risk: Risk | None = None
    gate: Gate | None = None
    deduped: bool = False
    approval_id: str | None = None
    preview: Any = None
    preview_token: str | None = None
    retry_after: float | None = None
    side_effect_id: str | None = None
    idempotency_key: str | None = None
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is CallStatus.SUCCEEDED

    def to_dict(self, *, omit_empty: bool = True) -> dict[str, Any]:
        """JSON-ready form (the wire shape of REST and MCP ``structuredContent``).

        ``omit_empty`` drops ``None`` fields and a false ``deduped`` (compact, for storage);
        the REST face sends every field so the shape never varies.
        """
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if omit_empty and (value is None or (name == "deduped" and not value)):
                continue
            out[name] = value.value if hasattr(value, "value") else value
        out["status"] = self.status.value
        return out


@dataclass(frozen=True, slots=True)
class McpContent:
    """What an ``mcp`` provider returns: an upstream's successful ``CallToolResult`` as wire
    data. The outcome step redacts and caps it into :attr:`CallResult.mcp`."""

    content: list[dict[str, Any]]
    """The content blocks (text, image, audio, resource_link, resource)."""
    structured: Any = None
    """``structuredContent``; ``None`` when the upstream sent none."""


@dataclass(frozen=True, slots=True)
class PreviewResult:
    """What a tool's side-effect-free ``preview`` returns."""

    summary: str
    """One line a human can judge."""
    data: Any = None
    """Structured detail (a diff, the request that would be sent…)."""
