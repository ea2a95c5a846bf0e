"""A console request's session cookie → a principal, with CSRF checks on unsafe methods.

The tenant, roles, subject and name come only from the stored session (written at sign-in
from the verified ID token), never from the request. A request whose method changes state
(anything but GET, HEAD, OPTIONS) must carry ``X-CSRF-Token`` equal to the session's token
AND come from the console's own origin (``Origin``, else ``Referer``): 403 ``csrf_failed``
otherwise. An expired session answers 401 ``session_expired``; an unknown one 401
``unauthenticated``. Bearer-token requests never reach here (they carry no ambient
credential, so CSRF cannot use them).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from urllib.parse import urlsplit

import anyio

from toolkeeper.identity.sso import Sso, SsoRefused
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.store.sessions import SessionRow

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_HEADER = "x-csrf-token"
MAX_COOKIE_CHARS = 100


def cookie_name(sso: Sso, base: str = "tk_session") -> str:
    """``__Host-`` prefixed over TLS (Secure, Path=/, no Domain: bound to this origin)."""
    return f"__Host-{base}" if sso.settings.secure else base


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_origin(sso: Sso, headers: Mapping[str, str]) -> bool:
    """The request comes from the console's origin (``Origin``, else ``Referer``)."""
    mine = _origin(sso.settings.public_url)
    origin = headers.get("origin")
    if origin is not None:
        return origin.lower() == mine
    referer = headers.get("referer")
    return referer is not None and _origin(referer) == mine


def check_csrf(sso: Sso, row: SessionRow, headers: Mapping[str, str]) -> None:
    token = headers.get(CSRF_HEADER, "")
    if not token or not hmac.compare_digest(token.encode(), row.csrf.encode()):
        raise SsoRefused("a console request that changes state needs the session's "
                         "X-CSRF-Token", status=403, reason=Reason.CSRF_FAILED)
    if not same_origin(sso, headers):
        raise SsoRefused("a console request that changes state must come from the "
                         "console's origin", status=403, reason=Reason.CSRF_FAILED)


def principal_of_row(row: SessionRow) -> Principal:
    return Principal(name=row.name, tenant_id=row.tenant_id,
                     roles=frozenset(Role(r) for r in row.roles.split()),
                     subject=row.subject, issuer=row.issuer)


async def session_row(sso: Sso, session_id: str) -> SessionRow:
    """The live session of cookie value ``session_id`` (its idle expiry moved forward);
    :class:`SsoRefused` 401 when there is none."""
    if not session_id or len(session_id) > MAX_COOKIE_CHARS:
        raise SsoRefused("no console session", status=401, reason=Reason.UNAUTHENTICATED)
    now = sso.clock()
    row = await anyio.to_thread.run_sync(lambda: sso.store.get(session_id, now))
    if row is None:
        raise SsoRefused("the console session has ended (expired or signed out): sign in "
                         "again", status=401, reason=Reason.SESSION_EXPIRED)
    idle = sso.settings.idle_s
    if now - row.last_seen >= min(60.0, idle / 4):  # one write a minute at most
        await anyio.to_thread.run_sync(
            lambda: sso.store.touch(session_id, now, min(now + idle, row.expires_at)))
    return row


async def authenticate(sso: Sso, session_id: str, method: str,
                       headers: Mapping[str, str]) -> Principal:
    """The principal of a cookie-authenticated request (CSRF checked when unsafe)."""
    row = await session_row(sso, session_id)
    if method.upper() not in SAFE_METHODS:
        check_csrf(sso, row, headers)
    return principal_of_row(row)
