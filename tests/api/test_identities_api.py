"""SPEC §7 REST identities: agents, profiles, activations, tokens, credentials, tenants —
roles (403), tenant isolation (404), tokens shown once, write-only credentials (§8)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.identity_fixtures import identity_api
from tests.support.rest import RestClient


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with identity_api(db_url) as api:
        yield api


def test_admin_creates_reads_rebinds_and_deletes_an_agent(api: RestClient) -> None:
    r = api.call("POST", "/profiles", json={"name": "p2", "autonomy": 2,
                                            "activations": [{"tool": "echo"}]})
    assert r.status_code == 201, r.text
    r = api.call("POST", "/agents", json={"name": "bot2", "profile": "p2"})
    assert r.status_code == 201 and r.json()["tenant_id"] == "default"
    assert api.call("POST", "/agents", json={"name": "bot2", "profile": "p2"}).status_code == 409
    assert {a["name"] for a in api.call("GET", "/agents").json()} == {"bot", "bot2"}
    r = api.call("PUT", "/agents/bot2", json={"profile": "reader", "description": "moved"})
    assert r.status_code == 200 and api.call("GET", "/agents/bot2").json()["profile"] == "reader"
    assert api.call("DELETE", "/agents/bot2").status_code == 204
    assert api.call("GET", "/agents/bot2").json()["error"]["reason"] == "not_found"


def test_an_agent_needs_a_profile_of_its_own_tenant(api: RestClient) -> None:
    r = api.call("POST", "/agents", json={"name": "x", "profile": "other-prof"})
    assert r.status_code == 422
    assert r.json()["error"]["details"]["errors"][0]["pointer"] == "/profile"


@pytest.mark.parametrize("who", ["operator", "approver", "agent"])
def test_only_admins_write_identities(api: RestClient, who: str) -> None:
    for method, path, body in (
            ("POST", "/agents", {"name": "z", "profile": "reader"}),
            ("DELETE", "/agents/bot", None),
            ("POST", "/profiles", {"name": "z"}),
            ("POST", "/activations", {"profile": "reader", "tool": "echo"}),
            ("POST", "/tokens", {"role": "admin"}),
            ("GET", "/tokens", None),
            ("PUT", "/credentials/svc/key", {"value": "v"}),
            ("GET", "/credentials", None)):
        r = api.call(method, path, who, json=body)
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["reason"] == "forbidden"


def test_readers_read_and_an_agent_reads_only_itself(api: RestClient) -> None:
    for who in ("operator", "approver"):
        assert api.call("GET", "/agents", who).status_code == 200
        assert api.call("GET", "/profiles/reader", who).status_code == 200
    assert api.call("GET", "/agents", "agent").status_code == 403
    assert api.call("GET", "/agents/bot", "agent").json()["name"] == "bot"
    assert api.call("GET", "/profiles/reader", "agent").json()["autonomy"] == 3
    assert [a["tool"] for a in api.call("GET", "/activations?profile=reader", "agent").json()] \
        == ["echo", "wire"]
    api.call("POST", "/profiles", json={"name": "secret-prof"})
    assert api.call("GET", "/profiles/secret-prof", "agent").status_code == 404


def test_another_tenants_records_are_not_found(api: RestClient) -> None:
    token_id = api.call("GET", "/tokens").json()[0]["id"]
    for method, path, body in (
            ("GET", "/agents/bot", None), ("PUT", "/agents/bot", {"profile": "other-prof"}),
            ("DELETE", "/agents/bot", None), ("GET", "/profiles/reader", None),
            ("PUT", "/profiles/reader", {"name": "reader"}), ("DELETE", "/profiles/reader", None),
            ("GET", "/activations?profile=reader", None),
            ("POST", "/activations", {"profile": "reader", "tool": "echo"}),
            ("DELETE", "/activations/reader/echo", None), ("DELETE", f"/tokens/{token_id}", None)):
        r = api.call(method, path, "other_admin", json=body)
        assert r.status_code == 404, (method, path, r.text)
    names = {a["name"] for a in api.call("GET", "/agents", "other_admin").json()}
    assert names == {"other-bot"}
    assert all(t["tenant_id"] == "other" for t in api.call("GET", "/tokens", "other_admin").json())
    assert api.call("GET", "/agents/bot").status_code == 200  # untouched


@pytest.mark.parametrize(("body", "pointer"), [
    ({"name": "p", "activations": [{"tool": "nope"}]}, "/activations/0/tool"),
    ({"name": "p", "activations": [{"tool": "echo", "actions": ["nope"]}]},
     "/activations/0/actions"),
    ({"name": "p", "autonomy": 7}, "/autonomy"),
    ({"name": "p", "surprise": 1}, "/surprise"),
    ({"name": "p", "tenant_id": "other"}, "/tenant_id"),
])
def test_an_invalid_profile_is_refused_with_details(api: RestClient, body: dict[str, object],
                                                    pointer: str) -> None:
    r = api.call("POST", "/profiles", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["reason"] == "invalid_arguments"
    assert pointer in [e["pointer"] for e in r.json()["error"]["details"]["errors"]]
    assert api.call("GET", "/profiles/p").status_code == 404


def test_a_profile_in_use_is_not_deleted(api: RestClient) -> None:
    r = api.call("DELETE", "/profiles/reader")
    assert r.status_code == 409 and r.json()["error"]["details"]["agents"] == ["bot"]
    api.call("POST", "/profiles", json={"name": "unused"})
    assert api.call("DELETE", "/profiles/unused").status_code == 204


def test_activations_upsert_and_removal_reach_the_pipeline(api: RestClient) -> None:
    body = {"profile": "reader", "tool": "echo", "actions": ["run"],
            "policy": {}, "enabled": True}
    assert api.call("POST", "/activations", json=body).status_code == 200
    acts = api.call("GET", "/activations?profile=reader").json()
    assert [a["tool"] for a in acts].count("echo") == 1
    assert api.call("POST", "/activations", json={**body, "actions": ["nope"]}).status_code == 422
    assert api.execute("agent", "echo", {"text": "hi"}).json()["status"] == "succeeded"
    assert api.call("DELETE", "/activations/reader/echo").status_code == 204
    assert api.call("DELETE", "/activations/reader/echo").status_code == 404
    assert api.execute("agent", "echo", {"text": "hi"}).json()["reason"] == "tool_not_enabled"


def test_a_token_is_shown_once_works_and_stops_when_revoked(api: RestClient) -> None:
    r = api.call("POST", "/tokens", json={"role": "agent", "agent": "bot", "label": "ci"})
    assert r.status_code == 201
    created = r.json()
    token = created["token"]
    assert token.startswith("tk_") and len(token) >= 3 + 43  # 256 random bits, base64url
    listing = api.call("GET", "/tokens")
    assert token not in listing.text and all("token" not in t for t in listing.json())
    assert created["id"] in [t["id"] for t in listing.json()]
    assert api.execute(token, "echo", {"text": "hello"}).json()["output"] == "hello"
    assert api.call("DELETE", f"/tokens/{created['id']}").status_code == 204
    r = api.execute(token, "echo", {"text": "hello"})
    assert r.status_code == 401 and r.json()["error"]["reason"] == "unauthenticated"
    revoked = [t for t in api.call("GET", "/tokens").json() if t["id"] == created["id"]]
    assert revoked[0]["revoked_at"] is not None


@pytest.mark.parametrize("body", [{"role": "agent"}, {"role": "approver", "agent": "bot"},
                                  {"role": "agent", "agent": "other-bot"}, {"role": "root"}])
def test_a_token_request_that_does_not_fit_is_refused(api: RestClient,
                                                      body: dict[str, str]) -> None:
    assert api.call("POST", "/tokens", json=body).status_code == 422


def test_deleting_an_agent_revokes_its_tokens(api: RestClient) -> None:
    assert api.execute("agent", "echo", {"text": "x"}).status_code == 200
    assert api.call("DELETE", "/agents/bot").status_code == 204
    assert api.execute("agent", "echo", {"text": "x"}).status_code == 401


def test_credentials_are_write_only_and_redacted_from_outputs(api: RestClient) -> None:
    value = "sk-live-7f3a9c1e5b2d4a68"
    # not yet known: not redacted
    assert api.execute("agent", "echo", {"text": value}).json()["output"] == value
    r = api.call("PUT", "/credentials/payments/api_key", json={"value": value})
    assert r.status_code == 204
    listing = api.call("GET", "/credentials")
    assert listing.json() == [{"connector": "payments", "key": "api_key"}]
    assert value not in listing.text
    out = api.execute("agent", "echo", {"text": f"key={value}"}).json()
    assert value not in str(out) and "***" in str(out["output"])
    assert api.call("GET", "/credentials", "other_admin").json() == []
    assert api.call("DELETE", "/credentials/payments/api_key", "other_admin").status_code == 404
    assert api.call("DELETE", "/credentials/payments/api_key").status_code == 204
    assert api.call("GET", "/credentials").json() == []
    assert api.execute("agent", "echo", {"text": value}).json()["output"] == value


def test_credentials_need_the_embedded_secrets_store(tmp_path: Path) -> None:
    with identity_api(tmp_path, embedded=False) as api:
        r = api.call("PUT", "/credentials/payments/api_key", json={"value": "v"})
        assert r.status_code == 409 and "embedded" in r.json()["error"]["message"]


@pytest.mark.parametrize("who", ["admin", "operator", "other_admin", "agent"])
def test_tenants_are_for_system_admins_only(api: RestClient, who: str) -> None:
    assert api.call("GET", "/tenants", who).status_code == 403
    assert api.call("POST", "/tenants", who, json={"id": "acme"}).status_code == 403


def test_a_system_admin_creates_a_tenant_with_its_first_admin(api: RestClient) -> None:
    assert {"default", "other"} <= {t["id"] for t in api.call("GET", "/tenants",
                                                                "system_admin").json()}
    r = api.call("POST", "/tenants", "system_admin", json={"id": "acme", "name": "Acme"})
    assert r.status_code == 201
    acme_admin = r.json()["admin_token"]["token"]
    assert api.call("POST", "/tenants", "system_admin", json={"id": "acme"}).status_code == 409
    assert api.call("GET", "/agents", acme_admin).json() == []
    assert api.call("GET", "/agents/bot", acme_admin).status_code == 404
    r = api.call("POST", "/profiles", acme_admin, json={"name": "p"})
    assert r.json()["tenant_id"] == "acme"


def test_the_tenant_list_carries_each_tenants_name(api: RestClient) -> None:
    api.call("POST", "/tenants", "system_admin", json={"id": "named", "name": "Named Co"})
    api.call("POST", "/tenants", "system_admin", json={"id": "plain"})
    listed = {t["id"]: t for t in api.call("GET", "/tenants", "system_admin").json()}
    assert listed["named"] == {"id": "named", "name": "Named Co"}
    assert listed["plain"] == {"id": "plain", "name": "plain"}  # the id when none was given


def test_requests_without_a_valid_token_are_unauthenticated(api: RestClient) -> None:
    assert api.call("GET", "/agents", None).status_code == 401
    assert api.call("GET", "/agents", "tk_not-a-token").status_code == 401


def test_store_gets_a_token_by_id_and_deletes_one_named_definition(api: RestClient) -> None:
    rec, _token = api.gw.store.tokens.create(tenant_id="default", role="operator")
    assert api.gw.store.tokens.get(rec.id) == rec and api.gw.store.tokens.get("nope") is None
    api.gw.store.tokens.revoke(rec.id)
    got = api.gw.store.tokens.get(rec.id)
    assert got is not None and got.revoked_at is not None
    reg = api.gw.store.registry
    assert reg.delete_named("agents", "other", "bot") is False  # bot lives in default
    assert reg.delete_named("agents", "default", "bot") is True
    assert [a.name for a in reg.agents()] == ["other-bot"]
