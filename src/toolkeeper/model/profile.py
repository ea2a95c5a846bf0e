"""Profiles, activations, agents and limits: what an agent may do (SPEC §1)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkeeper.model.enums import Autonomy, Gate, Risk


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RateLimit(_Strict):
    """At most ``limit`` calls per ``window_s`` seconds, counted per ``per``."""

    limit: int = Field(ge=1)
    window_s: float = Field(gt=0)
    per: Literal["agent", "tool", "tenant", "agent_tool"] = "agent_tool"


class Budget(_Strict):
    """A call and/or cost budget per calendar ``period`` (UTC), counted per ``per``
    (see :mod:`toolkeeper.pipeline.budgets`): ``warn_at`` of it audits ``budget.warning``
    once a period, and a call that would cross it stops with ``budget_exceeded``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    per: Literal["agent", "tool", "tenant", "agent_tool"] = "tenant"
    period: Literal["day", "month"] = "day"
    max_calls: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, gt=0)
    """In the unit the tools' ``costs`` declare (e.g. US dollars)."""
    warn_at: float = Field(default=0.8, gt=0, le=1)
    """Fraction of ``max_calls`` or ``max_cost`` spent that raises the warning."""

    @model_validator(mode="after")
    def _limited(self) -> Budget:
        if self.max_calls is None and self.max_cost is None:
            raise ValueError(f"budget {self.name!r} sets neither max_calls nor max_cost")
        return self


class Limits(_Strict):
    rate: tuple[RateLimit, ...] = ()
    budgets: tuple[Budget, ...] = ()
    """Cost and call budgets (``budget_exceeded``)."""
    max_calls_per_turn: int | None = Field(default=None, ge=1)
    """Call cap per turn group (``call_limit_exceeded``)."""
    max_payload_bytes: int | None = Field(default=None, ge=1)


class Condition(_Strict):
    """One test of an adjuster: over an argument (dotted path) or a context field."""

    arg: str | None = None
    """Dotted path into the arguments (``payment.amount``)."""
    context: Literal["side_effect", "tool", "action", "agent", "tenant", "autonomy"] | None = None
    op: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "matches", "exists"] = "eq"
    value: Any = None


class Adjuster(_Strict):
    """Raise a call's risk when every condition holds. Adjusters never lower risk."""

    name: str = ""
    tools: tuple[str, ...] = ()
    """Tools it applies to; empty means every tool."""
    actions: tuple[str, ...] = ()
    when: tuple[Condition, ...] = ()
    raise_to: Risk | None = None
    raise_by: int = Field(default=0, ge=0, le=3)


GateOverrides = dict[Risk, dict[Autonomy, Gate]]


class Activation(_Strict):
    """Enablement of one tool for a profile, with policy overrides (seed: ToolActivation)."""

    tool: str
    enabled: bool = True
    actions: tuple[str, ...] | None = None
    """Allowed actions; ``None`` allows every action of the tool."""
    policy: dict[str, Any] = Field(default_factory=dict)
    """Values for the tool's policy model."""
    requires_confirmation: bool | None = None
    version: str | None = None
    """Pin a published version; ``None`` runs the latest published one."""
    gates: dict[str, Gate] = Field(default_factory=dict)
    """Per-action gate override that can only make the gate stricter."""
    limits: Limits | None = None


class Profile(_Strict):
    """What an agent may do: activations, scopes, autonomy, gates, limits."""

    name: str
    tenant_id: str = "default"
    description: str = ""
    autonomy: Autonomy = Autonomy.SUPERVISED
    scopes: tuple[str, ...] = ()
    activations: tuple[Activation, ...] = ()
    gates: GateOverrides = Field(default_factory=dict)
    adjusters: tuple[Adjuster, ...] = ()
    limits: Limits = Field(default_factory=Limits)
    origin: Literal["code", "config", "api"] = "code"
    """Who wrote it: library code, a config file, or a tenant through the REST API. A
    tenant's (``api``) host paths, networks and commands are bounded by the operator's
    ceiling (``toolkeeper.bounds``); a stored profile without an origin counts as ``api``."""

    def activation(self, tool: str) -> Activation | None:
        for act in self.activations:
            if act.tool == tool:
                return act
        return None


class AgentEndpoint(_Strict):
    """Where another agent's ``agent_call`` reaches this agent (SPEC §11).

    Only a ``published`` endpoint is callable, and only from the agent's own tenant.
    ``headers`` hold ``${secret:…}`` references only (optionally after an auth scheme:
    ``Bearer ${secret:bot/token}``), resolved at call time. The URL passes the SSRF guard on
    every call: public addresses, plus the private ``allowed_networks`` (a tenant writing
    over REST may list only networks within the operator's ``tenant_bounds.networks``).
    """

    transport: Literal["a2a", "http"]
    """``a2a``: the A2A protocol (JSON-RPC) at ``url``; ``http``: POST JSON to ``url``."""
    url: str = Field(min_length=1, max_length=2048)
    status: Literal["draft", "published", "disabled"] = "draft"
    timeout_s: float = Field(default=30.0, gt=0, le=300)
    headers: dict[str, str] = Field(default_factory=dict)
    allowed_networks: tuple[str, ...] = ()
    """Private CIDRs the URL may resolve into (``10.0.0.0/8``); empty: public only."""
    origin: Literal["code", "config", "api"] = "code"
    """Who wrote it; an ``api`` endpoint's networks are re-checked against the operator's
    ceiling on every call."""


_AGENT_IDS = uuid.UUID("6f1b2a52-6c1e-4c55-9d0e-7a3c2b9e4f10")


def agent_id(tenant_id: str, name: str) -> str:
    """The stable id of an agent (``target_agent_id``): a UUIDv5 of its tenant and name,
    the same in every process and database."""
    return str(uuid.uuid5(_AGENT_IDS, f"{tenant_id}/{name}"))


class Agent(_Strict):
    """A caller identity bound to one profile in one tenant."""

    name: str
    profile: str
    tenant_id: str = "default"
    description: str = ""
    endpoint: AgentEndpoint | None = None
    """Set when other agents of the tenant may call this one (``agent_call``)."""
