"""Access over REST (SPEC §7, §8): who am I (`/me`), tokens, write-only credentials and tenants.

Tokens are shown once, on creation; listings never carry secrets. Credential values are
sealed by the embedded secrets store and never come back out. Credential names are per
tenant (:mod:`toolkeeper.secrets.credentials`): every route sees only the caller's tenant's
rows, so two tenants may each have ``crm/api_key`` and no answer hints at another tenant's
names. ``/tenants`` is for system admins: admin tokens of the system tenant
(``app.state.system_tenant``, default ``system``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar, TypeVarTuple

import anyio
from fastapi import Path as PathParam
from fastapi import Request, Response
from pydantic import Field

from toolkeeper.api.auth import Caller, GatewayDep
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import (
    CredentialOut,
    MeOut,
    NewTenantOut,
    NewTokenOut,
    TenantOut,
    TokenOut,
)
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import Body
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.store.records import TokenRecord

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
router = RouteTable(tags=["access"], responses=ERRORS)
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
"""Names of agents, tenants (path-safe, no '/')."""
SYSTEM_TENANT_DEFAULT = "system"


async def blocking(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """Run a store operation on a worker thread."""
    return await anyio.to_thread.run_sync(fn, *args)


class TenantBody(Body):
    """``POST /tenants``: a new tenant, with its first admin token."""

    id: str = Field(pattern=NAME)
    name: str | None = Field(default=None, max_length=200)


class CredentialBody(Body):
    """``PUT /credentials/{connector}/{key}``: the value (write-only)."""

    value: str = Field(min_length=1, max_length=65_536)


class TokenBody(Body):
    """``POST /tokens``: a token of the caller's tenant."""

    role: Role
    agent: str | None = Field(default=None, max_length=200)
    label: str = Field(default="", max_length=200)


# tokens -------------------------------------------------------------------------------

@router.get("/me", response_model=MeOut, summary="Who the calling token is (any token)")
async def me(caller: Caller) -> dict[str, Any]:
    return {"name": caller.name, "tenant_id": caller.tenant_id,
            "roles": sorted(r.value for r in caller.roles), "agent": caller.agent}


def token_out(rec: TokenRecord) -> dict[str, Any]:
    """A token record without its secret (the plaintext is never stored)."""
    return {"id": rec.id, "tenant_id": rec.tenant_id, "role": rec.role, "agent": rec.agent,
            "label": rec.label, "created_at": rec.created_at.isoformat(),
            "revoked_at": rec.revoked_at.isoformat() if rec.revoked_at else None}


@router.post("/tokens", status_code=201, response_model=NewTokenOut,
             summary="Create a token; the response shows it once")
async def create_token(body: TokenBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    rec, token = await blocking(lambda: gw.identities.create_token(
        caller, caller.tenant_id, body.role, agent=body.agent, label=body.label))
    return {**token_out(rec), "token": token}


@router.get("/tokens", response_model=list[TokenOut],
            summary="Tokens of the tenant (never their secrets)")
async def list_tokens(gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    recs = await blocking(gw.identities.list_tokens, caller, caller.tenant_id)
    return [token_out(r) for r in recs]


@router.delete("/tokens/{token_id}", status_code=204, summary="Revoke a token (admin)")
async def revoke_token(token_id: str, gw: GatewayDep, caller: Caller) -> Response:
    await blocking(gw.identities.revoke_token, caller, caller.tenant_id, token_id)
    return Response(status_code=204)


# credentials --------------------------------------------------------------------------

ConnectorName = Annotated[str, PathParam(pattern=NAME)]
KeyName = Annotated[str, PathParam(pattern=NAME)]


@router.put("/credentials/{connector}/{key}", status_code=204,
            summary="Store a credential of the tenant (write-only, encrypted at rest)")
async def put_credential(connector: ConnectorName, key: KeyName, body: CredentialBody,
                         gw: GatewayDep, caller: Caller) -> Response:
    await blocking(lambda: gw.identities.put_credential(caller, caller.tenant_id, connector,
                                                        key, body.value))
    return Response(status_code=204)


@router.get("/credentials", response_model=list[CredentialOut],
            summary="Credential names of the tenant (never values)")
async def list_credentials(gw: GatewayDep, caller: Caller) -> list[dict[str, str]]:
    names = await blocking(gw.identities.list_credentials, caller, caller.tenant_id)
    return [{"connector": c, "key": k} for c, k in names]


@router.delete("/credentials/{connector}/{key}", status_code=204,
               summary="Delete a credential of the tenant")
async def delete_credential(connector: ConnectorName, key: KeyName, gw: GatewayDep,
                            caller: Caller) -> Response:
    await blocking(gw.identities.delete_credential, caller, caller.tenant_id, connector, key)
    return Response(status_code=204)


# tenants ------------------------------------------------------------------------------

def system_tenant(request: Request) -> str:
    """The tenant whose tokens act for the whole gateway (``app.state.system_tenant``)."""
    system: str = getattr(request.app.state, "system_tenant", SYSTEM_TENANT_DEFAULT)
    return system


def _system_admin(request: Request, caller: Principal) -> None:
    if not caller.has_role(Role.ADMIN) or caller.tenant_id != system_tenant(request):
        raise ApiError(403, Reason.FORBIDDEN, "tenants are managed by system admins only")


@router.get("/tenants", response_model=list[TenantOut], summary="Every tenant (system admin)")
async def list_tenants(request: Request, gw: GatewayDep, caller: Caller) -> list[dict[str, str]]:
    _system_admin(request, caller)
    return [{"id": t, "name": name} for t, name in await blocking(gw.identities.tenants)]


@router.post("/tenants", status_code=201, response_model=NewTenantOut,
             summary="Create a tenant and its first admin token, shown once (system admin)")
async def create_tenant(body: TenantBody, request: Request, gw: GatewayDep,
                        caller: Caller) -> dict[str, Any]:
    _system_admin(request, caller)
    rec, token = await blocking(gw.identities.create_tenant, body.id, body.name)
    return {"id": body.id, "name": body.name or body.id,
            "admin_token": {**token_out(rec), "token": token}}
