"""The console's single sign-on against the real test IdP: a person signs in (authorization
code + PKCE), approves an agent's call with the session cookie and the CSRF token, the call
runs once, and the approval and the audit name their subject and issuer; sign-out ends the
session server-side."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import httpx
import pytest

from tests.identity.sso_world import DANA, SsoWorld, sso_world
from tests.support.idp import Idp


@pytest.fixture(scope="module")
def world(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SsoWorld]:
    with sso_world(idp, tmp_path_factory.mktemp("sso")) as w:
        yield w


def test_session_says_sso_is_configured_before_sign_in(world: SsoWorld) -> None:
    got = httpx.get(world.url("/auth/session"), timeout=10)
    assert got.status_code == 200
    assert got.json() == {"sso": True, "signed_in": False}


def test_login_redirect_uses_pkce_state_nonce_and_a_pre_login_cookie(world: SsoWorld) -> None:
    with world.browser() as http:
        login = http.get(world.url("/auth/login"))
    assert login.status_code == 303
    target = httpx.URL(login.headers["location"])
    assert str(target).startswith(world.idp.endpoint("authorization_endpoint"))
    q = target.params
    assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
    assert q["state"] and q["nonce"] and q["client_id"] == "console"
    assert q["redirect_uri"] == world.url("/auth/callback")
    cookie = login.headers["set-cookie"].lower()
    assert "tk_sso_login=" in cookie and "httponly" in cookie and "samesite=lax" in cookie


def test_a_signed_in_person_approves_and_the_call_runs_once_under_their_name(
        world: SsoWorld) -> None:
    approval_id = world.pending("inv-sso-1")
    with world.browser() as http:
        world.sign_in("dana", http)
        me = world.session(http)
        assert (me["name"], me["subject"], me["tenant"]) == ("Dana Decider", "dana", "default")
        assert me["roles"] == ["approver"] and me["issuer"] == world.idp.issuer
        cookie = next(iter(http.cookies.jar))
        assert cookie.name == "tk_session" and cookie.has_nonstandard_attr("HttpOnly")
        ok = world.unsafe(http, f"/approvals/{approval_id}/approve", me["csrf_token"])
        assert ok.status_code == 200, ok.text
        assert ok.json()["decided_by"] == "Dana Decider"
        assert ok.json()["decided_by_subject"] == "dana"
        assert ok.json()["decided_by_issuer"] == world.idp.issuer
        shown = http.get(world.url(f"/approvals/{approval_id}")).json()
        assert shown["decided_by_subject"] == "dana"
    first = world.pay("inv-sso-1", approval_id)
    assert first["status"] == "succeeded", first
    again = world.pay("inv-sso-1", approval_id)
    assert again["status"] != "succeeded"
    assert world.payments("inv-sso-1") == 1
    events = [e for e in world.gw.store.audit.list("default", types=["approval.granted"],
                                                    limit=500)
              if e.data.get("approval_id") == approval_id]
    assert len(events) == 1
    assert events[0].data["by"] == "Dana Decider"
    assert events[0].data["by_subject"] == "dana"
    assert events[0].data["by_issuer"] == world.idp.issuer


def test_logout_ends_the_session_server_side(world: SsoWorld) -> None:
    with world.browser() as http:
        world.sign_in("dana", http)
        me = world.session(http)
        stolen = dict(http.cookies)
        out = world.unsafe(http, "/auth/logout", me["csrf_token"])
        assert out.status_code == 200, out.text
        assert out.json()["logout_url"].startswith(world.idp.endpoint("end_session_endpoint"))
    # the cookie's value, replayed after sign-out, opens nothing
    with httpx.Client(timeout=10, cookies=stolen) as replay:
        after = replay.get(world.url("/approvals"))
        assert after.status_code == 401
        assert after.json()["error"]["reason"] == "session_expired"


def test_a_person_no_role_rule_matches_is_not_let_in(world: SsoWorld) -> None:
    with world.browser() as http:
        login = http.get(world.url("/auth/login"))
        done = http.get(world.idp.sign_in(login.headers["location"], "bob"))
        assert done.status_code == 403
        assert done.json()["error"]["reason"] == "forbidden"
        assert "tk_session" not in http.cookies


def test_the_store_keeps_only_a_hash_of_the_session_id(world: SsoWorld) -> None:
    with world.browser() as http:
        world.sign_in("dana", http)
        value = http.cookies["tk_session"]
        with world.gw.store.db.engine.connect() as conn:  # closed: an open read would
            rows = conn.exec_driver_sql(  # hold SQLite's lock against the next sign-in
                "select id_hash from console_sessions").fetchall()
        assert all(value not in str(r) for r in rows)
        assert rows


def test_a_denial_by_a_signed_in_person_names_them_too(world: SsoWorld) -> None:
    approval_id = world.pending("inv-sso-deny")
    with world.browser() as http:
        me = world.session(world.sign_in("dana", http))
        no = world.unsafe(http, f"/approvals/{approval_id}/deny", me["csrf_token"],
                          json={"note": "not this one"})
        assert no.status_code == 200, no.text
        assert (no.json()["status"], no.json()["decided_by_subject"]) == ("denied", "dana")
    assert world.pay("inv-sso-deny", approval_id)["status"] != "succeeded"
    assert world.payments("inv-sso-deny") == 0
    denied = [e for e in world.gw.store.audit.list("default", types=["approval.denied"],
                                                    limit=500)
              if e.data.get("approval_id") == approval_id]
    assert [(e.data["by"], e.data["by_subject"], e.data["by_issuer"]) for e in denied] == \
        [("Dana Decider", "dana", world.idp.issuer)]


def test_a_session_opened_on_one_replica_works_on_another(world: SsoWorld) -> None:
    """Sessions live in the store: a second app (another worker or replica) on the same
    database knows the cookie, and a sign-out on one ends it on both."""
    from fastapi.testclient import TestClient

    from toolkeeper import Gateway
    from toolkeeper.api import ApiSettings, create_app

    url = world.gw.store.db.engine.url.render_as_string(hide_password=False)
    with world.browser() as http:
        me = world.session(world.sign_in("dana", http))
        cookie = http.cookies["tk_session"]
        with Gateway.open(url) as other, \
                TestClient(create_app(other, ApiSettings()), base_url=world.base) as api:
            # the other process's relying party: same settings, its own store connection
            api.app.state.sso = world.sso.__class__(world.sso.settings, other.store.sessions)
            api.cookies.set("tk_session", cookie)
            assert api.get("/auth/session").json()["subject"] == "dana"
            assert world.unsafe(http, "/auth/logout", me["csrf_token"]).status_code == 200
            gone = api.get("/approvals")
            assert gone.status_code == 401 and gone.json()["error"]["reason"] == \
                "session_expired"


def test_logout_ends_the_session_even_when_the_provider_cannot_be_reached(
        world: SsoWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that has not read the provider's metadata yet, while the provider is down:
    sign-out still ends the session here (only the RP-initiated logout URL is missing)."""
    with world.browser() as http:
        world.sign_in("dana", http)
        me = world.session(http)
        stolen = dict(http.cookies)
        monkeypatch.setattr(world.sso, "_meta", None)
        monkeypatch.setattr(world.sso, "settings", dataclasses.replace(
            world.sso.settings, issuer="http://127.0.0.1:9/down", timeout_s=1.0))
        out = world.unsafe(http, "/auth/logout", me["csrf_token"])
        assert out.status_code == 200, out.text
        assert out.json() == {"signed_out": True, "logout_url": None}
    with httpx.Client(timeout=10, cookies=stolen) as replay:
        after = replay.get(world.url("/approvals"))
        assert after.status_code == 401
        assert after.json()["error"]["reason"] == "session_expired"


def test_a_person_whose_subject_cannot_be_kept_whole_is_not_let_in(world: SsoWorld) -> None:
    """A ``sub`` longer than the 200 characters kept is refused, never recorded as
    something else (it was the text 'None', shared by every such person)."""
    long_sub = "p" * 230  # OpenID Connect allows 255
    world.idp.add_user(long_sub, **{**DANA, "name": "Long Sub"})
    with world.browser() as http:
        login = http.get(world.url("/auth/login"))
        done = http.get(world.idp.sign_in(login.headers["location"], long_sub))
        assert done.status_code == 403, done.text
        assert done.json()["error"]["reason"] == "forbidden"
        assert "tk_session" not in http.cookies


def test_a_person_whose_tenant_claim_is_longer_than_a_tenant_id_is_not_let_in(
        world: SsoWorld) -> None:
    """(SQLite would have kept it; PostgreSQL failed the insert with a 500.)"""
    world.idp.add_user("tess", **{**DANA, "name": "Tess", "tk_tenant": "t" * 100})
    with world.browser() as http:
        login = http.get(world.url("/auth/login"))
        done = http.get(world.idp.sign_in(login.headers["location"], "tess"))
        assert done.status_code == 403, done.text
        assert done.json()["error"]["reason"] == "forbidden"
        assert "tk_session" not in http.cookies


def test_a_console_secret_with_reserved_characters_signs_in(
        idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The code exchange authenticates like every request to an authorization server: id
    and secret form-encoded before Basic (RFC 6749 §2.3.1), so such a secret works."""
    with sso_world(idp, tmp_path_factory.mktemp("sso-odd"),
                   console_secret="a+b%2Fc:d/e f==") as odd, odd.browser() as http:
        assert odd.session(odd.sign_in("dana", http))["subject"] == "dana"
