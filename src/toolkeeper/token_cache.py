"""Who is calling: bearer tokens (cached: a verified token costs one hash and a dict
look-up) — toolkeeper's own ``tk_…`` tokens and OAuth access tokens — and in-process
agents."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio

from toolkeeper.identity.metadata import challenge, scopes_supported
from toolkeeper.identity.refused import TokenRefused
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.store.tokens import TOKEN_PREFIX, hash_token

if TYPE_CHECKING:  # PyJWT and cryptography load only where access tokens are configured
    from toolkeeper.identity.tokens import AccessTokens


class TokenCache:
    """Known tokens by hash. Dropped when this process creates or revokes a token (the
    repository's generation) and when another process does (the gateway's housekeeping
    sees the ``tokens`` change counter, about once a second, and calls :meth:`drop`)."""

    MAX = 100_000

    def __init__(self, tokens: Any) -> None:
        self._repo = tokens
        self._known: dict[str, Principal] = {}
        self._generation = tokens.generation
        self._lookups: dict[str, asyncio.Task[Principal | None]] = {}
        """Store look-ups under way, by token hash (see :meth:`authenticate_async`)."""

    def authenticate(self, token: str) -> Principal | None:
        """The principal of ``token``; ``None`` for unknown or revoked tokens."""
        if not isinstance(token, str) or not token:
            return None
        cached = self.cached(token)
        if cached is not None:
            return cached
        rec = self._repo.find(token)
        if rec is None:
            return None
        found = Principal(name=rec.label, tenant_id=rec.tenant_id,
                          roles=frozenset({Role(rec.role)}), agent=rec.agent, token_id=rec.id)
        if len(self._known) < self.MAX:
            self._known[hash_token(token)] = found
        return found

    async def authenticate_async(self, token: str) -> Principal | None:
        """:meth:`authenticate` for an event loop: from memory when cached, else looked up
        on a worker thread — one look-up per token at a time, whoever else asks for the same
        token meanwhile awaits it (a burst of requests on a cold cache would otherwise take
        a thread and a database connection each)."""
        cached = self.cached(token)
        if cached is not None or not isinstance(token, str) or not token:
            return cached
        loop = asyncio.get_running_loop()
        key = hash_token(token)
        task = self._lookups.get(key)
        if task is None or task.done() or task.get_loop() is not loop:
            task = loop.create_task(anyio.to_thread.run_sync(self.authenticate, token))
            self._lookups[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        # shielded: a caller that goes away leaves the look-up to the others
        return await asyncio.shield(task)

    def _forget(self, key: str, task: asyncio.Task[Principal | None]) -> None:
        if self._lookups.get(key) is task:
            del self._lookups[key]
        if not task.cancelled():
            task.exception()  # its waiters got it; none left must not log it as unseen

    def cached(self, token: str) -> Principal | None:
        """Without I/O: the principal of a token already verified here."""
        if self._generation != self._repo.generation:
            self._known = {}
            self._generation = self._repo.generation
        return self._known.get(hash_token(token)) if isinstance(token, str) else None

    def drop(self) -> None:
        self._known = {}


class Bearers:
    """The one answer to "who does this bearer token name?" for REST and ``/mcp``: a
    ``tk_…`` token is looked up in the store (unless ``identity.tk_tokens`` is off), any
    other token is an OAuth access token of a configured issuer (when there are any)."""

    def __init__(self, tk: TokenCache, access: AccessTokens | None, *,
                 tk_tokens: bool = True, resource: str | None = None) -> None:
        self.tk = tk
        self.access = access
        self.tk_tokens = tk_tokens
        self.resource = resource if access is not None else None
        """This protected resource's identifier, when it accepts OAuth access tokens."""

    def challenge(self, path: str = "", *, refused: TokenRefused | None = None,
                  error: str | None = None, scopes: Iterable[str] | None = None) -> str:
        """The ``WWW-Authenticate`` value of a refusal on ``path`` (``""`` REST, ``/mcp``):
        the metadata URL and the scopes to ask for once OAuth is configured; ``error``
        ``invalid_token`` when a presented token was refused (RFC 6750 §3)."""
        if scopes is None:
            scopes = scopes_supported(self.access.issuers) if self.access else ()
        if refused is not None:
            error = refused.error
        return challenge(self.resource, path, error=error, scopes=scopes,
                         description=refused.message if refused is not None else None)

    def cached(self, token: str) -> Principal | None:
        """Without I/O: a token already verified here."""
        if not isinstance(token, str) or not token:
            return None
        if token.startswith(TOKEN_PREFIX) or self.access is None:
            return self.tk.cached(token) if self.tk_tokens else None
        return self.access.cached(token)

    def oauth_scopes_for(self, who: Principal, wanted: frozenset[str]) -> list[str]:
        """The OAuth scopes of ``who``'s issuer that grant toolkeeper scopes ``wanted``."""
        issuer = self.access.issuer(who.issuer) if self.access and who.issuer else None
        return issuer.mapping.oauth_scopes_for(wanted) if issuer is not None else []

    async def verify(self, token: str) -> Principal:
        """The principal of ``token``; :class:`TokenRefused` saying why not."""
        if not isinstance(token, str) or not token:
            raise TokenRefused("the bearer token is empty")
        if token.startswith(TOKEN_PREFIX) or self.access is None:
            if not self.tk_tokens:
                raise TokenRefused("toolkeeper tokens (tk_...) are turned off here: "
                                   "use an access token of the identity provider")
            found = await self.tk.authenticate_async(token)
            if found is None:
                raise TokenRefused("unknown or revoked token")
            return found
        return await self.access.verify(token)


class AgentPrincipals:
    """Principals of in-process agents by (agent, tenant), made once and reused (bounded:
    past 10,000 distinct agents new ones are made per call, not kept)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], Principal] = {}

    def get(self, agent: str, tenant_id: str) -> Principal:
        """The trusted principal of ``agent`` in ``tenant_id``."""
        key = (agent, tenant_id)
        p = self._known.get(key)
        if p is None:
            p = Principal(name=agent, tenant_id=tenant_id, roles=frozenset({Role.AGENT}),
                          agent=agent)
            if len(self._known) < 10_000:
                self._known[key] = p
        return p
