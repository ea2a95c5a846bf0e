"""An upstream MCP server (and HTTP endpoint) that requires OAuth tokens from the test IdP:
tests/peers/oauth_upstream.py in a child process of the venv's Python.

    with start_oauth_upstream(idp, tmp_path, mode="introspect") as upstream:
        upstream.resource   # http://127.0.0.1:PORT  (registered at the IdP as a resource)
        upstream.mcp_url    # http://127.0.0.1:PORT/mcp  (streamable HTTP)
        upstream.echo_url   # http://127.0.0.1:PORT/api/echo  (POST JSON, echoed back)
        token = idp.client_credentials("toolkeeper", resource=upstream.resource,
                                       scope="upstream:call")["access_token"]

``mode``: ``jwt`` (JWT access tokens checked against the IdP's JWKS; revocation does not
reach them), ``introspect`` (the IdP issues opaque tokens for this resource and the upstream
introspects each one, so ``idp.revoke``/``idp.revoke_grants`` take effect at once) or
``auto`` (JWT tokens for the resource; a JWS is verified locally, anything else
introspected). ``required_scopes`` (default ``["upstream:call"]``, the resource's scope at
the IdP): a token without them gets 403 ``insufficient_scope``. No token, a wrong audience,
a wrong issuer, an expired or revoked token: 401 with ``WWW-Authenticate: Bearer
error="invalid_token", error_description=..., resource_metadata=".../.well-known/
oauth-protected-resource"``.

``upstream.seen()``: the SHA-256 and verdict of every bearer token the upstream was shown
(``sha256(token)`` to compare), e.g. to assert a client's own token never reached it.
``upstream.log()``: its stderr (refusal reasons, never a token).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.support.idp import Idp
from tests.support.processes import child_env, stop

SCRIPT = Path(__file__).resolve().parents[1] / "peers" / "oauth_upstream.py"
START_TIMEOUT_S = 30.0


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class OAuthUpstream:
    def __init__(self, home: Path, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.home = home
        self.port = port
        self.proc = proc

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def resource(self) -> str:
        """The RFC 8707 resource (token ``aud``), as its RFC 9728 document names it: the
        origin, without a trailing ``/``."""
        return self.origin

    @property
    def mcp_url(self) -> str:
        return f"{self.origin}/mcp"

    @property
    def echo_url(self) -> str:
        return f"{self.origin}/api/echo"

    @property
    def metadata_url(self) -> str:
        return f"{self.origin}/.well-known/oauth-protected-resource"

    def seen(self) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.origin}/_test/seen", timeout=5)
        answer.raise_for_status()
        return list(answer.json())

    def log(self) -> str:
        try:
            return (self.home / "upstream.log").read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"


@contextlib.contextmanager
def start_oauth_upstream(idp: Idp, tmp_path: Path | None = None, *, mode: str = "auto",
                         required_scopes: Sequence[str] = ("upstream:call",),
                         scope: str | None = None,
                         ttl_s: int | None = None) -> Iterator[OAuthUpstream]:
    """The upstream for the ``with`` block, its origin registered at ``idp`` as a resource
    (scopes ``scope``, default the required ones plus ``upstream:read``; opaque tokens in
    ``introspect`` mode, JWT otherwise; ``ttl_s`` its access-token lifetime)."""
    if mode not in ("jwt", "introspect", "auto"):
        raise ValueError(f"mode: {mode!r}")
    home = Path(tempfile.mkdtemp(prefix="toolkeeper-upstream-", dir=tmp_path))
    ready = home / "ready.json"
    config = {"ready_file": str(ready), "issuer": idp.issuer, "mode": mode,
              "jwks_uri": idp.endpoint("jwks_uri"),
              "introspection_endpoint": idp.endpoint("introspection_endpoint"),
              "introspector": list(idp.introspector), "required_scopes": list(required_scopes)}
    config_path = home / "config.json"
    config_path.write_text(json.dumps(config))
    config_path.chmod(0o600)
    with (home / "upstream.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, str(SCRIPT), str(config_path)],
                                env=child_env(), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                log_text = (home / "upstream.log").read_text(errors="replace")[-4000:]
                raise RuntimeError(f"the OAuth upstream did not start; its log:\n{log_text}")
            time.sleep(0.05)
        upstream = OAuthUpstream(home, int(json.loads(ready.read_text())["port"]), proc)
        idp.add_resource(upstream.resource,
                         scope=scope or " ".join([*required_scopes, "upstream:read"]),
                         format="opaque" if mode == "introspect" else "jwt", ttl_s=ttl_s)
        yield upstream
    finally:
        stop(proc, grace_s=10)
