"""The calling agent's own OAuth access token, carried from the face that verified it to the
upstream token manager (token exchange, RFC 8693, ``subject: agent``) — and nowhere else.

The REST and ``/mcp`` faces call :func:`carry` once they have an OAuth principal; the token
rides in a context variable of the request's task (copied into the tasks and threads the
call runs on), wrapped in :class:`SubjectToken`, whose ``repr``/``str`` never show it and
which refuses pickling. Only :mod:`toolkeeper.identity.upstream` reads the value, to send it
to the authorization server's token endpoint; it never goes to an upstream, into a log, an
audit event or a result. A carrier is used only for the agent it was made for
(:func:`subject_for`), so a stale one can never speak for another caller.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from typing import NoReturn

from toolkeeper.model.call import Principal


class SubjectToken:
    """A caller's raw access token, hidden from ``repr``, ``str``, pickling and equality."""

    __slots__ = ("_value", "agent", "digest", "issuer", "tenant_id")

    def __init__(self, value: str, *, tenant_id: str, agent: str, issuer: str) -> None:
        self._value = value
        self.tenant_id = tenant_id
        self.agent = agent
        self.issuer = issuer
        self.digest = hashlib.sha256(value.encode()).hexdigest()[:32]
        """A stable name for cache keys (never the token)."""

    def reveal(self) -> str:
        """The token, for the token endpoint only."""
        return self._value

    def __repr__(self) -> str:
        return f"SubjectToken(agent={self.agent!r}, ***)"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("a caller's token is never pickled")

    def __getstate__(self) -> NoReturn:
        raise TypeError("a caller's token is never pickled")


CALLER_TOKEN: ContextVar[SubjectToken | None] = ContextVar("toolkeeper_caller_token",
                                                           default=None)


def carry(principal: Principal | None, token: str) -> None:
    """Remember ``token`` for this request when it is an agent's OAuth access token (a
    ``tk_…`` token is never exchanged: it is toolkeeper's own)."""
    if principal is None or principal.issuer is None or principal.agent is None:
        return
    CALLER_TOKEN.set(SubjectToken(token, tenant_id=principal.tenant_id,
                                  agent=principal.agent, issuer=principal.issuer))


def subject_for(tenant_id: str, agent: str) -> SubjectToken | None:
    """The carried token of exactly this tenant's agent, else ``None``."""
    found = CALLER_TOKEN.get()
    if found is None or found.tenant_id != tenant_id or found.agent != agent:
        return None
    return found
