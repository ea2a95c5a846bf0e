"""One identity behaviour on every face (issue 8, item 4): the same operation through REST,
the CLI, config apply and the library gives the same result and the same reason codes,
because each face only translates what :class:`IdentityService` decides."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tests.api.identity_fixtures import identity_api
from tests.support.rest import RestClient
from toolkeeper.cli import app
from toolkeeper.config import apply_config, load_text
from toolkeeper.errors import OperationRefused
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with identity_api(db_url) as api:
        yield api


def cli(url: str, *args: str) -> Result:
    """``toolkeeper --db <url> …`` in-process, on the REST app's database."""
    runner = CliRunner(env={"TOOLKEEPER_TOKEN": None, "TOOLKEEPER_DATABASE_URL": None,
                            "TOOLKEEPER_TENANT": None, "COLUMNS": "200"})
    return runner.invoke(app, ["--db", url, *args])


def token_id(api: RestClient, label: str, who: str = "admin") -> str:
    listed = api.call("GET", "/tokens", who).json()
    return next(t["id"] for t in listed if t["label"] == label)


def revoked_at(api: RestClient, label: str, who: str = "admin") -> str | None:
    listed = api.call("GET", "/tokens", who).json()
    found: str | None = next(t["revoked_at"] for t in listed if t["label"] == label)
    return found


def test_revoking_a_revoked_token_succeeds_and_changes_nothing_on_every_face(
        api: RestClient, db_url: str) -> None:
    via_rest, via_cli = token_id(api, "operator"), token_id(api, "approver")
    assert api.call("DELETE", f"/tokens/{via_rest}").status_code == 204
    first = revoked_at(api, "operator")
    assert api.call("DELETE", f"/tokens/{via_rest}").status_code == 204
    assert revoked_at(api, "operator") == first is not None

    admin = api.tokens["admin"]
    once = cli(db_url, "tokens", "revoke", via_cli, "--token", admin, "--json")
    assert once.exit_code == 0, once.output
    when = revoked_at(api, "approver")
    again = cli(db_url, "tokens", "revoke", via_cli, "--token", admin, "--json")
    assert again.exit_code == 0, again.output
    assert revoked_at(api, "approver") == when is not None
    # and across faces: a token revoked over the CLI revokes again over REST, and back
    assert api.call("DELETE", f"/tokens/{via_cli}").status_code == 204
    assert cli(db_url, "tokens", "revoke", via_rest, "--token", admin).exit_code == 0
    assert api.call("GET", "/agents", "operator").json()["error"]["reason"] == "unauthenticated"


def test_another_tenants_token_is_not_found_on_every_face(api: RestClient, db_url: str) -> None:
    theirs = token_id(api, "other_agent", "other_admin")
    r = api.call("DELETE", f"/tokens/{theirs}")
    assert (r.status_code, r.json()["error"]["reason"]) == (404, "not_found")
    res = cli(db_url, "tokens", "revoke", theirs, "--token", api.tokens["admin"])
    assert res.exit_code == 1 and "not_found" in res.stderr
    assert revoked_at(api, "other_agent", "other_admin") is None


def test_an_admin_acts_only_in_its_own_tenant_on_every_face(api: RestClient, db_url: str) -> None:
    theirs = token_id(api, "other_agent", "other_admin")
    res = cli(db_url, "--tenant", "other", "tokens", "revoke", theirs,
              "--token", api.tokens["admin"])
    assert res.exit_code == 1 and "forbidden" in res.stderr
    with pytest.raises(OperationRefused) as refused:
        api.gw.identities.revoke_token(admin_of("default"), "other", theirs)
    assert refused.value.reason == "forbidden"
    assert revoked_at(api, "other_agent", "other_admin") is None


def test_a_token_for_another_tenants_agent_is_refused_alike(api: RestClient, db_url: str) -> None:
    r = api.call("POST", "/tokens", json={"role": "agent", "agent": "other-bot"})
    assert (r.status_code, r.json()["error"]["reason"]) == (422, "invalid_arguments")
    res = cli(db_url, "tokens", "create", "--role", "agent", "--agent", "other-bot",
              "--token", api.tokens["admin"])
    assert res.exit_code == 2 and "invalid_arguments" in res.stderr
    with pytest.raises(OperationRefused) as refused:
        api.gw.identities.issue_token("default", Role.AGENT, agent="other-bot")
    assert refused.value.reason == "invalid_arguments"


def admin_of(tenant: str) -> Principal:
    return Principal(name="admin", tenant_id=tenant, roles=frozenset({Role.ADMIN}))


def test_deleting_an_agent_revokes_its_tokens_over_rest(api: RestClient) -> None:
    assert api.execute("agent", "echo", {"text": "hi"}).status_code == 200
    assert api.call("DELETE", "/agents/bot").status_code == 204
    assert revoked_at(api, "agent") is not None
    r = api.execute("agent", "echo", {"text": "hi"})
    assert (r.status_code, r.json()["error"]["reason"]) == (401, "unauthenticated")
    r = api.call("DELETE", "/agents/bot")
    assert (r.status_code, r.json()["error"]["reason"]) == (404, "not_found")


def test_pruning_an_agent_from_config_revokes_its_tokens_too(api: RestClient) -> None:
    config = load_text("version: 1\nprofiles:\n  - {name: other-prof, tenant_id: other}\n",
                       "tk.yaml")
    report = apply_config(api.gw, config, base_dir=Path.cwd(), prune=True)
    assert report.pruned == ["agent:other/other-bot"]
    assert revoked_at(api, "other_agent", "other_admin") is not None
    r = api.execute("other_agent", "echo", {"text": "hi"})
    assert (r.status_code, r.json()["error"]["reason"]) == (401, "unauthenticated")
    assert revoked_at(api, "agent") is None  # another tenant's agent keeps its token


def test_the_library_refuses_another_tenants_agent_as_rest_does(api: RestClient) -> None:
    with pytest.raises(OperationRefused) as refused:
        api.gw.identities.delete_agent(admin_of("default"), "default", "other-bot")
    assert refused.value.reason == "not_found"
    r = api.call("DELETE", "/agents/other-bot")
    assert (r.status_code, r.json()["error"]["reason"]) == (404, "not_found")
    assert revoked_at(api, "other_agent", "other_admin") is None
