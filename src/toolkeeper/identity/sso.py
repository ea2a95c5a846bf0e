"""The console's single sign-on: an OpenID Connect relying party (authorization code with
PKCE S256; docs/identity-sso.md).

A sign-in keeps its ``state``, ``nonce`` and PKCE verifier in the store (shared by every
worker), bound to a short-lived pre-login cookie, and the callback takes them once. The
callback is refused (``sso_failed``) unless: a sign-in is in progress for this browser; the
``state`` matches; the authorization response's ``iss`` is the provider's (RFC 9207; required
when the provider says it sends one); the code is exchanged at the token endpoint; the ID
token verifies with the provider's published key under an allow-listed algorithm, names the
provider as ``iss`` and this client in ``aud`` (and ``azp`` when present or when ``aud``
has others), holds the ``nonce`` sent, has not expired; and its claims map to a tenant and a
role. Every request to the provider is bounded in time and size (:mod:`.jwks`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
import jwt
from jwt import exceptions as jwt_errors

from toolkeeper.identity.jwks import Jwks, ProviderError, client_basic, get_json
from toolkeeper.identity.mapping import Mapping, principal_of
from toolkeeper.identity.refused import TokenRefused
from toolkeeper.identity.tokens import MAX_TOKEN_CHARS, SecretGetter
from toolkeeper.identity.upstream_person import PersonTokens
from toolkeeper.model.reasons import Reason
from toolkeeper.secrets.base import parse_ref
from toolkeeper.store.sessions import LoginRow, SessionRepo, SessionRow

log = logging.getLogger("toolkeeper.identity.sso")
MAX_PARAM_CHARS = 4096
"""``code``, ``state`` and ``iss`` of a callback are at most this long."""
MAX_TENANT_CHARS = 64
"""A session's tenant (the store's id length); a longer tenant claim is refused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SsoSettings:
    """``identity.sso``, compiled (``config/sso.py``)."""

    issuer: str
    client_id: str
    client_secret_ref: str | None
    scopes: tuple[str, ...]
    public_url: str
    mapping: Mapping
    algorithms: frozenset[str]
    leeway_s: int = 60
    timeout_s: float = 5.0
    idle_s: int = 1800
    max_s: int = 43200
    login_ttl_s: int = 600
    secure: bool = False

    @property
    def redirect_uri(self) -> str:
        return f"{self.public_url}/auth/callback"


class SsoRefused(Exception):
    """A sign-in, session or CSRF check said no: HTTP ``status``, ``reason``, ``message``."""

    def __init__(self, message: str, *, status: int = 400,
                 reason: Reason = Reason.SSO_FAILED) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _web_url(value: Any) -> bool:
    """An http(s) URL with a host (a provider's endpoint; browsers are sent to some)."""
    if not isinstance(value, str) or len(value) > 2000:
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


@dataclass(slots=True)
class Sso:
    """The relying party and its sessions (one per app)."""

    settings: SsoSettings
    store: SessionRepo
    secrets: SecretGetter | None = None
    people: PersonTokens | None = None
    """Where the person's own token set is kept at sign-in (None: not kept)."""
    clock: Callable[[], float] = time.time
    """Epoch seconds; tests move it to expire sessions."""
    _meta: dict[str, Any] | None = None
    _keys: Jwks | None = None
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def metadata(self) -> dict[str, Any]:
        """The provider's discovery document (fetched once, bounded; must name its issuer)."""
        if self._meta is not None:
            return self._meta
        async with self._lock:
            if self._meta is None:
                s = self.settings
                url = s.issuer.rstrip("/") + "/.well-known/openid-configuration"
                try:
                    meta = await get_json(url, s.timeout_s)
                except ProviderError as exc:
                    raise SsoRefused(f"the identity provider cannot be reached: {exc}",
                                     status=502) from None
                needed = ("authorization_endpoint", "token_endpoint", "jwks_uri")
                if meta.get("issuer") != s.issuer or \
                        not all(_web_url(meta.get(k)) for k in needed):
                    raise SsoRefused("the identity provider's metadata names another issuer "
                                     "or lacks an endpoint", status=502)
                self._keys = Jwks(s.issuer, meta["jwks_uri"], timeout_s=s.timeout_s)
                self._meta = meta
        return self._meta

    async def start_login(self) -> tuple[str, str]:
        """A new sign-in: (the pre-login cookie's value, the provider's authorization URL)."""
        meta = await self.metadata()
        s, now = self.settings, self.clock()
        login_id, state, nonce = (secrets.token_urlsafe(32) for _ in range(3))
        verifier = secrets.token_urlsafe(48)
        challenge = _b64(hashlib.sha256(verifier.encode()).digest())
        await anyio.to_thread.run_sync(lambda: self.store.start_login(login_id, LoginRow(
            state=state, nonce=nonce, verifier=verifier, expires_at=now + s.login_ttl_s), now))
        query = urlencode({"response_type": "code", "client_id": s.client_id,
                           "redirect_uri": s.redirect_uri, "scope": " ".join(s.scopes),
                           "state": state, "nonce": nonce, "code_challenge": challenge,
                           "code_challenge_method": "S256"})
        endpoint = str(meta["authorization_endpoint"])
        return login_id, f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    async def finish_login(self, login_id: str | None, params: dict[str, str]
                           ) -> tuple[str, SessionRow]:
        """The callback: a new session (its id for the cookie, its row); :class:`SsoRefused`
        saying why not. The sign-in in progress is used up whatever the outcome."""
        if any(len(v) > MAX_PARAM_CHARS for v in params.values()):
            raise SsoRefused("the callback's parameters are too long")
        now = self.clock()
        login = None if not login_id or len(login_id) > 100 else \
            await anyio.to_thread.run_sync(lambda: self.store.take_login(login_id, now))
        if login is None:
            raise SsoRefused("no sign-in is in progress in this browser (or it took too long)")
        if not _same(params.get("state", ""), login.state):
            raise SsoRefused("the callback's state is not this sign-in's")
        meta = await self.metadata()
        self._check_iss(params.get("iss"), meta)
        if "error" in params:
            raise SsoRefused(f"the identity provider refused: {params['error'][:100]}")
        code = params.get("code")
        if not code:
            raise SsoRefused("the callback carries no code")
        tokens = await self._exchange(meta, code, login.verifier)
        claims = await self._id_token(tokens.get("id_token"), login.nonce)
        opened = await anyio.to_thread.run_sync(lambda: self._open_session(claims, now))
        if self.people is not None:  # for `subject: approver` upstreams (sealed, per person)
            row = opened[1]
            await anyio.to_thread.run_sync(lambda: self.people.keep(  # type: ignore[union-attr]
                row.tenant_id, row.issuer, row.subject, tokens, now))
        return opened

    def _check_iss(self, iss: str | None, meta: dict[str, Any]) -> None:
        """RFC 9207: a response's ``iss`` must be the provider's; absent only when the
        provider does not say it sends one."""
        if iss is None:
            if meta.get("authorization_response_iss_parameter_supported") is True:
                raise SsoRefused("the callback lacks iss (RFC 9207)")
            return
        if not _same(iss, self.settings.issuer):
            raise SsoRefused("the callback's iss is not the configured identity provider")

    async def _exchange(self, meta: dict[str, Any], code: str, verifier: str
                        ) -> dict[str, Any]:
        s = self.settings
        data = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": s.redirect_uri, "code_verifier": verifier}
        auth = None
        if s.client_secret_ref is not None:
            ref = parse_ref(s.client_secret_ref)
            if ref is None or self.secrets is None:
                raise SsoRefused("the console's client secret is not configured", status=500)
            try:
                auth = client_basic(s.client_id, await self.secrets(*ref))
            except Exception:  # said without the secret's value
                raise SsoRefused("the console's client secret cannot be had",
                                 status=500) from None
        else:
            data["client_id"] = s.client_id
        try:
            return await get_json(str(meta["token_endpoint"]), s.timeout_s, method="POST",
                                  data=data, auth=auth)
        except ProviderError as exc:  # a used or wrong code ends here (HTTP 400)
            log.warning("sso: code exchange refused: %s", exc)
            raise SsoRefused("the identity provider did not exchange the code") from None

    async def _id_token(self, token: Any, nonce: str) -> dict[str, Any]:
        s = self.settings
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
            raise SsoRefused("the identity provider sent no usable ID token")
        try:
            header = jwt.get_unverified_header(token)
        except jwt_errors.PyJWTError:
            raise SsoRefused("the ID token is not a well-formed JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in s.algorithms:
            raise SsoRefused(f"the ID token's algorithm {str(alg)[:20]!r} is not allowed")
        assert self._keys is not None
        try:
            key = await self._keys.key(kid if isinstance(kid, str) else None, alg)
        except ProviderError:
            key = None
        if key is None:
            raise SsoRefused("the ID token is signed with a key the provider does not publish")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=[alg], audience=s.client_id, issuer=s.issuer,
                leeway=s.leeway_s, options={"require": ["exp", "iat", "iss", "aud", "sub"]})
        except jwt_errors.PyJWTError as exc:
            raise SsoRefused(f"the ID token is refused ({type(exc).__name__})") from None
        aud = claims["aud"]
        azp = claims.get("azp")
        if (azp is not None or (isinstance(aud, list) and len(aud) > 1)) and \
                azp != s.client_id:
            raise SsoRefused("the ID token's azp is not this console")
        if not isinstance(claims.get("nonce"), str) or not _same(claims["nonce"], nonce):
            raise SsoRefused("the ID token's nonce is not this sign-in's")
        return claims

    def _open_session(self, claims: dict[str, Any], now: float) -> tuple[str, SessionRow]:
        s = self.settings
        try:
            who = principal_of(s.mapping, claims, s.issuer, lambda _t, _a: False)
        except TokenRefused as exc:
            raise SsoRefused(f"this person may not use the console: {exc.message}",
                             status=403, reason=Reason.FORBIDDEN) from None
        if who.subject is None or len(who.tenant_id) > MAX_TENANT_CHARS:  # kept whole or not
            raise SsoRefused("this person's sub (at most 200 characters) or tenant (at most "
                             "64) cannot be kept", status=403, reason=Reason.FORBIDDEN)
        email = claims.get("email")
        row = SessionRow(
            tenant_id=who.tenant_id, roles=" ".join(sorted(r.value for r in who.roles)),
            subject=who.subject, issuer=s.issuer, name=who.name[:200],
            email=email[:200] if isinstance(email, str) else None,
            csrf=secrets.token_urlsafe(32), created_at=now, last_seen=now,
            idle_expires_at=now + s.idle_s, expires_at=now + s.max_s)
        session_id = secrets.token_urlsafe(32)
        self.store.create(session_id, row)
        return session_id, row

    async def refresh(self, refresh_token: str) -> dict[str, Any]:
        """A person's kept refresh token → a new token answer (``subject: approver``);
        bounded; :class:`ProviderError` or :class:`SsoRefused` when there is none."""
        meta, s = await self.metadata(), self.settings
        data = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        auth = None
        ref = parse_ref(s.client_secret_ref) if s.client_secret_ref is not None else None
        if ref is not None and self.secrets is not None:
            auth = client_basic(s.client_id, await self.secrets(*ref))
        else:
            data["client_id"] = s.client_id
        return await get_json(str(meta["token_endpoint"]), s.timeout_s, method="POST",
                              data=data, auth=auth)

    async def logout_url(self) -> str | None:
        """The provider's RP-initiated logout page for this client, if it offers one."""
        meta = await self.metadata()
        end = meta.get("end_session_endpoint")
        if not isinstance(end, str) or not _web_url(end):  # the page navigates there:
            return None  # never a javascript: or data: URL
        return f"{end}{'&' if '?' in end else '?'}" + urlencode(
            {"client_id": self.settings.client_id})
