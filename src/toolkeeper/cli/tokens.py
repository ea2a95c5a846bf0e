"""``toolkeeper tokens create|revoke|list``: API tokens, shown once, stored hashed (SPEC §8)."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

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
    refusals,
    safe_url,
    state,
    table,
)
from toolkeeper.config.loader import load_file
from toolkeeper.errors import OperationRefused
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import Role
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.services.events import system_event
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
    local: Annotated[bool, typer.Option(
        "--local", help="Without a token: write straight to the store (--db, "
        "TOOLKEEPER_DATABASE_URL or the --config file's database:), for an operator who "
        "holds the database, e.g. after losing the admin token. Audited as token.created."
    )] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", envvar="TOOLKEEPER_CONFIG",
        help="With --local: the toolkeeper.yaml whose database: to use when --db is not "
        "given [env TOOLKEEPER_CONFIG].")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Create a token in the tenant and print it once (needs an admin --token, or --local)."""
    tenant = state(ctx).tenant
    if local:
        url = _local_url(ctx, config)
        with gateway(ctx, url) as gw, _usage_errors():
            rec, plaintext = _mint_locally(gw, tenant, role, agent, label)
    else:
        with gateway(ctx) as gw, _usage_errors():
            if not token:
                fail(Reason.UNAUTHENTICATED, "pass a valid --token (or set TOOLKEEPER_TOKEN); "
                     "lost the admin token? an operator holding the database can run "
                     "`toolkeeper tokens create --role admin --local`")
            rec, plaintext = gw.identities.create_token(person(gw, token), tenant, role,
                                                        agent=agent, label=label)
    show_new_token(rec, plaintext, json_out)


def _local_url(ctx: typer.Context, config: Path | None) -> str:
    """The store ``serve`` would open: ``--db``/``TOOLKEEPER_DATABASE_URL``, else the
    config file's ``database:``, else the default. A SQLite file must exist already: a
    mistyped path must not mint a token into a new, empty store."""
    st = state(ctx)
    url = st.db
    if not st.db_explicit and config is not None:
        with refusals():
            url = load_file(config).database or url
    try:
        parsed = make_url(url)
    except ArgumentError:
        fail(Reason.CONFIG_INVALID, "the database URL cannot be parsed", EXIT_USAGE)
    file = parsed.database
    if parsed.get_backend_name() == "sqlite" and file not in (None, "", ":memory:") \
            and not Path(file).exists():
        fail(Reason.NOT_FOUND, f"no database at {safe_url(url)} (pass --db, set "
             "TOOLKEEPER_DATABASE_URL or --config with a database:)", EXIT_USAGE)
    return url


def _mint_locally(gw: Gateway, tenant: str, role: Role, agent: str | None,
                  label: str) -> tuple[TokenRecord, str]:
    """Issue a token without a principal and audit it; if the audit cannot be written the
    token is revoked again (no unaudited token is left behind)."""
    rec, plaintext = gw.identities.issue_token(tenant, role, agent=agent, label=label)
    try:
        gw.store.audit.append([system_event(
            EventType.TOKEN_CREATED, tenant, agent=agent, token_id=rec.id, role=role.value,
            label=label, actor="local-operator", os_user=_os_user(), via="cli --local")])
    except BaseException:
        gw.store.tokens.revoke(rec.id)
        raise
    return rec, plaintext


def _os_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


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
