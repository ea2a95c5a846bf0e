"""A signed-in person's own token set, for token exchange on behalf of the human who
approved a call (``oauth.subject: approver``, RFC 8693).

At console sign-in (:mod:`.sso`) the person's access token (and refresh token, and expiry)
is kept sealed in the credential store under the pseudo-tenant ``person~{tenant}`` (which no
``${secret:…}`` reference of any tenant can reach), one set per person (issuer, subject):
the latest sign-in's. Sign-out deletes it. When that person approves a call, a copy is bound
to the approval (:meth:`PersonTokens.bind`), so a sign-out or an expired session later does
not break the approved call; the copy is deleted once the call that consumed the approval
has exchanged it (:meth:`PersonTokens.take`) — a call runs once. Values never reach a log,
a response or an upstream: only :mod:`.upstream` sends the access token, to the token
endpoint. The approval id of the call being executed rides in :data:`APPROVED` (set by the
pipeline once the approval is consumed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from toolkeeper.identity.upstream_subject import SubjectToken
from toolkeeper.secrets.credentials import TenantCredentials

log = logging.getLogger("toolkeeper.identity")
CONNECTOR = "sso-person"
MAX_TOKEN_CHARS = 16 * 1024

APPROVED: ContextVar[tuple[str, str] | None] = ContextVar("toolkeeper_approved_by",
                                                          default=None)
"""(tenant, approval id) of the call being executed, when it consumed an approval."""


@dataclass(frozen=True, slots=True)
class PersonToken:
    access: SubjectToken
    expires_at: float
    refresh: SubjectToken | None
    """The refresh token (hidden like the access token), if the IdP issued one."""


def _tenant(tenant_id: str) -> str:
    part = f"person~{tenant_id}"
    return part if len(part) <= 64 else "person~" + hashlib.sha256(
        tenant_id.encode()).hexdigest()[:40]


def _person(issuer: str, subject: str) -> str:
    return "s:" + hashlib.sha256(f"{issuer}\0{subject}".encode()).hexdigest()


def _approval(approval_id: str) -> str:
    return "a:" + hashlib.sha256(approval_id.encode()).hexdigest()


class PersonTokens:
    """The people's token sets in ``credentials`` (``None``: nothing can seal them, so
    nothing is kept and ``subject: approver`` calls stop)."""

    def __init__(self, credentials: TenantCredentials | None) -> None:
        self._credentials = credentials
        self.refresher: Callable[[str], Awaitable[dict[str, Any]]] | None = None
        """The console's client: a refresh token → a new token answer (bounded)."""

    def keep(self, tenant_id: str, issuer: str, subject: str, answer: dict[str, Any],
             now: float | None = None, *, key: str | None = None) -> bool:
        """Keep the access token of a token endpoint's ``answer`` (bounded; else nothing)."""
        access, expires_in = answer.get("access_token"), answer.get("expires_in", 300)
        if self._credentials is None or not isinstance(access, str) or not access \
                or len(access) > MAX_TOKEN_CHARS or isinstance(expires_in, bool) \
                or not isinstance(expires_in, int | float) or expires_in <= 0:
            return False
        refresh = answer.get("refresh_token")
        data = {"a": access, "exp": (now or time.time()) + min(float(expires_in), 86400.0),
                "r": refresh if isinstance(refresh, str) and len(refresh) <= MAX_TOKEN_CHARS
                else None, "iss": issuer, "sub": subject}
        return self._put(tenant_id, key or _person(issuer, subject), data)

    def forget(self, tenant_id: str, issuer: str, subject: str) -> None:
        """Sign-out: the person's set is deleted (approvals already bound keep theirs)."""
        if self._credentials is not None:
            self._credentials.delete(_tenant(tenant_id), CONNECTOR, _person(issuer, subject))

    def bind(self, tenant_id: str, issuer: str | None, subject: str | None,
             approval_id: str) -> bool:
        """Copy the approver's set to the approval; ``False`` when they have none (a pasted
        ``tk_`` token, or a bearer-token approver): its calls cannot use ``approver``."""
        if self._credentials is None or issuer is None or subject is None:
            return False
        data = self._get(tenant_id, _person(issuer, subject))
        return data is not None and self._put(tenant_id, _approval(approval_id), data)

    def of_approval(self, tenant_id: str, approval_id: str) -> PersonToken | None:
        data = self._get(tenant_id, _approval(approval_id))
        if data is None:
            return None
        who = {"tenant_id": tenant_id, "agent": f"approval:{approval_id}",
               "issuer": str(data["iss"])}
        refresh = data.get("r")
        return PersonToken(SubjectToken(str(data["a"]), **who),
                           float(data["exp"]),  # type: ignore[arg-type]
                           SubjectToken(refresh, **who) if isinstance(refresh, str) else None)

    async def refreshed(self, tenant_id: str, approval_id: str,
                        found: PersonToken) -> PersonToken | None:
        """The approval's set renewed with its refresh token (kept for the approval), else
        ``None``; said without a value."""
        if self.refresher is None or found.refresh is None:
            return None
        try:
            answer = await self.refresher(found.refresh.reveal())
        except Exception as exc:
            log.warning("an approver's token could not be refreshed: %s", type(exc).__name__)
            return None
        data = self._get(tenant_id, _approval(approval_id))
        if data is None:
            return None
        if not isinstance(answer.get("refresh_token"), str):  # not rotated: keep the old one
            answer = {**answer, "refresh_token": found.refresh.reveal()}
        kept = self.keep(tenant_id, str(data["iss"]), str(data["sub"]), answer,
                         key=_approval(approval_id))
        return self.of_approval(tenant_id, approval_id) if kept else None

    def take(self, tenant_id: str, approval_id: str) -> None:
        """The approved call is done with it: the copy goes."""
        if self._credentials is not None:
            self._credentials.delete(_tenant(tenant_id), CONNECTOR, _approval(approval_id))

    def _put(self, tenant_id: str, key: str, data: dict[str, object]) -> bool:
        assert self._credentials is not None
        try:
            self._credentials.put(_tenant(tenant_id), CONNECTOR, key, json.dumps(data))
            return True
        except Exception as exc:  # said without a value
            log.warning("a person's token set was not stored: %s", type(exc).__name__)
            return False

    def _get(self, tenant_id: str, key: str) -> dict[str, object] | None:
        if self._credentials is None:
            return None
        try:
            raw = self._credentials.get(_tenant(tenant_id), CONNECTOR, key)
            data = json.loads(raw) if raw else None
        except Exception as exc:  # tampered or unreadable: as if none
            log.warning("a person's token set is unreadable: %s", type(exc).__name__)
            return None
        return data if isinstance(data, dict) and isinstance(data.get("a"), str) else None
