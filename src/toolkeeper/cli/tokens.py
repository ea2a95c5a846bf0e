"""``toolkeeper tokens create|revoke|list``: API tokens, shown once, stored hashed (SPEC §8)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
from toolkeeper.errors import OperationRefused
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
    tenant = state(ctx).tenant
    with gateway(ctx) as gw, _usage_errors():
        rec, plaintext = gw.identities.create_token(person(gw, token), tenant, role,
                                                    agent=agent, label=label)
    show_new_token(rec, plaintext, json_out)


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(help="The token's id (not the token itself).")],
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Revoke a token of the tenant at once (needs an admin --token). Revoking a revoked
    token succeeds and changes nothing."""
    with gateway(ctx) as gw:
        rec = gw.identities.revoke_token(person(gw, token), state(ctx).tenant, token_id)
    revoked_at = rec.revoked_at.isoformat() if rec.revoked_at else None
    if json_out:
        print_json({"id": token_id, "revoked": True, "revoked_at": revoked_at})
    else:
        out().print(f"revoked token {token_id} (at {revoked_at})", highlight=False)


@app.command("list")
def list_(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the tenant's tokens (ids and labels; token values are never stored)."""
    with gateway(ctx) as gw:
        recs = gw.identities.tokens(state(ctx).tenant)
    if json_out:
        print_json([plain(r) for r in recs])
        return
    table("tokens", ["id", "tenant", "role", "agent", "label", "created", "revoked"],
          [_row(r) for r in recs], empty="no tokens")


@contextmanager
def _usage_errors() -> Iterator[None]:
    """Invalid options (``invalid_arguments``) exit 2, as a usage error."""
    try:
        yield
    except OperationRefused as exc:
        if exc.reason != Reason.INVALID_ARGUMENTS:
            raise
        fail(exc.reason, exc.message, EXIT_USAGE)
