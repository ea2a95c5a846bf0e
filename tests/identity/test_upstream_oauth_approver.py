"""Token exchange on behalf of the person who approved the call (``oauth.subject:
approver``), against the real IdP (tests/support/idp.py) and an OAuth upstream
(tests/support/oauth_upstream.py): an agent's call waits for an approver; a person signs in
to the console (authorization code + PKCE, no browser: ``Idp.sign_in``) and approves it with
the session cookie and the CSRF token; the retried call reaches the upstream with a token
of the PERSON (``sub``) acted for by toolkeeper's client (``act``). The person's own token
never reaches the upstream, a result, the audit or a log; a call approved with a pasted
``tk_`` token stops with ``upstream_unauthorized`` and nothing is sent upstream."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import text

from tests.support.idp import TOKEN_EXCHANGE, Idp, client
from tests.support.loopback import serving_app
from tests.support.oauth_upstream import OAuthUpstream, sha256, start_oauth_upstream
from tests.support.serve import free_port
from toolkeeper import Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.identity import upstream_person
from toolkeeper.identity.upstream_person import PersonTokens
from toolkeeper.model.reasons import Reason
from toolkeeper.secrets.embedded import EmbeddedSecretsStore, generate_key_file, read_key_file
from toolkeeper.store import Store

DANA = {"name": "Dana Decider", "email": "dana@default.test", "groups": ["tk-approvers"],
        "tk_tenant": "default"}
HIGH = {"side_effect": "irreversible", "risk": "high"}


@dataclass
class World:
    gw: Gateway
    base: str
    idp: Idp
    up: OAuthUpstream
    agent_token: str

    def call(self, approval_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"tool": "appr_whoami", "arguments": {}}
        if approval_id:
            body["approval_id"] = approval_id
        got = httpx.post(f"{self.base}/tools/execute", json=body, timeout=30,
                         headers={"Authorization": f"Bearer {self.agent_token}"})
        out: dict[str, Any] = got.json()
        return out

    def pending(self) -> str:
        got = self.call()
        assert got["status"] == "approval_required", got
        return str(got["approval_id"])

    def sign_in(self) -> tuple[httpx.Client, str]:
        """A console session of dana: the client holding its cookie, its CSRF token."""
        http = httpx.Client(timeout=30, follow_redirects=False)
        login = http.get(f"{self.base}/auth/login")
        assert login.status_code == 303, login.text
        done = http.get(self.idp.sign_in(login.headers["location"], "dana"))
        assert done.status_code == 303, done.text
        me = http.get(f"{self.base}/auth/session").json()
        assert me["signed_in"] is True, me
        return http, str(me["csrf_token"])

    def post(self, http: httpx.Client, path: str, csrf: str) -> httpx.Response:
        return http.post(f"{self.base}{path}", json={},
                         headers={"Origin": self.base, "X-CSRF-Token": csrf})


def _config(tmp: Path, base: str, idp: Idp, up: OAuthUpstream) -> Path:
    doc = {
        "version": 1,
        "servers": [{"name": "appr", "url": up.mcp_url, "tools": {"whoami": HIGH}, **HIGH,
                     "oauth": {"token_endpoint": idp.endpoint("token_endpoint"),
                               "client_id": "tk-appr",
                               "client_secret": "${secret:idp/tk-appr}",
                               "grant": "token_exchange", "subject": "approver",
                               "scope": "upstream:call", "resource": up.resource}}],
        "profiles": [{"name": "p", "autonomy": 0, "activations": [{"tool": "appr_whoami"}]}],
        "agents": [{"name": "bot", "profile": "p"}],
        "identity": {"sso": {
            "issuer": idp.issuer, "client_id": "console",
            "client_secret": "${secret:sso/console}", "public_url": base,
            "claims": {"tenant_claim": "tk_tenant",
                       "person_name_claims": ["name", "email", "sub"], "roles": [
                           {"claim": "groups", "value": "tk-approvers",
                            "role": "approver"}]}}},
    }
    path = tmp / "toolkeeper.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def world(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("appr")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    xch = idp.add_client(client("tk-appr", grant_types=["client_credentials",
                                                        TOKEN_EXCHANGE]))["client_secret"]
    console = idp.add_client(client("console", grant_types=["authorization_code",
                                                            "refresh_token"],
                                    redirect_uris=[f"{base}/auth/callback"]))["client_secret"]
    idp.add_user("dana", **DANA)
    url = f"sqlite:///{tmp}/tk.db"
    key_file = tmp / "secrets.key"
    generate_key_file(key_file)
    store = Store.open(url)
    sealer = EmbeddedSecretsStore(store.blobs, read_key_file(key_file, "key"))
    sealer.set_secret("idp", "tk-appr", xch)
    sealer.set_secret("sso", "console", console)
    store.close()
    with start_oauth_upstream(idp, tmp, mode="jwt") as up, \
            Gateway.open(url, config=_config(tmp, base, idp, up), secrets="embedded",
                         secrets_key_file=key_file) as gw:
        tk = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")[1]
        with serving_app(create_app(gw, ApiSettings()), what="toolkeeper", port=port,
                         lifespan="on"):
            yield World(gw=gw, base=base, idp=idp, up=up, agent_token=tk)


def _everything(gw: Gateway) -> str:
    gw.flush()
    with gw.store.db.engine.connect() as conn:
        parts = []
        for table in ("audit_events", "outcomes", "approvals", "console_sessions"):
            parts += [repr(tuple(r)) for r in conn.execute(text(f"SELECT * FROM {table}"))]
    return "\n".join(parts)


def _person_token(gw: Gateway, key: str) -> dict[str, Any] | None:
    """The kept token set (white-box, to check where it never goes)."""
    people = PersonTokens(gw.credentials)
    return people._get("default", key)


def test_a_call_approved_by_a_signed_in_person_acts_for_that_person_upstream(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    world.gw.redact_logs()
    approval_id = world.pending()
    seen = len(world.up.seen())
    http, csrf = world.sign_in()
    try:
        kept = _person_token(world.gw, upstream_person._person(world.idp.issuer, "dana"))
        assert kept is not None and kept["sub"] == "dana"
        person_token = str(kept["a"])
        ok = world.post(http, f"/approvals/{approval_id}/approve", csrf)
        assert ok.status_code == 200, ok.text
        # signing out after approving does not take the approved call's token away
        assert world.post(http, "/auth/logout", csrf).status_code == 200
    finally:
        http.close()
    assert _person_token(world.gw, upstream_person._person(world.idp.issuer, "dana")) is None
    got = world.call(approval_id)
    assert got["status"] == "succeeded", got
    out = got["output"]
    who = out.get("result", out) if isinstance(out, dict) else out
    assert who["sub"] == "dana" and who["act"] == {"sub": "tk-appr"}, who
    hashes = {s["sha256"] for s in world.up.seen()[seen:]}
    assert hashes and sha256(person_token) not in hashes
    after = len(world.up.seen())
    # the copy bound to the approval went with the call it served
    assert _person_token(world.gw, upstream_person._approval(approval_id)) is None
    everything = _everything(world.gw) + str(got) + caplog.text
    assert person_token not in everything
    # the approval is used up: the call does not run twice
    again = world.call(approval_id)
    assert again["status"] != "succeeded", again
    assert len(world.up.seen()) == after


def test_a_call_approved_with_a_pasted_token_stops_and_nothing_goes_upstream(
        world: World) -> None:
    approval_id = world.pending()
    approver = world.gw.store.tokens.create(tenant_id="default", role="approver")[1]
    ok = httpx.post(f"{world.base}/approvals/{approval_id}/approve", json={}, timeout=30,
                    headers={"Authorization": f"Bearer {approver}"})
    assert ok.status_code == 200, ok.text
    seen = len(world.up.seen())
    got = world.call(approval_id)
    assert got["status"] != "succeeded", got
    assert got["reason"] == Reason.UPSTREAM_UNAUTHORIZED, got
    assert "not given by a person signed in" in got["message"], got
    assert len(world.up.seen()) == seen


def test_without_binding_at_approval_the_call_stops(world: World,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose: approving does not bind the person's token set → the
    call must not run on anyone's behalf (nothing upstream)."""
    monkeypatch.setattr(PersonTokens, "bind", lambda *_a, **_k: False)
    approval_id = world.pending()
    http, csrf = world.sign_in()
    try:
        assert world.post(http, f"/approvals/{approval_id}/approve", csrf).status_code == 200
    finally:
        http.close()
    seen = len(world.up.seen())
    got = world.call(approval_id)
    assert got["reason"] == Reason.UPSTREAM_UNAUTHORIZED, got
    assert len(world.up.seen()) == seen


def test_an_unapproved_path_to_the_upstream_stops(world: World) -> None:
    """No approval consumed (e.g. a gate that let it through): the exchange is refused."""
    import asyncio

    from toolkeeper.identity.upstream import Unauthorized
    from toolkeeper.upstream.servers import UpstreamOAuth

    tokens = world.gw.upstreams.tokens
    oauth = UpstreamOAuth.model_validate({
        "token_endpoint": world.idp.endpoint("token_endpoint"), "client_id": "tk-appr",
        "grant": "token_exchange", "subject": "approver"})
    with pytest.raises(Unauthorized, match="consumed no approval"):
        asyncio.run(tokens.token(oauth, tenant_id="default", upstream="appr", secret=None))


def _approved_by_dana(world: World) -> str:
    approval_id = world.pending()
    http, csrf = world.sign_in()
    try:
        assert world.post(http, f"/approvals/{approval_id}/approve", csrf).status_code == 200
    finally:
        http.close()
    return approval_id


def _expire_copy(world: World, approval_id: str) -> str:
    """Make the approval's kept access token expired (here, and revoked at the IdP, so
    only a refreshed one can be exchanged); the old token."""
    people = PersonTokens(world.gw.credentials)
    key = upstream_person._approval(approval_id)
    data = people._get("default", key)
    assert data is not None and data["r"], data  # the console may refresh
    data["exp"] = 0
    assert people._put("default", key, data)
    world.idp.revoke(str(data["a"]))
    return str(data["a"])


def test_an_expired_approver_token_is_refreshed_first(world: World) -> None:
    approval_id = _approved_by_dana(world)
    old = _expire_copy(world, approval_id)
    got = world.call(approval_id)
    assert got["status"] == "succeeded", got
    out = got["output"]
    who = out.get("result", out) if isinstance(out, dict) else out
    assert who["sub"] == "dana" and who["act"] == {"sub": "tk-appr"}, who
    assert old not in str(got)


def test_without_refreshing_an_expired_approver_token_the_call_stops(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose (no refresher): the expired token is not exchanged, the
    call stops with the clear reason and nothing goes upstream."""
    monkeypatch.setattr(world.gw.upstreams.tokens.people, "refresher", None)
    approval_id = _approved_by_dana(world)
    _expire_copy(world, approval_id)
    seen = len(world.up.seen())
    got = world.call(approval_id)
    assert got["reason"] == Reason.UPSTREAM_UNAUTHORIZED, got
    assert "expired" in got["message"], got
    assert len(world.up.seen()) == seen
