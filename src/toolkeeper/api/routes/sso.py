"""The console's single sign-on routes (not in the OpenAPI document; docs/identity-sso.md):
``GET /auth/login`` → the provider, ``GET /auth/callback`` → a session cookie and the console,
``POST /auth/logout`` (CSRF-checked) ends the session here, ``GET /auth/session`` says
whether single sign-on is configured and who is signed in (with the CSRF token the page
sends back) — 200 either way, so a page nobody signed in to logs no failed request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from toolkeeper.api.errors import ApiError, error_body
from toolkeeper.model.reasons import Reason

if TYPE_CHECKING:  # loaded only with single sign-on configured (PyJWT stays out otherwise)
    from toolkeeper.identity.sso import Sso, SsoRefused

router = APIRouter(include_in_schema=False)
LOGIN_COOKIE = "tk_sso_login"
CONSOLE = "/ui/"
_NO_STORE = {"Cache-Control": "no-store"}


def sso_for(gw: Any) -> Sso | None:
    """The relying party ``identity.sso`` configures on ``gw`` (``None`` without it)."""
    identity = getattr(gw, "identity_config", None)
    cfg = getattr(identity, "sso", None)
    if cfg is None:
        return None
    from toolkeeper.config.sso import compiled
    from toolkeeper.identity.sso import Sso

    backend = getattr(gw, "_secrets", None)  # the gateway's secrets backend, as bearers use it
    from toolkeeper.identity.upstream_person import PersonTokens

    sso = Sso(compiled(cfg), gw.store.sessions,
              secrets=backend.get_secret if backend is not None else None,
              people=PersonTokens(getattr(gw, "credentials", None)))
    tokens = getattr(getattr(gw, "upstreams", None), "tokens", None)
    if tokens is not None:  # an approver's expired token is refreshed at the console's client
        tokens.people.refresher = sso.refresh
    return sso


def sso_of(request: Request) -> Sso | None:
    sso: Sso | None = getattr(request.app.state, "sso", None)
    return sso


def _configured(request: Request) -> Sso:
    sso = sso_of(request)
    if sso is None:
        raise ApiError(404, Reason.NOT_FOUND, "single sign-on is not configured")
    return sso


def _refused(exc: SsoRefused) -> ApiError:
    return ApiError(exc.status, exc.reason, exc.message)


def cookie_name(sso: Sso, name: str) -> str:
    from toolkeeper.identity.sso_session import cookie_name as named

    return named(sso, name)


def _set_cookie(resp: Response, sso: Sso, name: str, value: str, max_age: int) -> None:
    resp.set_cookie(cookie_name(sso, name), value, max_age=max_age, path="/",
                    secure=sso.settings.secure, httponly=True, samesite="lax")


def _clear_cookie(resp: Response, sso: Sso, name: str) -> None:
    resp.delete_cookie(cookie_name(sso, name), path="/", secure=sso.settings.secure,
                       httponly=True, samesite="lax")


@router.get("/auth/login")
async def login(request: Request) -> Response:
    from toolkeeper.identity.sso import SsoRefused

    sso = _configured(request)
    try:
        login_id, url = await sso.start_login()
    except SsoRefused as exc:
        raise _refused(exc) from None
    resp = RedirectResponse(url, status_code=303, headers=_NO_STORE)
    _set_cookie(resp, sso, LOGIN_COOKIE, login_id, sso.settings.login_ttl_s)
    return resp


@router.get("/auth/callback")
async def callback(request: Request) -> Response:
    from toolkeeper.identity.sso import SsoRefused

    sso = _configured(request)
    params = {k: v for k, v in request.query_params.items()
              if k in ("code", "state", "iss", "error")}
    login_id = request.cookies.get(cookie_name(sso, LOGIN_COOKIE))
    try:
        session_id, row = await sso.finish_login(login_id, params)
    except SsoRefused as exc:
        resp: Response = JSONResponse(error_body(exc.reason, exc.message),
                                      status_code=exc.status, headers=_NO_STORE)
        _clear_cookie(resp, sso, LOGIN_COOKIE)
        return resp
    resp = RedirectResponse(CONSOLE, status_code=303, headers=_NO_STORE)
    _clear_cookie(resp, sso, LOGIN_COOKIE)
    _set_cookie(resp, sso, "tk_session", session_id, int(row.expires_at - row.created_at))
    return resp


@router.post("/auth/logout")
async def logout(request: Request) -> Response:
    from toolkeeper.identity.sso import SsoRefused
    from toolkeeper.identity.sso_session import check_csrf, session_row

    sso = _configured(request)
    session_id = request.cookies.get(cookie_name(sso, "tk_session"), "")
    try:
        row = await session_row(sso, session_id)
    except SsoRefused:  # ended already (expired, signed out): nothing to end or forge
        row = None
    try:
        if row is not None:
            check_csrf(sso, row, request.headers)
    except SsoRefused as exc:
        raise _refused(exc) from None
    if row is None:
        resp = JSONResponse({"signed_out": True, "logout_url": None}, headers=_NO_STORE)
        _clear_cookie(resp, sso, "tk_session")
        return resp
    await anyio.to_thread.run_sync(sso.store.delete, session_id)  # first: the provider
    if sso.people is not None:  # the person's kept token set goes too
        await anyio.to_thread.run_sync(sso.people.forget, row.tenant_id, row.issuer,
                                       row.subject)
    try:  # may be down, and sign-out must not wait on it
        end = await sso.logout_url()
    except SsoRefused:
        end = None
    resp = JSONResponse({"signed_out": True, "logout_url": end}, headers=_NO_STORE)
    _clear_cookie(resp, sso, "tk_session")
    return resp


@router.get("/auth/session")
async def session(request: Request) -> Response:
    sso = sso_of(request)
    session_id = request.cookies.get(cookie_name(sso, "tk_session"), "") if sso else ""
    if sso is None or not session_id:
        return JSONResponse({"sso": sso is not None, "signed_in": False}, headers=_NO_STORE)
    from toolkeeper.identity.sso import SsoRefused
    from toolkeeper.identity.sso_session import session_row

    try:
        row = await session_row(sso, session_id)
    except SsoRefused as exc:
        return JSONResponse({"sso": True, "signed_in": False, "reason": exc.reason},
                            headers=_NO_STORE)
    return JSONResponse({"sso": True, "signed_in": True, "name": row.name, "email": row.email,
                         "subject": row.subject, "issuer": row.issuer,
                         "tenant": row.tenant_id, "roles": row.roles.split(),
                         "csrf_token": row.csrf, "expires_at": row.expires_at},
                        headers=_NO_STORE)
