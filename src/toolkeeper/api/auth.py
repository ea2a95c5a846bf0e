"""Bearer tokens → principals. The tenant, the agent and the roles come only from the
server side (the token record), never from the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from toolkeeper.api.errors import ApiError
from toolkeeper.gateway import Gateway
from toolkeeper.identity.refused import TokenRefused
from toolkeeper.identity.upstream_subject import carry
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason

_bearer = HTTPBearer(auto_error=False, description="A toolkeeper token (`tk_…`) or an OAuth "
                     "access token of a configured identity provider.")


async def gateway(request: Request) -> Gateway:
    """The app's gateway (async: FastAPI runs sync dependencies on a worker thread)."""
    return _gateway_of(request)


def _gateway_of(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


async def principal(request: Request,
                    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                    ) -> Principal:
    """The authenticated caller; 401 ``unauthenticated`` (with the RFC 6750 challenge that
    names this resource's metadata) otherwise.

    A token this process already verified is answered from memory; others are verified
    once (a ``tk_…`` token in the store on a worker thread, an OAuth access token against
    its issuer's keys).
    """
    if creds is not None:
        return await authenticate_bearer(_gateway_of(request), creds)
    found = await session_principal(request)
    if found is not None:
        return found
    raise ApiError(401, Reason.UNAUTHENTICATED, "a bearer token is required",
                   headers={"WWW-Authenticate": _gateway_of(request).bearers.challenge()})


async def session_principal(request: Request) -> Principal | None:
    """The signed-in person of the console's session cookie (single sign-on), CSRF-checked
    on unsafe methods; ``None`` without SSO or a cookie; 401/403 for a bad one."""
    sso = getattr(request.app.state, "sso", None)  # set by create_app (api/routes/sso.py)
    if sso is None:  # without single sign-on nothing of it is loaded
        return None
    from toolkeeper.identity.sso import SsoRefused
    from toolkeeper.identity.sso_session import authenticate, cookie_name

    cookie = request.cookies.get(cookie_name(sso, "tk_session"))
    if cookie is None:
        return None
    try:
        return await authenticate(sso, cookie, request.method, request.headers)
    except SsoRefused as exc:
        raise ApiError(exc.status, exc.reason, exc.message) from None


async def authenticate_bearer(gw: Gateway, creds: HTTPAuthorizationCredentials) -> Principal:
    """The principal of an ``Authorization: Bearer`` token; 401 ``invalid_token`` (or 403
    for a valid token that maps to nobody here) saying why not."""
    try:
        who = await gw.authenticate_bearer(creds.credentials)
    except TokenRefused as refused:
        raise ApiError(refused.status, refused.reason, refused.message, headers={
            "WWW-Authenticate": gw.bearers.challenge(refused=refused)}) from None
    carry(who, creds.credentials)  # token exchange for upstreams (never sent upstream)
    return who


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
