"""An issuer's signing keys (its JWKS), fetched over HTTP and kept.

Everything read from the provider is bounded: one fetch takes at most ``timeout_s`` (connect,
read and the whole exchange), a document at most :data:`MAX_DOCUMENT_BYTES`, a key set at
most :data:`MAX_KEYS` keys. Keys already held keep verifying tokens while the endpoint is
down, slow or answering garbage; an unknown ``kid`` triggers a refetch (that is how a key
rotated at the provider is picked up) at most once per ``refetch_interval_s``, shared by
every request that asks meanwhile, so a stream of tokens with made-up kids costs the
provider one request per interval. Symmetric keys (``kty: oct``) are never taken from a
JWKS: a verifier that held one could be fooled by an HS256 token signed with public data.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus

import anyio
import httpx
import orjson
from jwt import PyJWK
from jwt.exceptions import PyJWKError

log = logging.getLogger("toolkeeper.identity")

MAX_DOCUMENT_BYTES = 256 * 1024
MAX_KEYS = 100
KEY_TYPES = {"RS256": "RSA", "RS384": "RSA", "RS512": "RSA", "PS256": "RSA", "PS384": "RSA",
             "PS512": "RSA", "ES256": "EC", "ES384": "EC", "ES512": "EC", "EdDSA": "OKP"}
"""Which ``kty`` each allowed algorithm verifies with."""


class ProviderError(Exception):
    """The provider's answer could not be had or used (message names what; no secrets)."""


async def get_json(url: str, timeout_s: float, *, method: str = "GET",
                   data: dict[str, str] | None = None,
                   auth: httpx.Auth | None = None) -> dict[str, Any]:
    """A JSON object from ``url``, bounded in time and size; :class:`ProviderError` else."""
    try:
        with anyio.fail_after(timeout_s):
            async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as http, \
                    http.stream(method, url, data=data, auth=auth,
                                headers={"accept": "application/json"}) as answer:
                if answer.status_code != 200:
                    raise ProviderError(f"{url} answered HTTP {answer.status_code}")
                body = bytearray()
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise ProviderError(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
    except TimeoutError:
        raise ProviderError(f"{url} did not answer within {timeout_s} s") from None
    except httpx.HTTPError as exc:
        raise ProviderError(f"{url} could not be reached ({type(exc).__name__})") from None
    try:
        doc = orjson.loads(bytes(body))
    except orjson.JSONDecodeError:
        raise ProviderError(f"{url} did not send JSON") from None
    if not isinstance(doc, dict):
        raise ProviderError(f"{url} did not send a JSON object")
    return doc


def client_basic(client_id: str, secret: str) -> httpx.BasicAuth:
    """``client_secret_basic`` credentials for an authorization server: RFC 6749 §2.3.1
    form-encodes both before Basic (a secret with ``+``, ``%``, ``:`` or ``/`` reaches the
    server unchanged). One rule for introspection and for upstream token requests."""
    return httpx.BasicAuth(quote_plus(client_id), quote_plus(secret))


def parse_keys(doc: dict[str, Any]) -> dict[str, PyJWK]:
    """The usable signature keys of a JWKS document by ``kid`` (others are skipped)."""
    keys = doc.get("keys")
    if not isinstance(keys, list):
        raise ProviderError("the JWKS has no keys list")
    out: dict[str, PyJWK] = {}
    for jwk in keys[:MAX_KEYS]:
        if not isinstance(jwk, dict) or jwk.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if jwk.get("use", "sig") != "sig" or not isinstance(jwk.get("kid", ""), str):
            continue
        try:
            out[jwk.get("kid", "")] = PyJWK(jwk)
        except (PyJWKError, ValueError, TypeError):
            continue  # one odd key does not spoil the others
    return out


class Jwks:
    """One issuer's keys. ``jwks_uri`` ``None``: discovered from the issuer's metadata."""

    def __init__(self, issuer: str, jwks_uri: str | None, *, timeout_s: float = 5.0,
                 refetch_interval_s: float = 30.0, max_age_s: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer = issuer
        self.jwks_uri = jwks_uri
        self.timeout_s = timeout_s
        self.refetch_interval_s = refetch_interval_s
        self.max_age_s = max_age_s
        self._clock = clock
        self._keys: dict[str, PyJWK] = {}
        self._fetched_at: float | None = None
        self._tried_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def key(self, kid: str | None, alg: str) -> PyJWK | None:
        """The key that verifies a token with header ``kid``/``alg``; ``None`` when none
        known (after at most one bounded refetch); :class:`ProviderError` when the key set
        could never be had."""
        found = self._pick(kid, alg)
        stale = self._fetched_at is None or self._clock() - self._fetched_at > self.max_age_s
        if (found is None or stale) and self._may_fetch():
            await self._refresh()
            found = self._pick(kid, alg)
        if found is None and self._fetched_at is None:
            raise ProviderError(f"the signing keys of {self.issuer} could not be fetched")
        return found

    def _pick(self, kid: str | None, alg: str) -> PyJWK | None:
        if kid is None:  # a kid-less token only when the set has one key that fits
            fits = [k for k in self._keys.values() if self._fits(k, alg)]
            return fits[0] if len(fits) == 1 else None
        key = self._keys.get(kid)
        return key if key is not None and self._fits(key, alg) else None

    def _fits(self, key: PyJWK, alg: str) -> bool:
        jwk = key._jwk_data
        return jwk.get("kty") == KEY_TYPES.get(alg) and jwk.get("alg", alg) == alg

    def _may_fetch(self) -> bool:
        running = self._task is not None and not self._task.done()
        return running or self._tried_at is None or \
            self._clock() - self._tried_at >= self.refetch_interval_s

    async def _refresh(self) -> None:
        """One fetch at a time; whoever asks meanwhile waits for it (bounded by its
        timeouts), a caller going away leaves it to the others."""
        loop = asyncio.get_running_loop()
        task = self._task
        if task is None or task.done() or task.get_loop() is not loop:
            self._tried_at = self._clock()
            task = self._task = loop.create_task(self._fetch())
        await asyncio.shield(task)

    async def _fetch(self) -> None:
        try:
            uri = self.jwks_uri or await self._discover()
            keys = parse_keys(await get_json(uri, self.timeout_s))
        except ProviderError as exc:
            log.warning("identity: keys of %s not refreshed: %s (%d cached keys kept)",
                        self.issuer, exc, len(self._keys))
            return
        self._keys, self._fetched_at = keys, self._clock()

    async def _discover(self) -> str:
        """RFC 8414 / OIDC discovery: the metadata must name this exact issuer."""
        base = self.issuer.rstrip("/")
        last: ProviderError | None = None
        for doc_path in ("/.well-known/openid-configuration",
                         "/.well-known/oauth-authorization-server"):
            try:
                meta = await get_json(base + doc_path, self.timeout_s)
            except ProviderError as exc:
                last = exc
                continue
            uri = meta.get("jwks_uri")
            if meta.get("issuer") != self.issuer or not isinstance(uri, str):
                last = ProviderError(f"{base + doc_path} names another issuer or no jwks_uri")
                continue
            self.jwks_uri = uri
            return uri
        raise last or ProviderError(f"no metadata for {self.issuer}")
