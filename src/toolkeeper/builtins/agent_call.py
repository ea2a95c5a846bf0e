"""Built-in ``agent_call`` (and the ``agent_call`` implementation type): one synchronous
run of another agent of the caller's tenant, through the endpoint that agent registered.

The target is ``target_agent_slug`` (the agent's name) or ``target_agent_id`` (its stable id,
:func:`toolkeeper.model.profile.agent_id`): exactly one. The built-in takes it from the
arguments; a tool of type ``agent_call`` fixes it in its implementation config
(``{target_agent_slug: …}`` or ``{target_agent_id: …}``, optional ``timeout_s``). Only a
``published`` endpoint of an agent of the caller's own tenant is callable; anything else
is ``agent_not_found``, one answer that reveals nothing about other tenants.

Payload: ``input`` (or its alias ``text``; not both), ``messages`` (a list), ``context``
(any JSON), at least one of ``input``/``text``/``messages``. Result (SPEC §11):
``{mode: "sync", target_agent_id, target_agent_slug, run_id, status, output, context,
error}``.

Chains: every call knows the agents it passed through and hands them on, the caller
appended. The gateway knows them from its own record of the agent calls in flight
(:mod:`toolkeeper.providers.agent_chains`, a table of the store, so every worker and
replica on it sees it: a call made by an agent that an ``agent_call`` is running belongs to
that chain), whether or not the callee sends the REST header
``Toolkeeper-Agent-Chain`` back; a header sent is one more chain to check, never a way to
shorten one. A target already on any of them stops with ``agent_call_cycle``, a longest
chain beyond the policy's ``max_depth`` with ``agent_call_depth`` — both before anything is
sent.

Secrets: the endpoint's header references resolve in the scope of whoever wrote the
endpoint (:func:`endpoint_writer`), never of the tool carrying the call: a tenant-written
endpoint reaches that tenant's own credentials only, also through the global built-in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Annotated, Any, ClassVar

from pydantic import Field

from toolkeeper.bounds import AtMost, Excess, HostNetworks, Subset, TenantBounds
from toolkeeper.builtins._agent_transport import (
    CHAIN_HEADER,
    Outbound,
    Reply,
    parse_chain,
    send_a2a,
    send_http,
)
from toolkeeper.errors import ConfigError, OperationRefused, ToolError, UserError
from toolkeeper.model.call import PreviewResult
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.profile import Agent, AgentEndpoint, agent_id
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.netguard import NetGuard
from toolkeeper.providers.agent_chains import InFlight
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool
from toolkeeper.secrets.base import SECRET_REF_RE, only_references

_TARGET = {"type": "string", "minLength": 1, "maxLength": 200}
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "target_agent_id": _TARGET, "target_agent_slug": _TARGET,
        "input": {"description": "What to ask the agent (text or JSON)."},
        "text": {"type": "string", "description": "Alias of input."},
        "messages": {"type": "array", "maxItems": 1000},
        "context": {"description": "Extra JSON context handed to the agent."},
    },
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"mode": {"const": "sync"}, "target_agent_id": {"type": "string"},
                   "target_agent_slug": {"type": "string"},
                   "run_id": {"type": ["string", "null"]}, "status": {"type": "string"},
                   "output": {}, "context": {}, "error": {}},
    "required": ["mode", "target_agent_id", "target_agent_slug", "run_id", "status",
                 "output", "context", "error"],
}
_NOT_FOUND = "no published agent endpoint by that id or slug in this tenant"


class AgentCallPolicy(ToolPolicy):
    """Which agents ``agent_call`` may reach, how deep a chain may go, and its caps."""

    allowed_agents: Annotated[tuple[str, ...] | None, Subset(open="none")] = None
    """Agent names (slugs) this policy may call; ``None``: any published agent of the
    tenant."""
    max_depth: Annotated[int, AtMost()] = Field(default=4, ge=1, le=32)
    """Longest chain of agent calls (this one included): beyond, ``agent_call_depth``."""
    timeout_s: Annotated[float, AtMost()] = Field(default=60.0, gt=0, le=300)
    """Ceiling of the run's deadline (the endpoint's own ``timeout_s`` applies if lower)."""
    max_response_bytes: Annotated[int, AtMost()] = Field(default=1 << 20, ge=1, le=64 << 20)
    """A bigger reply fails the call with ``output_too_large``."""


def endpoint_problems(endpoint: AgentEndpoint) -> list[tuple[str, str, str]]:
    """What is wrong with an endpoint anyone writes: ``(reason, pointer, message)`` each.
    Headers hold ``${secret:…}`` references only; the URL is http(s); the networks parse."""
    found: list[tuple[str, str, str]] = []
    for name, value in endpoint.headers.items():
        if not only_references(value):
            found.append((Reason.SECRET_LITERAL_REFUSED, f"/endpoint/headers/{name}",
                          "a header holds ${secret:connector/key} references only"))
    if not endpoint.url.lower().startswith(("http://", "https://")):
        found.append((Reason.INVALID_ARGUMENTS, "/endpoint/url", "the URL must be http(s)"))
    elif "@" in endpoint.url.split("/", 3)[2]:
        found.append((Reason.SECRET_LITERAL_REFUSED, "/endpoint/url", "credentials in the "
                      "URL are not allowed: send them in a header as ${secret:…}"))
    try:
        NetGuard(allowed_networks=endpoint.allowed_networks)
    except ConfigError as exc:
        found.append((Reason.INVALID_ARGUMENTS, "/endpoint/allowed_networks", str(exc)))
    return found


def refuse_endpoint(endpoint: AgentEndpoint) -> None:
    """Raise ``OperationRefused`` (the first problem's reason, every problem listed) when
    :func:`endpoint_problems` finds any: the write-time check of REST, config and code."""
    found = endpoint_problems(endpoint)
    if found:
        raise OperationRefused(found[0][0], f"the agent endpoint is invalid: {found[0][2]}",
                               errors=[{"pointer": p, "message": m} for _, p, m in found])


async def check_endpoint_destination(endpoint: AgentEndpoint) -> None:
    """Refuse (``ToolDenied``, ``address_not_allowed``) an endpoint whose host is a refused
    address however spelled (``localhost``, ``127.1``, ``2130706433``…), resolved now as
    the call's transport will resolve it: the write-time check that tells the admin at once
    (every call is checked again when it connects)."""
    await NetGuard(allowed_networks=endpoint.allowed_networks).check_destination(endpoint.url)


def endpoint_excess(endpoint: AgentEndpoint, bounds: TenantBounds, *,
                    at: str = "/endpoint") -> list[Excess]:
    """The endpoint's networks beyond the operator's ceiling (for tenant-written ones)."""
    marker = HostNetworks()
    return [Excess(f"{at}/allowed_networks/{i}", f"allowed_networks: {problem}")
            for i, net in enumerate(endpoint.allowed_networks)
            if (problem := marker.outside(net, bounds.ceiling(marker))) is not None]


class AgentCallTool(BaseTool):
    """Run another agent of this tenant once, synchronously, and return what it answered."""

    tool_name = "agent_call"
    description = "Call another agent of this tenant (by id or slug) and return its answer."
    capabilities = ("network", "agents")
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(description=description, input_schema=INPUT_SCHEMA,
                          output_schema=OUTPUT_SCHEMA, supports_preview=True),
    }
    risk_default = Risk.MEDIUM
    side_effect = SideEffect.IRREVERSIBLE  # an agent run can do anything
    execution = ExecutionMeta(timeout_s=310.0, max_retries=0)
    policy_model = AgentCallPolicy

    def __init__(self, *, target: Mapping[str, Any] | None = None) -> None:
        """``target``: the implementation config of an ``agent_call`` tool (fixed target):
        exactly one of ``target_agent_id``/``target_agent_slug``, a string."""
        if target is not None:
            named = [k for k in ("target_agent_id", "target_agent_slug")
                     if isinstance(target.get(k), str) and target[k]]
            if len(named) != 1:
                raise UserError("an agent_call tool names exactly one of target_agent_id "
                                "and target_agent_slug in its implementation config")
        self._target = dict(target) if target is not None else None

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        policy = _policy(self, action, context)
        agent, endpoint, payload = self._prepare(request, policy, context)
        writer = endpoint_writer(endpoint)
        headers: dict[str, str] = {}
        for name, value in endpoint.headers.items():
            headers[name] = await _resolved(value, context, writer)
        timeout = min(policy.timeout_s, endpoint.timeout_s, self._timeout(policy))
        path = _path(context)
        out = Outbound(url=endpoint.url, headers=headers, input=payload[0],
                       messages=payload[1], context=payload[2], chain=path, timeout_s=timeout,
                       max_bytes=policy.max_response_bytes)
        guard = NetGuard(allowed_networks=endpoint.allowed_networks)
        send = send_a2a if endpoint.transport == "a2a" else send_http
        record = context.agent_calls.running(context.tenant_id, agent.name, path, timeout) \
            if isinstance(context.agent_calls, InFlight) else nullcontext()
        try:
            with record:
                async with asyncio.timeout(timeout):
                    reply = await send(guard, out)
        except TimeoutError:
            raise ToolError(Reason.TIMEOUT, f"the agent did not answer within {timeout}s",
                            retryable=True, may_have_executed=True) from None
        return _result(agent, reply)

    async def preview(  # type: ignore[override]
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> PreviewResult:
        """The agent, transport and URL the call would reach; nothing is sent."""
        agent, endpoint, _ = self._prepare(request, _policy(self, action, context), context)
        return PreviewResult(
            summary=f"call agent {agent.name} ({endpoint.transport}) at {endpoint.url}",
            data={"target_agent_id": agent_id(agent.tenant_id, agent.name),
                  "target_agent_slug": agent.name, "transport": endpoint.transport,
                  "url": endpoint.url, "chain": list(_path(context)),
                  "arguments": {k: v for k, v in request.items()
                                if k in ("input", "text", "messages", "context")}})

    def _timeout(self, policy: AgentCallPolicy) -> float:
        value = (self._target or {}).get("timeout_s")
        return float(value) if isinstance(value, int | float) and value > 0 else policy.timeout_s

    def _prepare(self, request: dict[str, Any], policy: AgentCallPolicy,
                 ctx: ToolContext) -> tuple[Agent, AgentEndpoint, tuple[Any, Any, Any]]:
        """Arguments, target, chain and endpoint checked; everything a call needs."""
        by_id, by_slug = self._target_of(request, ctx)
        payload = _payload(request, ctx)
        agent = _find(ctx, by_id, by_slug)
        if policy.allowed_agents is not None and agent.name not in policy.allowed_agents:
            ctx.deny(Reason.AGENT_NOT_ALLOWED,
                     f"agent {agent.name!r} is not in this agent_call allow-list")
        for known in _paths(ctx):
            if agent.name in known or len(set(known)) < len(known):
                ctx.deny(Reason.AGENT_CALL_CYCLE, f"agent {agent.name!r} is already on the "
                         f"call chain {' -> '.join(known)}", chain=list(known))
        path = _path(ctx)
        if len(path) > policy.max_depth:
            ctx.deny(Reason.AGENT_CALL_DEPTH, f"the call chain would be {len(path)} agent "
                     f"calls deep; the limit is {policy.max_depth}", depth=len(path))
        endpoint = agent.endpoint
        assert endpoint is not None
        problems = endpoint_problems(endpoint)
        if problems:
            ctx.deny(problems[0][0], f"agent {agent.name!r}: {problems[0][2]}")
        bounds = ctx.tenant_bounds if isinstance(ctx.tenant_bounds, TenantBounds) \
            else TenantBounds()
        excess = endpoint_excess(endpoint, bounds) if endpoint.origin == "api" else []
        if excess:
            ctx.deny(Reason.POLICY_EXCEEDS_BOUNDS, f"agent {agent.name!r}: "
                     f"{excess[0].message}")
        NetGuard(allowed_networks=endpoint.allowed_networks).check_url(endpoint.url)
        return agent, endpoint, payload

    def _target_of(self, request: dict[str, Any],
                   ctx: ToolContext) -> tuple[str | None, str | None]:
        given = {k: request[k] for k in ("target_agent_id", "target_agent_slug")
                 if request.get(k) is not None}
        if self._target is not None:
            if given:
                ctx.deny(Reason.INVALID_ARGUMENTS, "this tool's target agent is fixed; "
                         "leave out target_agent_id and target_agent_slug")
            given = {k: self._target[k] for k in ("target_agent_id", "target_agent_slug")
                     if self._target.get(k) is not None}
        if len(given) != 1 or not all(isinstance(v, str) and v for v in given.values()):
            ctx.deny(Reason.INVALID_ARGUMENTS, "name the target agent by exactly one of "
                     "target_agent_id and target_agent_slug")
        return given.get("target_agent_id"), given.get("target_agent_slug")


def _policy(tool: AgentCallTool, action: str, ctx: ToolContext) -> AgentCallPolicy:
    if not isinstance(ctx.policy, AgentCallPolicy):
        # an activation may hand over the base model: re-read its values under ours
        ctx.policy = AgentCallPolicy.model_validate(ctx.policy.model_dump(exclude_unset=True))
    return tool.checked_policy(action, ctx, AgentCallPolicy)


def _payload(request: dict[str, Any], ctx: ToolContext) -> tuple[Any, Any, Any]:
    """``(input, messages, context)`` from the aliases."""
    if "input" in request and "text" in request:
        ctx.deny(Reason.INVALID_ARGUMENTS, "give input or its alias text, not both")
    value = request.get("input", request.get("text"))
    messages = request.get("messages")
    if messages is not None and not isinstance(messages, list):
        ctx.deny(Reason.INVALID_ARGUMENTS, "messages must be a list")
    if value is None and messages is None:
        ctx.deny(Reason.INVALID_ARGUMENTS, "give input (or text) or messages")
    return value, messages, request.get("context")


def _find(ctx: ToolContext, by_id: str | None, by_slug: str | None) -> Agent:
    """The caller's tenant's agent with a published endpoint, or ``agent_not_found``."""
    for (tenant, name), agent in ctx.agents.items():
        if tenant != ctx.tenant_id or not isinstance(agent, Agent):
            continue
        if name != by_slug and (by_id is None or agent_id(tenant, name) != by_id):
            continue
        if agent.endpoint is not None and agent.endpoint.status == "published":
            return agent
        break
    ctx.deny(Reason.AGENT_NOT_FOUND, _NOT_FOUND)


def _paths(ctx: ToolContext) -> list[tuple[str, ...]]:
    """Every chain this call may be part of, this call's agent last: the one the request
    carries (the REST header) and, from the gateway's own record, the chain of every call
    in flight that is running this call's agent."""
    known = [tuple(ctx.chain)]
    if isinstance(ctx.agent_calls, InFlight) and ctx.agent:
        known += ctx.agent_calls.chains_into(ctx.tenant_id, ctx.agent)
    return [(*chain, ctx.agent) if ctx.agent else chain for chain in known]


def _path(ctx: ToolContext) -> tuple[str, ...]:
    """The chain handed on: the longest this call may be part of (:func:`_paths`)."""
    return max(_paths(ctx), key=len)


def endpoint_writer(endpoint: AgentEndpoint) -> str | None:
    """Whose scope the endpoint's secret references resolve in: its writer's ``origin``
    (``api``: the tenant admin who registered it; ``code``/``config``: the operator)."""
    return endpoint.origin


async def _resolved(value: str, ctx: ToolContext, written_by: str | None) -> str:
    parts: list[str] = []
    last = 0
    for match in SECRET_REF_RE.finditer(value):
        secret = await ctx.secret(match.group(2), match.group(1), written_by=written_by)
        parts += [value[last:match.start()], secret]
        last = match.end()
    return "".join([*parts, value[last:]])


def _result(agent: Agent, reply: Reply) -> dict[str, Any]:
    return {"mode": "sync", "target_agent_id": agent_id(agent.tenant_id, agent.name),
            "target_agent_slug": agent.name, "run_id": reply.run_id, "status": reply.status,
            "output": reply.output, "context": reply.context, "error": reply.error}


__all__ = [
    "CHAIN_HEADER",
    "AgentCallPolicy",
    "AgentCallTool",
    "check_endpoint_destination",
    "endpoint_excess",
    "endpoint_problems",
    "parse_chain",
    "refuse_endpoint",
]
