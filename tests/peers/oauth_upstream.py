"""An upstream that itself requires OAuth, for the upstream-OAuth tests: an MCP server on the
official SDK (``MCPServer`` with a ``TokenVerifier`` and ``AuthSettings``) over streamable
HTTP at ``/mcp``, plus a plain JSON endpoint ``POST /api/echo`` behind the same check.

    python tests/peers/oauth_upstream.py CONFIG.json

CONFIG (written by tests/support/oauth_upstream.py): ``ready_file`` (``{"port": N}`` once
listening), ``issuer`` and ``jwks_uri`` and ``introspection_endpoint`` of the test IdP,
``introspector`` ``[client_id, secret]``, ``mode`` (``jwt``: JWT access tokens verified
against the IdP's JWKS; ``introspect``: every token introspected (RFC 7662), so revocation
at the IdP takes effect at once; ``auto``: a JWS is verified, anything else introspected),
``required_scopes``.

The resource is this server's origin ``http://127.0.0.1:PORT`` (one resource for ``/mcp``
and ``/api/echo``): a token is accepted only if its issuer is the IdP, its ``aud`` is that
URL, it has not expired, and it has every required scope. Otherwise 401 with
``WWW-Authenticate: Bearer error="invalid_token", ..., resource_metadata="<origin>/.well-known/
oauth-protected-resource"`` (403 ``insufficient_scope`` for a missing scope), and the RFC 9728
document is served there.

Tools: ``whoami`` (the ``sub``, ``client_id``, ``act``, ``scope``, ``aud`` of the token it
got) and ``echo``. ``GET /_test/seen`` (no auth; a test peer) lists the SHA-256 of every
bearer token presented and whether it was accepted, so a test can assert which tokens
reached the upstream without the upstream keeping any token.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

ALGORITHMS = ["RS256", "ES256"]
HTTP_TIMEOUT_S = 5.0
MAX_BODY = 64 * 1024


class Verifier:
    """The upstream's token check (JWT via JWKS, or introspection), recording each token's
    SHA-256 and the verdict."""

    def __init__(self, config: dict[str, Any], resource: str) -> None:
        self.config = config
        self.resource = resource
        self.mode = config.get("mode", "auto")
        self.jwks = jwt.PyJWKClient(config["jwks_uri"], cache_keys=True, timeout=5)
        self.seen: list[dict[str, Any]] = []

    async def verify_token(self, token: str) -> AccessToken | None:
        claims = None
        try:
            if self.mode == "jwt" or (self.mode == "auto" and token.count(".") == 2):
                claims = await anyio.to_thread.run_sync(self._verify_jwt, token)
            else:
                claims = await self._introspect(token)
        except Exception as exc:  # a refusal, whatever broke
            print(f"refused a token: {type(exc).__name__}: {exc}", file=sys.stderr)
        self.seen.append({"sha256": hashlib.sha256(token.encode()).hexdigest(),
                          "accepted": claims is not None})
        if claims is None:
            return None
        return AccessToken(
            token=token, client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(), expires_at=claims.get("exp"),
            resource=self.resource, subject=claims.get("sub"),
            claims={k: claims.get(k) for k in ("iss", "aud", "act", "sub", "client_id",
                                               "scope", "tk_tenant")})

    def _verify_jwt(self, token: str) -> dict[str, Any]:
        if jwt.get_unverified_header(token).get("typ") != "at+jwt":
            raise jwt.InvalidTokenError("not an access token (typ)")
        key = self.jwks.get_signing_key_from_jwt(token)
        return dict(jwt.decode(token, key=key, algorithms=ALGORITHMS, audience=self.resource,
                               issuer=self.config["issuer"],
                               options={"require": ["exp", "iss", "aud", "sub"]}))

    async def _introspect(self, token: str) -> dict[str, Any] | None:
        client_id, secret = self.config["introspector"]
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            answer = await http.post(self.config["introspection_endpoint"],
                                     data={"token": token}, auth=(client_id, secret))
        answer.raise_for_status()
        body = answer.json()
        if body.get("active") is not True:
            raise ValueError("inactive")
        if body.get("iss") != self.config["issuer"]:
            raise ValueError("wrong issuer")
        if body.get("aud") != self.resource:
            raise ValueError("wrong audience")
        if not isinstance(body.get("exp"), int) or body["exp"] < time.time():
            raise ValueError("expired")
        # oidc-provider leaves out `sub` for client credentials; RFC 9068 makes it the client
        body.setdefault("sub", body.get("client_id"))
        return dict(body)


def build(config: dict[str, Any], port: int) -> Any:
    resource = f"http://127.0.0.1:{port}"
    verifier = Verifier(config, resource)
    scopes = list(config.get("required_scopes") or [])
    server = MCPServer(
        "oauth-upstream", token_verifier=verifier,
        auth=AuthSettings(issuer_url=AnyHttpUrl(config["issuer"]),
                          resource_server_url=AnyHttpUrl(resource),
                          required_scopes=scopes or None,
                          validate_token_resource=False))  # Verifier checks aud itself

    @server.tool()
    def whoami() -> dict[str, Any]:
        """Who the upstream thinks is calling: the token's sub, client_id, act, scope, aud."""
        token = get_access_token()
        claims = token.claims if token is not None and token.claims else {}
        return {k: claims.get(k) for k in ("sub", "client_id", "act", "scope", "aud")}

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    app = server.streamable_http_app()
    metadata_url = build_resource_metadata_url(AnyHttpUrl(resource))

    async def api_echo(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        body = await request.body()
        if len(body) > MAX_BODY:
            await JSONResponse({"error": "too large"}, status_code=413)(scope, receive, send)
            return
        try:
            echoed = json.loads(body or b"null")
        except ValueError:
            await JSONResponse({"error": "not JSON"}, status_code=400)(scope, receive, send)
            return
        token = scope["user"].access_token
        claims = token.claims or {}
        answer = {"echo": echoed,
                  "sub": claims.get("sub"), "client_id": claims.get("client_id"),
                  "act": claims.get("act"), "scope": claims.get("scope")}
        await JSONResponse(answer)(scope, receive, send)

    async def seen(request: Request) -> JSONResponse:
        return JSONResponse(verifier.seen)

    async def protected_resource(request: Request) -> JSONResponse:
        # Ours, ahead of the SDK's: mcp 2.3.0's document adds a "/" to both URLs
        # (pydantic AnyHttpUrl), and RFC 8414 compares the issuer exactly.
        return JSONResponse({"resource": resource, "authorization_servers": [config["issuer"]],
                             "scopes_supported": scopes, "bearer_methods_supported": ["header"]})

    app.router.routes.append(Route("/api/echo", methods=["POST"],
                                   endpoint=RequireAuthMiddleware(api_echo, scopes, metadata_url)))
    app.router.routes.append(Route("/_test/seen", endpoint=seen, methods=["GET"]))
    app.router.routes.insert(0, Route("/.well-known/oauth-protected-resource",
                                      endpoint=protected_resource, methods=["GET"]))
    return app


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    app = build(config, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    ready = Path(config["ready_file"])

    async def serve() -> None:
        async def announce() -> None:
            while not server.started:
                await anyio.sleep(0.02)
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(json.dumps({"port": port}))
            tmp.rename(ready)

        async with anyio.create_task_group() as group:
            group.start_soon(announce)
            await server.serve(sockets=[sock])

    anyio.run(serve)


if __name__ == "__main__":
    main()
