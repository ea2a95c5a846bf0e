"""``toolkeeper agents list|endpoint-show|endpoint-set|endpoint-remove``: the tenant's agents
and the endpoints other agents reach them at with ``agent_call``.

Writing an endpoint takes an admin token of the tenant and follows the same rules as
``PUT /agents/{name}/endpoint`` (``IdentityService.set_endpoint``): headers hold
``${secret:…}`` references only, private networks stay within the operator's
``tenant_bounds.networks``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from toolkeeper.cli._common import (
    JsonFlag,
    TokenOption,
    fail,
    fields_table,
    gateway,
    person,
    print_json,
    state,
    table,
)
from toolkeeper.model.enums import Role
from toolkeeper.model.profile import Agent, AgentEndpoint, agent_id
from toolkeeper.model.reasons import Reason

app = typer.Typer(help="List agents and manage their agent_call endpoints.",
                  no_args_is_help=True)


def _endpoint(agent: Agent) -> dict[str, Any]:
    data: dict[str, Any] = {"agent": agent.name, "agent_id": agent_id(agent.tenant_id,
                                                                      agent.name)}
    if agent.endpoint is not None:
        data.update(agent.endpoint.model_dump(mode="json"))
    return data


@app.command("list")
def list_(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the tenant's agents with their profile and endpoint."""
    with gateway(ctx) as gw:
        agents = gw.identities.agents(state(ctx).tenant)
    rows = [{"name": a.name, "profile": a.profile, **_endpoint(a)} for a in agents]
    if json_out:
        print_json(rows)
        return
    table("agents", ["name", "id", "profile", "transport", "url", "status"],
          [[r["name"], r["agent_id"], r["profile"], r.get("transport", ""), r.get("url", ""),
            r.get("status", "")] for r in rows], empty="no agents")


@app.command("endpoint-show")
def endpoint_show(ctx: typer.Context,
                  name: Annotated[str, typer.Argument(help="Agent name.")],
                  json_out: JsonFlag = False) -> None:
    """Show one agent's endpoint (``not_found`` when it has none)."""
    with gateway(ctx) as gw:
        found = [a for a in gw.identities.agents(state(ctx).tenant) if a.name == name]
    if not found or found[0].endpoint is None:
        fail(Reason.NOT_FOUND, f"agent {name!r} has no endpoint")
    data = _endpoint(found[0])
    if json_out:
        print_json(data)
        return
    fields_table(f"agent {name} endpoint", list(data.items()))


def _pairs(values: list[str], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(Reason.INVALID_ARGUMENTS, f"{option} takes NAME=VALUE, not {item[:100]!r}", 2)
        pairs[key.strip()] = value
    return pairs


@app.command("endpoint-set")
def endpoint_set(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Agent name.")],
    url: Annotated[str, typer.Option("--url", help="The agent's http(s) URL.")],
    transport: Annotated[Literal["a2a", "http"], typer.Option(
        "--transport", help="a2a (A2A JSON-RPC) or http (POST JSON).")] = "http",
    status: Annotated[Literal["draft", "published", "disabled"], typer.Option(
        "--status", help="Only published endpoints are callable.")] = "draft",
    timeout_s: Annotated[float, typer.Option("--timeout", help="Seconds.")] = 30.0,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="NAME=${secret:connector/key} (repeatable).")] = None,
    network: Annotated[list[str] | None, typer.Option(
        "--network", help="A private CIDR the URL may resolve into (repeatable).")] = None,
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Register or replace an agent's endpoint (admin)."""
    try:
        endpoint = AgentEndpoint(transport=transport, url=url, status=status,
                                 timeout_s=timeout_s, headers=_pairs(header or [], "--header"),
                                 allowed_networks=tuple(network or ()))
    except ValueError as exc:
        fail(Reason.INVALID_ARGUMENTS, str(exc).splitlines()[0], 2)
    with gateway(ctx) as gw:
        by = person(gw, token, Role.ADMIN)
        saved = gw.identities.set_endpoint(by, by.tenant_id, name, endpoint)
    data = _endpoint(saved)
    if json_out:
        print_json(data)
        return
    fields_table(f"agent {name} endpoint", list(data.items()))


@app.command("endpoint-remove")
def endpoint_remove(ctx: typer.Context,
                    name: Annotated[str, typer.Argument(help="Agent name.")],
                    token: TokenOption = None) -> None:
    """Remove an agent's endpoint (admin); it can no longer be called."""
    with gateway(ctx) as gw:
        by = person(gw, token, Role.ADMIN)
        gw.identities.set_endpoint(by, by.tenant_id, name, None)
