"""OAuth access tokens for upstreams (MCP servers and ``http`` tools with an ``oauth:`` block).

:class:`UpstreamTokens` gets a token from the configured authorization server — client
credentials (RFC 6749 §4.4) or token exchange (RFC 8693) of the calling agent's own access
token (:mod:`.upstream_subject`) — and keeps it per (tenant, upstream, subject):

- in memory (bounded), and — client-credentials tokens; exchanged ones, one per subject
  token, stay in memory only — where the secrets backend can seal (the embedded store), as a
  credential row sealed with the tenant in its associated data, under the pseudo-tenant
  ``oauth~{tenant}`` that no ``${secret:…}`` reference of any tenant can reach (so a
  restarted process or another replica reuses it, and the gateway's redactor knows it);
- renewed ``refresh_skew_s`` before it expires; at most one request per key at a time —
  concurrent calls, on any thread or loop, wait for that one;
- dropped when the upstream answered 401 with it (:meth:`UpstreamTokens.token` with
  ``stale``): the next call fetches a new one.

Every request to the authorization server is bounded (``timeout_s`` overall, answer at most
:data:`MAX_ANSWER_BYTES`); a refusal is ``upstream_unauthorized`` with the server's
``error`` code, an unreachable, slow or garbled one ``upstream_token_unavailable``.
A token is never logged: the messages name the upstream, never a value.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from toolkeeper.errors import ToolError
from toolkeeper.identity.jwks import client_basic
from toolkeeper.identity.upstream_person import APPROVED, PersonTokens
from toolkeeper.identity.upstream_subject import SubjectToken
from toolkeeper.model.reasons import Reason
from toolkeeper.secrets.base import parse_ref
from toolkeeper.secrets.credentials import TenantCredentials
from toolkeeper.secrets.redact import LIVE_SECRETS
from toolkeeper.upstream.servers import UpstreamOAuth

log = logging.getLogger("toolkeeper.identity")
MAX_ANSWER_BYTES = 64 * 1024
MAX_TOKEN_CHARS = 16 * 1024
MAX_CACHED = 10_000
DEFAULT_EXPIRES_S = 300.0
"""A token answer without ``expires_in`` is renewed after this long."""
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
STORE_CONNECTOR = "upstream-oauth"
CALL_SHARE = 0.5
"""A call's token must come within this share of the call's time (the rest is the call's)."""
_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
SecretGetter = Callable[[str | None, str], Awaitable[str]]
Transport = Callable[[], httpx.AsyncBaseTransport]
"""Makes the transport of a token request (an ``http`` tool's guarded one), when needed."""


class Unauthorized(ToolError):
    """``upstream_unauthorized``: the upstream or its authorization server said no."""

    def __init__(self, message: str) -> None:
        super().__init__(Reason.UPSTREAM_UNAUTHORIZED, message, retryable=False)


class TokenUnavailable(ToolError):
    """``upstream_token_unavailable``: no answer, or garbage, from the authorization server."""

    def __init__(self, message: str) -> None:
        super().__init__(Reason.UPSTREAM_TOKEN_UNAVAILABLE, message, retryable=True)


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    expires_at: float
    """Wall-clock seconds (kept across processes)."""

    def __repr__(self) -> str:
        return f"Token(***, expires_at={self.expires_at:.0f})"

    def fresh(self, skew_s: float) -> bool:
        return time.time() < self.expires_at - skew_s


class TokenBearer:
    """One upstream's token for the upstream clients: ``current`` and ``renew`` (after a
    401; the refused token is dropped, at most one new one fetched)."""

    __slots__ = ("_kw", "_oauth", "_on_token", "_tokens", "_until")

    def __init__(self, tokens: UpstreamTokens, oauth: UpstreamOAuth, *,
                 on_token: Callable[[str], None] | None, within_s: float | None = None,
                 **kw: Any) -> None:
        self._tokens = tokens
        self._oauth = oauth
        self._on_token = on_token
        self._kw = kw
        self._until = None if within_s is None else time.monotonic() + within_s
        """A call's: no token by then is ``upstream_token_unavailable`` (nothing was sent),
        never the call's own timeout ("may have acted")."""

    async def current(self) -> str:
        return self._seen(await self._bounded(self._tokens.token(self._oauth, **self._kw)))

    async def renew(self, stale: str) -> str:
        return self._seen(await self._bounded(
            self._tokens.token(self._oauth, stale=stale, **self._kw)))

    def within(self, within_s: float) -> TokenBearer:
        """This bearer for one call: a token within ``within_s`` from now, or none."""
        return TokenBearer(self._tokens, self._oauth, on_token=self._on_token,
                           within_s=within_s, **self._kw)

    async def _bounded(self, got: Awaitable[str]) -> str:
        if self._until is None:
            return await got
        try:
            async with asyncio.timeout(max(self._until - time.monotonic(), 0.0)):
                return await got
        except TimeoutError:
            raise TokenUnavailable(f"{self._kw.get('upstream')}: no token within the call's "
                                   "time; nothing was sent upstream") from None

    def held(self) -> str | None:
        """The token held now, without a request (``None``: none)."""
        return self._tokens.held(self._oauth, tenant_id=self._kw["tenant_id"],
                                 upstream=self._kw["upstream"], subject=self._kw["subject"])

    def _seen(self, value: str) -> str:
        if self._on_token is not None:
            self._on_token(value)
        return value

    def __repr__(self) -> str:
        return f"TokenBearer({self._kw.get('upstream')!r})"


def fingerprint(oauth: UpstreamOAuth) -> str:
    """A short name of what a token is for (a changed config never reuses an old token)."""
    text = json.dumps(oauth.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class UpstreamTokens:
    """Tokens for every OAuth upstream of one gateway (thread-safe, any event loop)."""

    def __init__(self, *, credentials: TenantCredentials | None = None,
                 platform: SecretGetter | None = None) -> None:
        self._credentials = credentials
        self._platform = platform
        """The operator's secrets: ``client_secret`` of upstream MCP servers (config)."""
        self._cache: OrderedDict[tuple[str, ...], Token] = OrderedDict()
        self._inflight: dict[tuple[str, ...], concurrent.futures.Future[Token]] = {}
        self._endpoints: dict[str, str] = {}
        self._lock = threading.Lock()
        self.people = PersonTokens(credentials)
        """The approvers' token sets (``subject: approver``)."""
        self.fetches = 0
        """Requests made to token endpoints (for tests and metrics)."""

    async def token(self, oauth: UpstreamOAuth, *, tenant_id: str, upstream: str,
                    secret: SecretGetter | None, subject: SubjectToken | None = None,
                    stale: str | None = None,
                    transport: Transport | None = None) -> str:
        """A token for ``upstream`` now: the cached one unless it is near expiry or is
        ``stale`` (the one the upstream just refused), else a new one (one request per key
        at a time). ``secret`` resolves ``client_secret``'s reference in the scope of
        whoever wrote the config."""
        if oauth.subject == "approver":
            subject = await self._approver(tenant_id, upstream)
        if oauth.grant == "token_exchange" and subject is None:
            raise Unauthorized(f"{upstream}: token exchange needs the calling agent's own "
                               "OAuth access token in this request (it came with a tk_ "
                               "token, or runs outside the agent's request)")
        key = (tenant_id, upstream, fingerprint(oauth), subject.digest if subject else "")
        with self._lock:
            found = self._cache.get(key)
            if found is not None and stale is not None and found.value == stale:
                del self._cache[key]
                found = None
            if found is not None and found.fresh(oauth.refresh_skew_s):
                self._cache.move_to_end(key)
                LIVE_SECRETS.add(found.value)  # in use: kept among the newest redacted
                return found.value
            pending = self._inflight.get(key)
            mine = pending is None
            if pending is None:
                pending = self._inflight[key] = concurrent.futures.Future()
        if not mine:  # shielded: a waiter that gives up must not cancel the shared request
            return (await asyncio.shield(asyncio.wrap_future(pending))).value
        try:
            got = await self._obtain(oauth, key, secret, subject, stale, transport)
        except BaseException as exc:
            with self._lock:
                del self._inflight[key]
            pending.set_exception(exc if isinstance(exc, Exception) else
                                  TokenUnavailable(f"{upstream}: token request cancelled"))
            pending.exception()  # retrieved: waiters see it, nobody is warned
            raise
        with self._lock:
            self._cache[key] = got
            while len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
            del self._inflight[key]
        pending.set_result(got)
        return got.value

    async def _approver(self, tenant_id: str, upstream: str) -> SubjectToken:
        """The token of the person who approved the call being executed (cache key:
        the approval), else :class:`Unauthorized` — nothing is sent upstream."""
        approved = APPROVED.get()
        if approved is None or approved[0] != tenant_id:
            raise Unauthorized(f"{upstream}: acts on behalf of the person who approved the "
                               "call, and this call consumed no approval")
        found = await asyncio.to_thread(self.people.of_approval, tenant_id, approved[1])
        if found is None:
            raise Unauthorized(f"{upstream}: acts on behalf of the person who approved the "
                               f"call, and approval {approved[1]} was not given by a person "
                               "signed in to the console (a pasted token has no person's "
                               "token to exchange): approve it signed in")
        if time.time() >= found.expires_at - 5:  # refreshed first, once (bounded)
            found = await self.people.refreshed(tenant_id, approved[1], found) or found
        if time.time() >= found.expires_at - 5:
            raise Unauthorized(f"{upstream}: the approver's sign-in token has expired: "
                               "sign in again and approve a new call (it could not be refreshed)")
        found.access.digest = "approval:" + approved[1]  # cached per approval
        return found.access

    def bearer(self, oauth: UpstreamOAuth, *, tenant_id: str, upstream: str,
               secret: SecretGetter | None = None, subject: SubjectToken | None = None,
               transport: Transport | None = None,
               on_token: Callable[[str], None] | None = None,
               within_s: float | None = None) -> TokenBearer:
        """A token source for one upstream (``secret``: default the operator's secrets);
        ``on_token`` sees every token handed out (to redact it from the call's output)."""
        return TokenBearer(self, oauth, tenant_id=tenant_id, upstream=upstream,
                           secret=secret or self._platform, subject=subject,
                           transport=transport, on_token=on_token, within_s=within_s)

    def server_bearer(self, name: str, oauth: UpstreamOAuth | None,
                      tenant_id: str | None) -> TokenBearer | None:
        """The connection token of an upstream MCP server (client credentials)."""
        if oauth is None:
            return None
        if oauth.grant == "token_exchange":  # the connection itself lists tools: no subject
            oauth = oauth.model_copy(update={"grant": "client_credentials", "subject": None,
                                             "audience": None})
        return self.bearer(oauth, tenant_id=tenant_id or "", upstream=name)

    def held(self, oauth: UpstreamOAuth, *, tenant_id: str, upstream: str,
             subject: SubjectToken | None = None) -> str | None:
        """The token cached for this key now (no request, however old)."""
        key = (tenant_id, upstream, fingerprint(oauth), subject.digest if subject else "")
        found = self._cache.get(key)  # one dict read: atomic
        return None if found is None else found.value

    def forget(self, tenant_id: str | None = None) -> None:
        """Drop cached tokens (of one tenant), e.g. after a configuration change."""
        with self._lock:
            for key in [k for k in self._cache if tenant_id in (None, k[0])]:
                del self._cache[key]

    async def _obtain(self, oauth: UpstreamOAuth, key: tuple[str, ...],
                      secret: SecretGetter | None, subject: SubjectToken | None,
                      stale: str | None, transport: Transport | None) -> Token:
        stored = await asyncio.to_thread(self._load, key)
        if stored is not None and stored.value != stale and stored.fresh(oauth.refresh_skew_s):
            LIVE_SECRETS.add(stored.value)
            return stored
        if subject is not None:
            LIVE_SECRETS.add(subject.reveal())  # never in a log either
        got = await self._fetch(oauth, key[1], secret, subject, transport)
        LIVE_SECRETS.add(got.value)
        await asyncio.to_thread(self._save, key, got)
        return got

    # -- the credential rows --------------------------------------------------------------

    def _row(self, key: tuple[str, ...]) -> tuple[str, str, str]:
        tenant, upstream, fp, _subject = key
        tenant_part = f"oauth~{tenant}"
        if len(tenant_part) > 64:  # the column's width: a long name is hashed, not cut
            tenant_part = "oauth~" + hashlib.sha256(tenant.encode()).hexdigest()[:40]
        name = f"{upstream}:{fp}"
        if len(name) > 200:
            name = hashlib.sha256(name.encode()).hexdigest()
        return tenant_part, STORE_CONNECTOR, name

    def _load(self, key: tuple[str, ...]) -> Token | None:
        if self._credentials is None or key[3]:  # exchanged tokens stay in memory
            return None
        try:
            raw = self._credentials.get(*self._row(key))
            data = json.loads(raw) if raw else None
            # the row says whose token it is: a row of another key is never used
            if isinstance(data, dict) and isinstance(data.get("t"), str) \
                    and data.get("k") == list(key):
                return Token(data["t"], float(data["exp"]))
        except Exception as exc:  # a tampered or unreadable row: fetch anew
            log.warning("upstream token row of %s unreadable: %s", key[1], type(exc).__name__)
        return None

    def _save(self, key: tuple[str, ...], token: Token) -> None:
        if self._credentials is None or key[3]:
            return
        try:
            self._credentials.put(*self._row(key), json.dumps(
                {"t": token.value, "exp": token.expires_at, "k": list(key)}))
        except Exception as exc:  # the token still serves this process
            log.warning("upstream token of %s not stored: %s", key[1], type(exc).__name__)

    # -- the authorization server ---------------------------------------------------------

    async def _fetch(self, oauth: UpstreamOAuth, upstream: str, secret: SecretGetter | None,
                     subject: SubjectToken | None,
                     transport: Transport | None) -> Token:
        form: dict[str, str] = {}
        if oauth.grant == "client_credentials":
            form["grant_type"] = "client_credentials"
        else:
            assert subject is not None
            form.update(grant_type=TOKEN_EXCHANGE, subject_token=subject.reveal(),
                        subject_token_type=ACCESS_TOKEN_TYPE,
                        requested_token_type=ACCESS_TOKEN_TYPE)
            if oauth.audience:
                form["audience"] = oauth.audience
        if oauth.scope:
            form["scope"] = oauth.scope
        if oauth.resource:
            form["resource"] = oauth.resource
        auth: httpx.Auth | None = None
        if oauth.client_secret is not None:
            ref = parse_ref(oauth.client_secret)
            if secret is None or ref is None:
                raise Unauthorized(f"{upstream}: no secrets store for the client secret")
            auth = client_basic(oauth.client_id, await secret(*ref))
        else:
            form["client_id"] = oauth.client_id
        async with httpx.AsyncClient(transport=transport() if transport else None,
                                     timeout=oauth.timeout_s, follow_redirects=False,
                                     trust_env=False) as http:
            endpoint = await self._endpoint(http, oauth, upstream)
            status, body = await _post(http, endpoint, form, auth, oauth.timeout_s, upstream)
        self.fetches += 1
        return _token_of(status, body, upstream)

    async def _endpoint(self, http: httpx.AsyncClient, oauth: UpstreamOAuth,
                        upstream: str) -> str:
        if oauth.token_endpoint is not None:
            return oauth.token_endpoint
        assert oauth.issuer is not None
        issuer = oauth.issuer.rstrip("/")
        found = self._endpoints.get(issuer)
        if found is not None:
            return found
        for well_known in ("oauth-authorization-server", "openid-configuration"):
            try:
                async with asyncio.timeout(oauth.timeout_s):
                    answer = await http.get(f"{issuer}/.well-known/{well_known}")
                    data = await _read(answer)
            except (TimeoutError, httpx.HTTPError, ValueError):
                continue
            endpoint = data.get("token_endpoint") if isinstance(data, dict) else None
            if (answer.status_code == 200 and isinstance(endpoint, str)
                    and str(data.get("issuer", "")).rstrip("/") == issuer
                    and endpoint.lower().startswith(("https://", "http://"))):
                if len(self._endpoints) < 256:
                    self._endpoints[issuer] = endpoint
                return endpoint
        raise TokenUnavailable(f"{upstream}: no token endpoint discovered at {issuer}")


async def _read(answer: httpx.Response) -> Any:
    """The JSON of an answer read up to :data:`MAX_ANSWER_BYTES` (``ValueError`` beyond)."""
    size, chunks = 0, []
    async for chunk in answer.aiter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ValueError(f"answer larger than {MAX_ANSWER_BYTES} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except RecursionError:  # nested past the parser's limit: garbage, like any bad JSON
        raise ValueError("answer nested too deeply") from None


async def _post(http: httpx.AsyncClient, endpoint: str, form: dict[str, str],
                auth: httpx.Auth | None, timeout_s: float, upstream: str) -> tuple[int, Any]:
    try:
        async with asyncio.timeout(timeout_s):
            async with http.stream("POST", endpoint, data=form,
                                   auth=auth or httpx.USE_CLIENT_DEFAULT,
                                   headers={"Accept": "application/json"}) as answer:
                try:
                    return answer.status_code, await _read(answer)
                except ValueError:
                    return answer.status_code, None
    except TimeoutError:
        raise TokenUnavailable(f"{upstream}: the authorization server did not answer within "
                               f"{timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise TokenUnavailable(f"{upstream}: cannot reach the authorization server: "
                               f"{type(exc).__name__}") from None


def _token_of(status: int, body: Any, upstream: str) -> Token:
    """The token in a token endpoint's answer, or why there is none."""
    if status in (400, 401, 403) and isinstance(body, dict) and "error" in body:
        error = str(body.get("error"))
        code = error if _ERROR_CODE.match(error) else "invalid answer"
        raise Unauthorized(f"{upstream}: the authorization server refused a token: {code}")
    if status != 200 or not isinstance(body, dict):
        raise TokenUnavailable(f"{upstream}: the authorization server answered HTTP {status} "
                               "without a token")
    value = body.get("access_token")
    kind = body.get("token_type", "Bearer")
    expires_in = body.get("expires_in", DEFAULT_EXPIRES_S)
    if not isinstance(value, str) or not value or len(value) > MAX_TOKEN_CHARS \
            or not value.isascii() or not value.isprintable() or " " in value:
        raise TokenUnavailable(f"{upstream}: the token endpoint's answer has no usable "
                               "access_token")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise TokenUnavailable(f"{upstream}: token_type {str(kind)[:20]!r} is not Bearer")
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) \
            or expires_in <= 0:
        raise TokenUnavailable(f"{upstream}: the token endpoint's expires_in is not a "
                               "positive number")
    return Token(value, time.time() + min(float(expires_in), 86400.0 * 366))
