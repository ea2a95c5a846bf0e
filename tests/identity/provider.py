"""A small loopback key server the test controls, for what a real identity provider cannot
be made to do: a JWKS endpoint that is down, slow or answers garbage. Tokens are signed here
with keys made here (the real provider's own tokens are in test_resource_faces.py)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.loopback import serving


@dataclass
class Provider:
    """The issuer ``url``; ``mode`` is ``ok``, ``down`` (503), ``slow`` or ``garbage``."""

    url: str = ""
    mode: str = "ok"
    keys: dict[str, Any] = field(default_factory=dict)
    fetches: int = 0

    def new_key(self) -> str:
        kid = f"k-{secrets.token_hex(4)}"
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return kid

    def jwks(self) -> dict[str, Any]:
        out = []
        for kid, key in self.keys.items():
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            out.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
        return {"keys": out}

    def sign(self, kid: str, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": "https://tk.example", "sub": "svc-1",
                "client_id": "bot", "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, self.keys[kid], algorithm="RS256",
                          headers={"kid": kid, "typ": "at+jwt"})


@contextmanager
def provider() -> Iterator[Provider]:
    state = Provider()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                return self._send(200, json.dumps(
                    {"issuer": state.url, "jwks_uri": state.url + "/jwks"}).encode())
            state.fetches += 1
            if state.mode == "down":
                return self._send(503, b"{}")
            if state.mode == "slow":
                time.sleep(3)
            if state.mode == "garbage":
                return self._send(200, b"<html>not json")
            return self._send(200, json.dumps(state.jwks()).encode())

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(Handler) as url:
        state.url = url
        yield state
