"""``toolkeeper tokens create|revoke|list``: API tokens, shown once, stored hashed (SPEC §8)."""

from __future__ import annotations

from typing import Annotated

import typer

from toolkeeper.cli._common import (
    EXIT_USAGE,
    JsonFlag,
    TokenOption,
    fail,
    gateway,
    out,
    person,
    plain,
    print_json,
    state,
    table,
)
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.store.records import TokenRecord

app = typer.Typer(help="Create, revoke and list API tokens.", no_args_is_help=True)


def _row(rec: TokenRecord) -> list[object]:
    return [rec.id, rec.tenant_id, rec.role, rec.agent, rec.label,
            rec.created_at.isoformat("T", "seconds"),
            rec.revoked_at.isoformat("T", "seconds") if rec.revoked_at else None]


def show_new_token(rec: TokenRecord, token: str, json_out: bool) -> None:
    """Print a freshly created token: this is the only time it is ever shown."""
    if json_out:
        print_json({**plain(rec), "token": token})
        return
    out().print(f"created {rec.role} token [bold]{rec.id}[/] (label {rec.label!r}, "
                f"tenant {rec.tenant_id!r})", highlight=False)
    out().print("token (shown once, store it now):", highlight=False)
    out().print(token, markup=False, highlight=False, soft_wrap=True)


@app.command("create")
def create(
    ctx: typer.Context,
    role: Annotated[Role, typer.Option("--role", help="admin, approver, operator or agent.")],
    agent: Annotated[str | None, typer.Option(
        "--agent", help="The agent this token identifies (role agent).")] = None,
    label: Annotated[str, typer.Option("--label", help="Who holds it.")] = "",
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Create a token in the tenant and print it once (needs an admin --token)."""
    if (role is Role.AGENT) != (agent is not None):
        fail(Reason.INVALID_ARGUMENTS, "--agent is required for role agent, and only for it",
             EXIT_USAGE)
    tenant = state(ctx).tenant
    with gateway(ctx) as gw:
        _admin_of(person(gw, token, Role.ADMIN).tenant_id, tenant)
        if agent is not None and (tenant, agent) not in gw.catalog.agents:
            fail(Reason.NOT_FOUND, f"no agent {agent!r} in tenant {tenant!r}")
        rec, plaintext = gw.store.tokens.create(tenant_id=tenant, role=role.value, agent=agent,
                                                label=label)
    show_new_token(rec, plaintext, json_out)


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(help="The token's id (not the token itself).")],
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Revoke a token of the tenant at once (needs an admin --token)."""
    tenant = state(ctx).tenant
    with gateway(ctx) as gw:
        _admin_of(person(gw, token, Role.ADMIN).tenant_id, tenant)
        if not any(r.id == token_id for r in gw.store.tokens.list(tenant)):
            fail(Reason.NOT_FOUND, f"no token {token_id!r} in tenant {tenant!r}")
        if not gw.store.tokens.revoke(token_id):
            fail(Reason.INVALID_STATE, f"token {token_id!r} is already revoked")
    if json_out:
        print_json({"id": token_id, "revoked": True})
    else:
        out().print(f"revoked token {token_id}", highlight=False)


@app.command("list")
def list_(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the tenant's tokens (ids and labels; token values are never stored)."""
    with gateway(ctx) as gw:
        recs = gw.store.tokens.list(state(ctx).tenant)
    if json_out:
        print_json([plain(r) for r in recs])
        return
    table("tokens", ["id", "tenant", "role", "agent", "label", "created", "revoked"],
          [_row(r) for r in recs], empty="no tokens")


def _admin_of(admin_tenant: str, tenant: str) -> None:
    if admin_tenant != tenant:
        fail(Reason.FORBIDDEN, f"an admin of tenant {admin_tenant!r} cannot manage "
             f"tokens of tenant {tenant!r}")
