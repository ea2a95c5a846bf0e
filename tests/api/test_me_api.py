"""``GET /me`` (issue 11 item 3): any authenticated token learns who it is — its name, tenant,
roles and agent — so the console stops probing admin-only endpoints; no token is a 401."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.identity_fixtures import identity_api
from tests.support.rest import RestClient


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with identity_api(db_url) as api:
        yield api


@pytest.mark.parametrize(("who", "tenant", "roles", "agent"), [
    ("admin", "default", ["admin"], None),
    ("operator", "default", ["operator"], None),
    ("approver", "default", ["approver"], None),
    ("agent", "default", ["agent"], "bot"),
    ("other_agent", "other", ["agent"], "other-bot"),
    ("system_admin", "system", ["admin"], None),
])
def test_each_token_learns_its_own_identity(api: RestClient, who: str, tenant: str,
                                           roles: list[str], agent: str | None) -> None:
    r = api.call("GET", "/me", who)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tenant_id"] == tenant and body["roles"] == roles and body["agent"] == agent
    assert body["name"] == who  # the token's label (the fixture labels each token by role)
    assert set(body) == {"name", "tenant_id", "roles", "agent"}  # never a secret or token id


def test_me_needs_a_valid_token(api: RestClient) -> None:
    for headers in ({}, {"Authorization": "Bearer tk_not-a-token"}):
        r = api.call("GET", "/me", None, headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["reason"] == "unauthenticated"


def test_a_revoked_token_is_refused(api: RestClient) -> None:
    made = api.call("POST", "/tokens", json={"role": "approver", "label": "temp"}).json()
    assert api.call("GET", "/me", None, headers={
        "Authorization": f"Bearer {made['token']}"}).json()["roles"] == ["approver"]
    assert api.call("DELETE", f"/tokens/{made['id']}").status_code == 204
    r = api.call("GET", "/me", None, headers={"Authorization": f"Bearer {made['token']}"})
    assert r.status_code == 401 and r.json()["error"]["reason"] == "unauthenticated"
