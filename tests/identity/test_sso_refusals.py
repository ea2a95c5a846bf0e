"""What the console's single sign-on refuses, each against the real test IdP, and for each
rule a test that breaks the rule (monkeypatched off) and sees the refusal go — so none of
these tests could pass with the check missing.

CSRF (no or wrong ``X-CSRF-Token``, a foreign or missing Origin: 403 ``csrf_failed``), a
callback whose ``state``, ``iss`` or ID-token ``nonce`` is not this sign-in's, a replayed
code, idle and absolute expiry (a clock the test moves: idle 100 s, absolute 1000 s), a
session of tenant ``acme`` acting in tenant ``default``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.identity.sso_world import SsoWorld, sso_world
from tests.support.idp import Idp
from toolkeeper.identity import sso as sso_module
from toolkeeper.identity import sso_session

IDLE_S, MAX_S = 100, 1000


@pytest.fixture(scope="module")
def world(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SsoWorld]:
    with sso_world(idp, tmp_path_factory.mktemp("sso-refusals"),
                   session_idle_s=IDLE_S, session_max_s=MAX_S) as w:
        yield w


@pytest.fixture(autouse=True)
def _real_clock(world: SsoWorld) -> Iterator[None]:
    yield
    world.sso.clock = time.time


def _at(world: SsoWorld, offset: float) -> None:
    world.sso.clock = lambda: time.time() + offset


def _assert_error(resp: httpx.Response, status: int, reason: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.json()["error"]["reason"] == reason


# -- CSRF ------------------------------------------------------------------------------

CSRF_CASES: dict[str, dict[str, Any]] = {
    "no token": {"csrf": None},
    "a wrong token": {"csrf": "not-the-sessions-token"},
    "a foreign origin": {"origin": "http://evil.example"},
}


@pytest.mark.parametrize("case", sorted(CSRF_CASES))
def test_a_cookie_request_without_the_csrf_proof_is_refused_and_decides_nothing(
        world: SsoWorld, case: str) -> None:
    approval_id = world.pending(f"inv-csrf-{case}")
    with world.browser() as http:
        me = world.session(world.sign_in("dana", http))
        args = {"csrf": me["csrf_token"], **CSRF_CASES[case]}
        bad = world.unsafe(http, f"/approvals/{approval_id}/approve", args["csrf"],
                           origin=args.get("origin"))
        _assert_error(bad, 403, "csrf_failed")
        assert http.get(world.url(f"/approvals/{approval_id}")).json()["status"] == "pending"


def test_a_cookie_request_with_neither_origin_nor_referer_is_refused(world: SsoWorld) -> None:
    approval_id = world.pending("inv-csrf-no-origin")
    with world.browser() as http:
        me = world.session(world.sign_in("dana", http))
        bad = http.post(world.url(f"/approvals/{approval_id}/approve"), json={},
                        headers={"X-CSRF-Token": me["csrf_token"]})
        _assert_error(bad, 403, "csrf_failed")
        referer = http.post(world.url(f"/approvals/{approval_id}/approve"), json={},
                            headers={"X-CSRF-Token": me["csrf_token"],
                                     "Referer": world.url("/ui/")})
        assert referer.status_code == 200, referer.text


def test_logout_is_csrf_checked_too(world: SsoWorld) -> None:
    with world.browser() as http:
        world.sign_in("dana", http)
        _assert_error(world.unsafe(http, "/auth/logout", None), 403, "csrf_failed")
        assert world.session(http)["name"] == "Dana Decider"


def test_a_bearer_request_needs_no_csrf_token(world: SsoWorld) -> None:
    assert world.pay("inv-bearer")["status"] == "approval_required"


def test_with_the_csrf_check_off_the_forged_request_would_decide(
        world: SsoWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sso_session, "check_csrf", lambda *_a: None)
    approval_id = world.pending("inv-csrf-broken")
    with world.browser() as http:
        world.sign_in("dana", http)
        forged = world.unsafe(http, f"/approvals/{approval_id}/approve", None,
                              origin="http://evil.example")
        assert forged.status_code == 200, "the CSRF tests above would not have failed"


# -- the callback ------------------------------------------------------------------------

def _callback(world: SsoWorld, http: httpx.Client, user: str = "dana", *,
              authorize: Any = None, callback: Any = None) -> httpx.Response:
    """A sign-in whose authorization URL and callback URL the test may rewrite."""
    login = http.get(world.url("/auth/login"))
    url = httpx.URL(login.headers["location"])
    if authorize:
        url = authorize(url)
    back = httpx.URL(world.idp.sign_in(str(url), user))
    if callback:
        back = callback(back)
    return http.get(back)


def _param(name: str, value: str | None) -> Any:
    def rewrite(url: httpx.URL) -> httpx.URL:
        params = url.params.remove(name)
        return url.copy_with(params=params if value is None else params.set(name, value))
    return rewrite


BAD_CALLBACKS: dict[str, dict[str, Any]] = {
    "a state of another sign-in": {"callback": _param("state", "forged-state")},
    "an iss of another provider": {"callback": _param("iss", "http://127.0.0.1:1/evil")},
    "no iss though the provider sends one": {"callback": _param("iss", None)},
    "an ID token nonce of another sign-in": {"authorize": _param("nonce", "forged-nonce")},
}


@pytest.mark.parametrize("case", sorted(BAD_CALLBACKS))
def test_a_callback_that_is_not_this_sign_ins_opens_no_session(world: SsoWorld,
                                                               case: str) -> None:
    with world.browser() as http:
        got = _callback(world, http, **BAD_CALLBACKS[case])
        _assert_error(got, 400, "sso_failed")
        assert "tk_session" not in http.cookies
        assert http.get(world.url("/auth/session")).json()["signed_in"] is False


@pytest.mark.parametrize("case", sorted(BAD_CALLBACKS))
def test_with_the_comparison_off_the_bad_callback_would_sign_in(
        world: SsoWorld, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """``_same`` compares state, iss and nonce; switched off, each bad callback above
    opens a session — the refusal tests above are what would catch it."""
    monkeypatch.setattr(sso_module, "_same", lambda _a, _b: True)
    monkeypatch.setattr(sso_module.Sso, "_check_iss", lambda _self, _iss, _meta: None)
    with world.browser() as http:
        got = _callback(world, http, **BAD_CALLBACKS[case])
        assert got.status_code == 303, got.text


def test_a_replayed_callback_or_code_opens_no_second_session(world: SsoWorld) -> None:
    with world.browser() as http:
        login = http.get(world.url("/auth/login"))
        back = httpx.URL(world.idp.sign_in(login.headers["location"], "dana"))
        jar = dict(http.cookies)
        assert http.get(back).status_code == 303
    # the same callback again, with the same pre-login cookie: that sign-in is used up
    with httpx.Client(timeout=10, cookies=jar) as again:
        _assert_error(again.get(back), 400, "sso_failed")
    # the code under a fresh sign-in's state: the provider refuses the used code
    with world.browser() as other:
        fresh = httpx.URL(other.get(world.url("/auth/login")).headers["location"])
        replay = back.copy_with(params=back.params.set("state", fresh.params["state"]))
        _assert_error(other.get(replay), 400, "sso_failed")
        assert "tk_session" not in other.cookies


def test_a_callback_without_a_sign_in_in_progress_is_refused(world: SsoWorld) -> None:
    got = httpx.get(world.url("/auth/callback?code=x&state=y"), timeout=10)
    _assert_error(got, 400, "sso_failed")
    huge = httpx.get(world.url("/auth/callback"), params={"code": "x" * 5000, "state": "y"},
                     timeout=10, cookies={"tk_sso_login": "z"})
    _assert_error(huge, 400, "sso_failed")


# -- expiry ----------------------------------------------------------------------------

def test_an_idle_session_ends(world: SsoWorld) -> None:
    with world.browser() as http:
        world.sign_in("dana", http)
        _at(world, IDLE_S - 10)
        assert http.get(world.url("/approvals")).status_code == 200
        _at(world, 2 * IDLE_S - 20)  # used at IDLE_S - 10: still alive (idle expiry moved)
        assert http.get(world.url("/approvals")).status_code == 200
        _at(world, 3 * IDLE_S)  # unused for more than IDLE_S, far before MAX_S
        _assert_error(http.get(world.url("/approvals")), 401, "session_expired")


def test_a_used_session_still_ends_at_its_absolute_expiry(world: SsoWorld) -> None:
    with world.browser() as http:
        world.sign_in("dana", http)
        for offset in range(IDLE_S - 10, MAX_S, IDLE_S - 10):  # used within every idle span
            _at(world, offset)
            assert http.get(world.url("/approvals")).status_code == 200, offset
        _at(world, MAX_S + 1)
        _assert_error(http.get(world.url("/approvals")), 401, "session_expired")


def test_with_expiry_unchecked_the_old_session_would_still_work(
        world: SsoWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    real = world.sso.store.get
    monkeypatch.setattr(world.sso.store, "get", lambda sid, _now: real(sid, 0.0))
    with world.browser() as http:
        world.sign_in("dana", http)
        _at(world, MAX_S + IDLE_S)
        assert http.get(world.url("/approvals")).status_code == 200


# -- tenants ---------------------------------------------------------------------------

def test_a_session_of_one_tenant_cannot_act_in_another(world: SsoWorld) -> None:
    approval_id = world.pending("inv-tenant")  # tenant default
    with world.browser() as http:
        me = world.session(world.sign_in("alice", http))  # tenant acme
        assert me["tenant"] == "acme"
        _assert_error(http.get(world.url(f"/approvals/{approval_id}")), 404, "not_found")
        tried = world.unsafe(http, f"/approvals/{approval_id}/approve", me["csrf_token"])
        _assert_error(tried, 404, "not_found")
        listed = http.get(world.url("/approvals")).json()
        assert approval_id not in str(listed)
    assert world.pay("inv-tenant", approval_id)["status"] != "succeeded"
    assert world.payments("inv-tenant") == 0


def test_with_the_tenant_taken_from_elsewhere_the_other_tenant_would_be_reached(
        world: SsoWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sso_session.principal_of_row
    monkeypatch.setattr(sso_session, "principal_of_row",
                        lambda row: real(row.__class__(**{
                            **{f: getattr(row, f) for f in row.__slots__},
                            "tenant_id": "default"})))
    approval_id = world.pending("inv-tenant-broken")
    with world.browser() as http:
        world.sign_in("alice", http)
        assert http.get(world.url(f"/approvals/{approval_id}")).status_code == 200
