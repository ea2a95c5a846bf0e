"""Bearer tokens → principals. The tenant, the agent and the roles come only from the
server side (the token record), never from the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from toolkeeper.api.errors import ApiError
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason

_bearer = HTTPBearer(auto_error=False, description="A toolkeeper token (`tk_…`).")


async def gateway(request: Request) -> Gateway:
    """The app's gateway (async: FastAPI runs sync dependencies on a worker thread)."""
    return _gateway_of(request)


def _gateway_of(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


async def principal(request: Request,
                    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                    ) -> Principal:
    """The authenticated caller; 401 ``unauthenticated`` otherwise.

    A token this process already verified is answered from memory; others are looked up
    in the store on a worker thread (one look-up per token at a time).
    """
    if creds is None or creds.scheme.lower() != "bearer":
        raise ApiError(401, Reason.UNAUTHENTICATED, "a bearer token is required",
                       headers={"WWW-Authenticate": "Bearer"})
    gw = _gateway_of(request)
    found = await gw.authenticate_async(creds.credentials)
    if found is None:
        raise ApiError(401, Reason.UNAUTHENTICATED, "unknown or revoked token",
                       headers={"WWW-Authenticate": "Bearer"})
    return found


def require(p: Principal, *roles: Role) -> Principal:
    """403 ``forbidden`` unless ``p`` has one of ``roles`` (admin has them all)."""
    if not p.has_role(*roles):
        names = ", ".join(r.value for r in roles)
        raise ApiError(403, Reason.FORBIDDEN, f"this needs the role {names}")
    return p


def seen_as_agent(p: Principal) -> str | None:
    """The agent whose view of the registry ``p`` gets (an agent token: only what that agent
    may call), or ``None`` for people, who read the tenant's registry."""
    return p.agent if not p.has_role(Role.OPERATOR, Role.APPROVER) else None


Caller = Annotated[Principal, Depends(principal)]
GatewayDep = Annotated[Gateway, Depends(gateway)]
