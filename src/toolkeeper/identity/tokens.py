"""OAuth 2.1 access tokens → principals (toolkeeper as a protected resource; RFC 9068 JWTs,
RFC 7662 introspection for opaque tokens).

A JWT is accepted only when: it fits :data:`MAX_TOKEN_CHARS`; its ``iss`` is exactly a
configured issuer; its header ``alg`` is on that issuer's allow-list (asymmetric only:
``none`` and ``HS*`` are never accepted, whatever a JWKS holds); the issuer's key with its
``kid`` verifies it; ``aud`` names this resource; ``exp`` (required), ``nbf`` and ``iat``
hold within the issuer's leeway. Its claims are then mapped (:mod:`.mapping`).

A verified token is remembered by its hash until its ``exp`` (introspected ones at most
:data:`INTROSPECTION_CACHE_S`), so the hot path is one hash and a dict look-up, like a
``tk_…`` token. A JWT therefore stays accepted until it expires even if its key leaves the
JWKS meanwhile — the same promise a JWT makes to every resource server.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
from jwt import exceptions as jwt_errors

from toolkeeper.identity.jwks import Jwks, ProviderError, client_basic, get_json
from toolkeeper.identity.mapping import AgentExists, Mapping, principal_of
from toolkeeper.identity.refused import TokenRefused
from toolkeeper.model.call import Principal
from toolkeeper.secrets.base import parse_ref
from toolkeeper.store.tokens import hash_token

ALLOWED_ALGORITHMS = frozenset({"RS256", "ES256", "PS256", "EdDSA"})
"""The default allow-list and its ceiling (asymmetric only)."""
MAX_TOKEN_CHARS = 8192
MAX_CACHED = 100_000
INTROSPECTION_CACHE_S = 60.0

SecretGetter = Callable[[str | None, str], Awaitable[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Introspection:
    endpoint: str
    client_id: str
    client_secret_ref: str
    timeout_s: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Issuer:
    """One trusted issuer, compiled from ``identity.issuers[]``."""

    issuer: str
    jwks_uri: str | None
    audiences: frozenset[str]
    algorithms: frozenset[str]
    leeway_s: int
    mapping: Mapping
    required_typ: str | None = None
    introspection: Introspection | None = None
    timeout_s: float = 5.0
    refetch_interval_s: float = 30.0


_REFUSALS: list[tuple[type[Exception], str]] = [
    (jwt_errors.ExpiredSignatureError, "the token has expired"),
    (jwt_errors.ImmatureSignatureError, "the token is not valid yet (nbf or iat ahead)"),
    (jwt_errors.InvalidAudienceError, "the token is for another audience, not this resource"),
    (jwt_errors.InvalidIssuerError, "the token's issuer is not trusted here"),
    (jwt_errors.MissingRequiredClaimError, "the token lacks a required claim"),
    (jwt_errors.InvalidSignatureError, "the token's signature does not verify"),
    (jwt_errors.InvalidAlgorithmError, "the token's algorithm is not allowed"),
]


@dataclass(slots=True)
class AccessTokens:
    """Verifies access tokens of the configured issuers and remembers verified ones."""

    issuers: list[Issuer]
    agent_exists: AgentExists
    secrets: SecretGetter | None = None
    clock: Callable[[], float] = time.time
    _by_iss: dict[str, tuple[Issuer, Jwks]] = field(default_factory=dict)
    _known: dict[str, tuple[Principal, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i in self.issuers:
            self._by_iss[i.issuer] = (i, Jwks(i.issuer, i.jwks_uri, timeout_s=i.timeout_s,
                                              refetch_interval_s=i.refetch_interval_s))

    def issuer(self, iss: str) -> Issuer | None:
        found = self._by_iss.get(iss)
        return found[0] if found else None

    def cached(self, token: str) -> Principal | None:
        """Without I/O: the principal of a token verified here and not expired."""
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
            return None
        found = self._known.get(hash_token(token))
        if found is None:
            return None
        if found[1] <= self.clock():
            self._known.pop(hash_token(token), None)
            return None
        return found[0]

    async def verify(self, token: str) -> Principal:
        """The principal of ``token``; :class:`TokenRefused` with the reason otherwise."""
        hit = self.cached(token)
        if hit is not None:
            return hit
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRefused(f"the token is longer than {MAX_TOKEN_CHARS} characters")
        if token.count(".") == 2:
            who, until = await self._jwt(token)
        else:
            who, until = await self._introspected(token)
        self._remember(token, who, until)
        return who

    def _remember(self, token: str, who: Principal, until: float) -> None:
        if len(self._known) >= MAX_CACHED:
            now = self.clock()
            self._known = {k: v for k, v in self._known.items() if v[1] > now}
        if len(self._known) < MAX_CACHED:
            self._known[hash_token(token)] = (who, until)

    async def _jwt(self, token: str) -> tuple[Principal, float]:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt_errors.PyJWTError:
            raise TokenRefused("the token is not a well-formed JWT") from None
        iss = unverified.get("iss")
        found = self._by_iss.get(iss) if isinstance(iss, str) else None
        if found is None:
            raise TokenRefused("the token's issuer is not trusted here")
        issuer, keys = found
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in issuer.algorithms & ALLOWED_ALGORITHMS:
            raise TokenRefused(f"the token's algorithm {str(alg)[:20]!r} is not allowed")
        if issuer.required_typ is not None and \
                str(header.get("typ", "")).lower() != issuer.required_typ.lower():
            raise TokenRefused(f"the token's typ is not {issuer.required_typ}")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("the token's kid is not a string")
        try:
            key = await keys.key(kid, alg)
        except ProviderError:
            raise TokenRefused("the issuer's signing keys cannot be had now") from None
        if key is None:
            raise TokenRefused("the token is signed with a key the issuer does not publish")
        claims = self._decode(token, key, alg, issuer)
        who = principal_of(issuer.mapping, claims, issuer.issuer, self.agent_exists)
        return who, float(claims["exp"])

    def _decode(self, token: str, key: Any, alg: str, issuer: Issuer) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=[alg], audience=sorted(issuer.audiences),
                issuer=issuer.issuer, leeway=issuer.leeway_s,
                options={"require": ["exp", "iss", "aud"], "strict_aud": False})
            return claims
        except jwt_errors.PyJWTError as exc:
            for kind, message in _REFUSALS:
                if isinstance(exc, kind):
                    raise TokenRefused(message) from None
            raise TokenRefused("the token is not a well-formed JWT") from None

    async def _introspected(self, token: str) -> tuple[Principal, float]:
        """RFC 7662 at the first issuer that introspects and calls the token active."""
        asked = [i for i in self.issuers if i.introspection is not None]
        if not asked:
            raise TokenRefused("the token is not a JWT (and no issuer introspects tokens)")
        for issuer in asked:
            data = await self._introspect(issuer, token)
            if data.get("active") is not True:
                continue
            return self._accept_introspected(issuer, data)
        raise TokenRefused("the token is not active")

    async def _introspect(self, issuer: Issuer, token: str) -> dict[str, Any]:
        intro = issuer.introspection
        assert intro is not None
        ref = parse_ref(intro.client_secret_ref)
        if ref is None or self.secrets is None:
            raise TokenRefused("token introspection is not configured with a secret")
        try:
            secret = await self.secrets(*ref)
            return await get_json(intro.endpoint, intro.timeout_s, method="POST",
                                  data={"token": token, "token_type_hint": "access_token"},
                                  auth=client_basic(intro.client_id, secret))
        except ProviderError:
            raise TokenRefused("the issuer's introspection cannot be had now") from None
        except Exception:  # the secret could not be resolved: said without its value
            raise TokenRefused("the introspection client's secret cannot be had") from None

    def _accept_introspected(self, issuer: Issuer, data: dict[str, Any]
                             ) -> tuple[Principal, float]:
        now = self.clock()
        if data.get("iss", issuer.issuer) != issuer.issuer:
            raise TokenRefused("the token's issuer is not trusted here")
        aud = data.get("aud")
        auds = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
        if not auds & issuer.audiences:
            raise TokenRefused("the token is for another audience, not this resource")
        exp = data.get("exp")
        if not isinstance(exp, int | float) or exp + issuer.leeway_s <= now:
            raise TokenRefused("the token has expired")
        who = principal_of(issuer.mapping, data, issuer.issuer, self.agent_exists)
        return who, min(float(exp), now + INTROSPECTION_CACHE_S)
