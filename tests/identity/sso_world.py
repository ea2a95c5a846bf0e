"""A gateway whose console signs people in at the real test IdP (tests/support/idp.py), for
the single sign-on tests: ``sso_world`` serves it on loopback with a ``pay`` tool that needs
an approver (autonomy 0) and counts its executions in a file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from tests.support.idp import Idp, client
from tests.support.loopback import serving_app
from tests.support.serve import free_port
from toolkeeper import Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.identity.sso import Sso

SECRET_ENV = "TOOLKEEPER_SECRET_SSO__CONSOLE"
DANA = {"name": "Dana Decider", "email": "dana@default.test", "groups": ["tk-approvers"],
        "tk_tenant": "default"}
"""An approver of the tenant the agent is in (``alice`` of the IdP's defaults is in
``acme``; ``bob`` matches no role rule)."""


@dataclass
class SsoWorld:
    gw: Gateway
    base: str
    idp: Idp
    agent_token: str
    paid: Path
    sso: Sso

    def url(self, path: str) -> str:
        return self.base + path

    def browser(self) -> httpx.Client:
        return httpx.Client(timeout=20, follow_redirects=False)

    def sign_in(self, user: str = "dana", http: httpx.Client | None = None) -> httpx.Client:
        """``http`` (a new client by default) holding a console session of ``user``."""
        http = http or self.browser()
        login = http.get(self.url("/auth/login"))
        assert login.status_code == 303, login.text
        callback = self.idp.sign_in(login.headers["location"], user)
        done = http.get(callback)
        assert done.status_code == 303, done.text
        assert done.headers["location"] == "/ui/"
        return http

    def session(self, http: httpx.Client) -> dict[str, Any]:
        got = http.get(self.url("/auth/session"))
        assert got.status_code == 200, got.text
        body: dict[str, Any] = got.json()
        assert body["signed_in"] is True, body
        return body

    def unsafe(self, http: httpx.Client, path: str, csrf: str | None, *,
               origin: str | None = None, json: Any = None) -> httpx.Response:
        headers = {"Origin": origin or self.base}
        if csrf is not None:
            headers["X-CSRF-Token"] = csrf
        return http.post(self.url(path), headers=headers, json=json if json is not None else {})

    def pending(self, invoice: str) -> str:
        """A ``pay`` call of the agent, waiting for an approver: its approval id."""
        got = self.pay(invoice)
        assert got["status"] == "approval_required", got
        return str(got["approval_id"])

    def pay(self, invoice: str, approval_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"tool": "pay", "arguments": {"invoice": invoice,
                                                            "path": str(self.paid)}}
        if approval_id:
            body["approval_id"] = approval_id
        got = httpx.post(self.url("/tools/execute"), json=body, timeout=20,
                         headers={"Authorization": f"Bearer {self.agent_token}"})
        out: dict[str, Any] = got.json()
        return out

    def payments(self, invoice: str) -> int:
        if not self.paid.exists():
            return 0
        return self.paid.read_text().splitlines().count(invoice)


def _config(tmp: Path, base: str, idp: Idp, **sso: Any) -> Path:
    doc = {"version": 1, "secrets": {"backend": "env"},
           "tools": [{"native": "tests.support.replica_tools:pay"}],
           "profiles": [{"name": "payer", "autonomy": 0, "activations": [{"tool": "pay"}]}],
           "agents": [{"name": "pay-bot", "profile": "payer"}],
           "identity": {"sso": {
               "issuer": idp.issuer, "client_id": "console",
               "client_secret": "${secret:sso/console}", "public_url": base,
               "claims": {"tenant_claim": "tk_tenant",
                          "person_name_claims": ["name", "email", "sub"], "roles": [
                   {"claim": "groups", "value": "tk-approvers", "role": "approver"}]},
               **sso}}}
    path = tmp / "toolkeeper.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@contextmanager
def sso_world(idp: Idp, tmp: Path, *, console_secret: str | None = None,
              **sso: Any) -> Iterator[SsoWorld]:
    """The gateway served on loopback, its console registered at ``idp`` as the
    confidential client ``console`` (its secret in the environment, read through
    ``${secret:sso/console}``)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    secret = idp.add_client(client("console", grant_types=["authorization_code"],
                                   redirect_uris=[f"{base}/auth/callback"],
                                   secret=console_secret))["client_secret"]
    idp.add_user("dana", **DANA)
    old = os.environ.get(SECRET_ENV)
    os.environ[SECRET_ENV] = secret
    try:
        with Gateway.open(f"sqlite:///{tmp}/tk.db", config=_config(tmp, base, idp, **sso)) as gw:
            token = gw.store.tokens.create(tenant_id="default", role="agent",
                                           agent="pay-bot")[1]
            app = create_app(gw, ApiSettings())
            with serving_app(app, what="toolkeeper", port=port, lifespan="on"):
                yield SsoWorld(gw=gw, base=base, idp=idp, agent_token=token,
                               paid=tmp / "paid.txt", sso=app.state.sso)
    finally:
        if old is None:
            os.environ.pop(SECRET_ENV, None)
        else:
            os.environ[SECRET_ENV] = old


def host_of(url: str) -> str:
    return urlsplit(url).netloc
