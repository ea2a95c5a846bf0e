"""SPEC §6/§7 REST, tools (seed: Tools Overview): tenant + global listing with filters,
draft-only creation, publish only via its endpoint, increasing semver versions, immutable
snapshots, global tools read-only, another tenant's ids answer 404, config redacted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.tools_fixtures import ENABLED, api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper.builtins import BUILTINS
from toolkeeper.errors import OperationRefused
from toolkeeper.services.tool_views import redact, sensitive

NEW = {"name": "crm", "description": "CRM look-up", "implementation_type": "http",
       "implementation_config": {"url": "https://crm.example/api", "method": "GET"},
       "execution_config": {"timeout_s": 5, "is_pure": True}}


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def names(resp: Any) -> list[str]:
    assert resp.status_code == 200, resp.text
    return [t["name"] for t in resp.json()]


def create(api: RestClient, **changes: Any) -> Any:
    return api.post("admin", "/tools", {**NEW, **changes})


# listing ---------------------------------------------------------------------------------

def test_listing_shows_own_and_global_tools_never_another_tenants(api: RestClient) -> None:
    listed = names(api.get("admin", "/tools"))
    assert "calculate" in listed and "lookup" in listed and "sketch" in listed
    assert "private" not in listed
    assert names(api.get("g_admin", "/tools")) == ["calculate", "private"]


@pytest.mark.parametrize("who", ["operator", "approver", "bot"])
def test_every_role_reads_the_registry(api: RestClient, who: str) -> None:
    assert "lookup" in names(api.get(who, "/tools"))


def test_a_listed_tool_carries_the_spec_record_fields(api: RestClient) -> None:
    tools = {t["name"]: t for t in api.get("admin", "/tools").json()}
    calc, look = tools["calculate"], tools["lookup"]
    assert (calc["scope"], calc["tool_type"], calc["tenant_id"]) == ("global", "built_in", None)
    assert (look["scope"], look["tool_type"], look["status"]) == ("tenant", "custom", "published")
    for field in ("id", "slug", "input_schema", "output_schema", "config_schema", "version",
                  "implementation_type", "published_at", "builtin_key", "is_active",
                  "is_system", "risk_default", "risk_map", "side_effect", "scopes_required",
                  "capabilities", "categories", "requires_confirmation", "compensation",
                  "idempotency_key_fields", "definition_hash", "created_at", "updated_at"):
        assert field in look, field
    assert set(look["config_schema"]) == {"implementation", "execution"}
    assert look["actions"]["run"]["side_effect"] == "pure"


def test_listing_filters_by_status_type_and_pages(api: RestClient) -> None:
    assert names(api.get("admin", "/tools", status="draft")) == ["sketch"]
    assert names(api.get("admin", "/tools", tool_type="built_in")) == ["calculate"]
    assert names(api.get("admin", "/tools", implementation_type="builtin")) == ["calculate"]
    everything = names(api.get("admin", "/tools"))
    assert names(api.get("admin", "/tools", skip=2, limit=3)) == everything[2:5]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 501}, {"skip": -1},
                                    {"status": "live"}, {"tool_type": "plugin"}])
def test_bad_listing_parameters_are_refused(api: RestClient, params: dict[str, Any]) -> None:
    assert_error(api.get("admin", "/tools", **params), 422, "invalid_arguments")


def test_no_token_is_unauthenticated(api: RestClient) -> None:
    assert_error(api.client.get("/tools"), 401, "unauthenticated")


# creation --------------------------------------------------------------------------------

def test_creation_makes_a_draft_tenant_tool(api: RestClient) -> None:
    resp = create(api)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert (body["status"], body["scope"], body["tenant_id"]) == ("draft", "tenant", "acme")
    assert body["config_schema"]["implementation"]["url"] == "https://crm.example/api"
    assert body["config_schema"]["execution"]["timeout_s"] == 5
    assert body["published_at"] is None and body["tool_type"] == "custom"
    assert api.get("operator", f"/tools/{body['id']}").json()["name"] == "crm"
    assert "crm" not in names(api.get("g_admin", "/tools"))


@pytest.mark.parametrize("who", ["operator", "approver", "bot"])
def test_only_admins_create(api: RestClient, who: str) -> None:
    assert_error(api.post(who, "/tools", NEW), 403, "forbidden")


def test_creating_published_must_go_through_the_publish_endpoint(api: RestClient) -> None:
    assert_error(create(api, status="published"), 422, "publish_via_endpoint")
    assert_error(create(api, status="disabled"), 422, "invalid_arguments")


def test_global_scope_cannot_be_created_by_a_tenant(api: RestClient) -> None:
    assert_error(create(api, scope="global"), 422, "invalid_arguments")


def test_a_taken_name_is_a_conflict(api: RestClient) -> None:
    assert_error(create(api, name="lookup"), 409, "conflict")
    assert_error(create(api, name="calculate"), 409, "conflict")  # a global tool's name
    assert create(api, name="private").status_code == 201  # globex's name is free here


@pytest.mark.parametrize(("changes", "reason"), [
    ({"name": "bad name"}, "invalid_arguments"),
    ({"input_schema": {"type": 12}}, "invalid_arguments"),
    ({"risk_default": "extreme"}, "invalid_arguments"),
    ({"is_system": True}, "invalid_arguments"),
    ({"version": "one"}, "invalid_version"),
])
def test_bad_definitions_are_refused(api: RestClient, changes: dict[str, Any], reason: str) -> None:
    assert_error(create(api, **changes), 422, reason)


# retrieval tools -------------------------------------------------------------------------

RAG = {"name": "kb", "implementation_type": "rag_retrieval",
       "input_schema": {"type": "object", "properties": {"top_k": {"type": "integer"}},
                        "required": ["top_k"], "additionalProperties": False}}


def test_rag_tool_needs_a_pipeline_the_tenant_owns(api: RestClient) -> None:
    api.gw.registry.add_retrieval_pipeline("globex", "pl-globex")
    err = assert_error(api.post("admin", "/tools", RAG), 422, "invalid_arguments")
    assert "pipeline_id" in err["message"]
    foreign = {**RAG, "implementation_config": {"pipeline_id": "pl-globex"}}
    err = assert_error(api.post("admin", "/tools", foreign), 422, "invalid_arguments")
    assert err["details"] == {"pipeline_id": "pl-globex"}


def test_rag_schemas_are_normalised_so_query_is_a_required_string(api: RestClient) -> None:
    api.gw.registry.add_retrieval_pipeline("acme", "pl-1")
    resp = api.post("admin", "/tools", {**RAG, "implementation_config": {"pipeline_id": "pl-1"}})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    schema = body["input_schema"]
    assert schema["properties"] == {"top_k": {"type": "integer"}, "query": {"type": "string"}}
    assert schema["required"] == ["query", "top_k"]
    assert schema["additionalProperties"] is False
    assert body["output_schema"]["required"] == ["query"]
    # the retrieval provider runs in every gateway (issue 10): the tool publishes
    published = api.post("admin", f"/tools/{body['id']}/publish")
    assert published.status_code == 200, published.text
    assert published.json()["status"] == "published"


def test_retrieval_pipelines_are_registered_per_tenant_once(api: RestClient) -> None:
    reg = api.gw.registry
    reg.add_retrieval_pipeline("acme", "pl-1")
    reg.add_retrieval_pipeline("acme", "pl-1")
    reg.add_retrieval_pipeline("acme", "pl-2")
    assert reg.retrieval_pipelines("acme") == ["pl-1", "pl-2"]
    assert reg.retrieval_pipelines("globex") == []
    with pytest.raises(OperationRefused) as caught:
        reg.add_retrieval_pipeline("acme", "")
    assert caught.value.reason == "invalid_arguments"


# fetch, update ---------------------------------------------------------------------------

def test_fetch_by_id_sees_own_and_global_but_not_another_tenants(api: RestClient) -> None:
    assert api.get("bot", f"/tools/{api.tool_id('lookup')}").json()["name"] == "lookup"
    assert api.get("bot", f"/tools/{api.tool_id('calculate', None)}").status_code == 200
    assert_error(api.get("admin", f"/tools/{api.tool_id('private', 'globex')}"), 404, "not_found")
    assert_error(api.get("admin", "/tools/no-such-id"), 404, "not_found")


def test_update_changes_the_working_copy(api: RestClient) -> None:
    tool_id = create(api).json()["id"]
    resp = api.put("admin", f"/tools/{tool_id}", {"description": "new", "categories": ["crm"]})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["description"], resp.json()["categories"]) == ("new", ["crm"])
    assert resp.json()["config_schema"]["implementation"]["method"] == "GET"  # kept


def test_update_refuses_a_transition_to_published(api: RestClient) -> None:
    tool_id = create(api).json()["id"]
    assert_error(api.put("admin", f"/tools/{tool_id}", {"status": "published"}), 422,
             "publish_via_endpoint")
    assert api.get("admin", f"/tools/{tool_id}").json()["status"] == "draft"


def test_a_published_tool_may_be_deprecated_but_not_returned_to_draft(api: RestClient) -> None:
    tool_id = api.tool_id("lookup")
    assert_error(api.put("admin", f"/tools/{tool_id}", {"status": "draft"}), 409, "invalid_state")
    assert api.put("admin", f"/tools/{tool_id}", {"status": "deprecated"}).json()[
        "status"] == "deprecated"


def test_update_guards_roles_tenants_and_global_tools(api: RestClient) -> None:
    body = {"description": "x"}
    assert_error(api.put("operator", f"/tools/{api.tool_id('lookup')}", body), 403, "forbidden")
    assert_error(api.put("admin", f"/tools/{api.tool_id('calculate', None)}", body), 403,
             "forbidden")
    assert_error(api.put("admin", f"/tools/{api.tool_id('private', 'globex')}", body), 404,
             "not_found")
    assert_error(api.put("admin", f"/tools/{api.tool_id('lookup')}", {"name": "renamed"}), 422,
             "invalid_arguments")
    assert_error(api.put("admin", f"/tools/{api.tool_id('lookup')}", {"risk_map": {"nope": "low"}}),
             422, "invalid_arguments")


# publish, versions -----------------------------------------------------------------------

def test_publish_snapshots_and_sets_published_at(api: RestClient) -> None:
    tool_id = create(api).json()["id"]
    resp = api.post("admin", f"/tools/{tool_id}/publish")
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "published" and resp.json()["published_at"]
    versions = api.get("operator", f"/tools/{tool_id}/versions").json()
    assert [v["version"] for v in versions] == ["1.0.0"]
    assert versions[0]["tool"]["status"] == "published" and versions[0]["definition_hash"]


def test_a_published_snapshot_never_changes(api: RestClient) -> None:
    tool_id = create(api).json()["id"]
    api.post("admin", f"/tools/{tool_id}/publish")
    api.put("admin", f"/tools/{tool_id}", {"description": "edited"})
    assert api.get("admin", f"/tools/{tool_id}").json()["description"] == "edited"
    snapshot = api.get("admin", f"/tools/{tool_id}/versions").json()[0]["tool"]
    assert snapshot["description"] == "CRM look-up"
    assert_error(api.post("admin", f"/tools/{tool_id}/publish"), 422, "invalid_version")
    resp = api.post("admin", f"/tools/{tool_id}/version", new_version="1.1.0")
    assert resp.status_code == 200, resp.text
    versions = api.get("admin", f"/tools/{tool_id}/versions").json()
    assert [(v["version"], v["tool"]["description"]) for v in versions] == [
        ("1.0.0", "CRM look-up"), ("1.1.0", "edited")]


@pytest.mark.parametrize("version", ["1.0.0", "0.9.0", "1.0", "v2", "1.0.0-rc.1"])
def test_versions_must_be_semver_and_increase(api: RestClient, version: str) -> None:
    tool_id = api.tool_id("lookup")
    assert_error(api.post("admin", f"/tools/{tool_id}/version", new_version=version), 422,
             "invalid_version")


def test_version_needs_its_parameter(api: RestClient) -> None:
    assert_error(api.post("admin", f"/tools/{api.tool_id('lookup')}/version"), 422,
             "invalid_arguments")


@pytest.mark.parametrize("path", ["publish", "version"])
def test_publish_and_version_guard_roles_tenants_and_global_tools(api: RestClient,
                                                                  path: str) -> None:
    params = {"new_version": "2.0.0"}
    assert_error(api.post("bot", f"/tools/{api.tool_id('lookup')}/{path}", **params), 403,
             "forbidden")
    assert_error(api.post("admin", f"/tools/{api.tool_id('calculate', None)}/{path}", **params),
             403, "forbidden")
    assert_error(api.post("admin", f"/tools/{api.tool_id('private', 'globex')}/{path}", **params),
             404, "not_found")


def test_versions_of_another_tenants_tool_are_not_found(api: RestClient) -> None:
    assert_error(api.get("admin", f"/tools/{api.tool_id('private', 'globex')}/versions"), 404,
             "not_found")


# built-ins, health -----------------------------------------------------------------------

def test_builtin_templates_split_installed_and_available(api: RestClient) -> None:
    assert_error(api.get("bot", "/tools/builtins/templates"), 403, "forbidden")  # people only
    resp = api.get("approver", "/tools/builtins/templates")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [t["builtin_key"] for t in body["installed"]] == ["calculate"]
    installed = body["installed"][0]
    assert installed["id"] == api.tool_id("calculate", None) and installed["installed"] is True
    available = {t["builtin_key"] for t in body["available"]}
    assert {"git", "http_request", "datetime_utils"} <= available
    assert "calculate" not in available
    assert all(t["scope"] == "global" and t["tool_type"] == "built_in" for t in body["available"])
    assert_error(api.client.get("/tools/builtins/templates"), 401, "unauthenticated")


def test_builtin_templates_list_every_builtin_with_its_policy_schema_and_defaults(
        api: RestClient) -> None:
    body = api.get("approver", "/tools/builtins/templates").json()
    templates = {t["builtin_key"]: t for t in [*body["installed"], *body["available"]]}
    assert set(templates) == set(BUILTINS)
    git = templates["git"]
    assert git["policy_schema"]["title"] == "GitPolicy"
    assert {"allow_push", "managed_branch_prefix"} <= set(git["policy_schema"]["properties"])
    assert git["policy_defaults"]["allow_push"] is False
    assert templates["http_request"]["policy_defaults"]["allowed_methods"] == ["GET", "HEAD"]
    for key, template in templates.items():  # every default is one its own model accepts
        BUILTINS[key].policy_model.model_validate(template["policy_defaults"])


def test_health_reports_each_visible_tool(api: RestClient) -> None:
    for _ in range(3):
        api.gw.runtime.health.failure("acme:lookup", "connection refused")
    health = {h["name"]: h for h in api.get("operator", "/tools/health").json()}
    assert health["lookup"]["health"] == "degraded"
    assert health["lookup"]["consecutive_errors"] == 3
    assert health["lookup"]["last_error"] == "connection refused"
    assert health["flaky"]["health"] == "unavailable"
    assert health["calculate"]["health"] == "healthy"
    assert "private" not in health
    g_health = {h["name"]: h for h in api.get("g_admin", "/tools/health").json()}
    assert set(g_health) == {"calculate", "private"}
    assert g_health["calculate"]["consecutive_errors"] == 0



def test_health_records_the_last_success_of_a_tool_that_never_failed(
        api: RestClient) -> None:
    before = {h["name"]: h for h in api.get("operator", "/tools/health").json()}
    assert before["calculate"]["last_success_at"] is None
    done = api.execute("bot", "calculate", {"expression": "1 + 2"}).json()
    assert done["status"] == "succeeded", done
    after = {h["name"]: h for h in api.get("operator", "/tools/health").json()}
    assert after["calculate"]["health"] == "healthy"
    assert isinstance(after["calculate"]["last_success_at"], float)

# redaction -------------------------------------------------------------------------------

_LITERALS = {"url": "https://crm.example", "headers": {
                 "Authorization": "Bearer abc123", "X-Api-Key": "k-1", "X-Trace": "t"},
             "auth": {"password": "hunter2", "ref": "${secret:crm/password}"},
             "api_key": "${secret:crm/key}", "bearer": {"token": "Bearer ${secret:crm/t}"},
             "steps": [{"client_secret": "s-1", "name": "a"}]}


def test_literal_credentials_in_tool_config_are_refused(api: RestClient) -> None:
    r = create(api, implementation_config=_LITERALS,
               policy={"accessToken": "tok", "max_tokens": 5})
    err = assert_error(r, 422, "secret_literal_refused")
    assert [e["pointer"] for e in err["details"]["errors"]] == [
        "/implementation_config/headers/Authorization",
        "/implementation_config/headers/X-Api-Key", "/implementation_config/auth/password",
        "/implementation_config/steps/0/client_secret", "/policy/accessToken"]
    assert "${secret:" in err["message"] and "PUT /credentials" in err["message"]
    assert "abc123" not in r.text and "hunter2" not in r.text
    ok = create(api, implementation_config={"url": "https://crm.example", "headers": {
        "Authorization": "Bearer ${secret:crm/token}"}})
    assert ok.status_code == 201, ok.text
    edit = api.put("admin", f"/tools/{ok.json()['id']}", {"implementation_config": {
        "url": "https://crm.example", "headers": {"Authorization": "Bearer abc"}}})
    assert_error(edit, 422, "secret_literal_refused")


def test_config_credentials_are_redacted_in_every_response(api: RestClient) -> None:
    # a row stored before literals were refused (or by the operator's code) still never
    # shows its credentials
    from toolkeeper import ToolDefinition

    api.gw.registry.save(ToolDefinition(
        name="legacy", tenant_id="acme", implementation_type="http",
        implementation=_LITERALS, policy={"accessToken": "tok", "max_tokens": 5}))
    body = api.get("admin", f"/tools/{api.tool_id('legacy')}").json()
    shown = body["config_schema"]["implementation"]
    assert shown["headers"] == {"Authorization": "***", "X-Api-Key": "***", "X-Trace": "t"}
    assert shown["auth"] == {"password": "***", "ref": "${secret:crm/password}"}
    assert shown["api_key"] == "${secret:crm/key}"  # a reference, not a secret
    assert shown["bearer"] == {"token": "Bearer ${secret:crm/t}"}
    assert shown["steps"] == [{"client_secret": "***", "name": "a"}]
    assert body["policy"] == {"accessToken": "***", "max_tokens": 5}
    api.post("admin", f"/tools/{body['id']}/publish")
    for text in (api.get("bot", "/tools").text, api.get("bot", f"/tools/{body['id']}").text,
                 api.get("bot", f"/tools/{body['id']}/versions").text):
        assert "abc123" not in text and "hunter2" not in text and "s-1" not in text


@pytest.mark.parametrize(("key", "hidden"), [
    ("api_key", True), ("X-API-KEY", True), ("apiKey", True), ("access_token", True),
    ("Authorization", True), ("client_secret", True), ("db_password", True),
    ("private_key", True), ("max_tokens", False), ("url", False), ("keyword", False)])
def test_sensitive_keys(key: str, hidden: bool) -> None:
    assert sensitive(key) is hidden


def test_redact_shows_only_pure_references() -> None:
    assert redact({"token": "${secret:a/b} plus-literal"}) == {"token": "***"}
    assert redact({"token": None, "secret": ["x"]}) == {"token": None, "secret": "***"}


# an agent token reads only what its agent may call --------------------------------------

def test_an_agent_token_lists_only_its_callable_tools_without_wiring(api: RestClient) -> None:
    listed = {t["name"]: t for t in api.get("bot", "/tools").json()}
    assert set(listed) == set(ENABLED)
    for tool in listed.values():
        assert not {"config_schema", "policy", "builtin_key", "connector_id"} & set(tool)
    assert set(listed["repo"]["actions"]) == {"read"}  # write needs a scope bot lacks
    assert "notes" in names(api.get("operator", "/tools"))


def test_an_agent_token_cannot_read_other_tools_by_id(api: RestClient) -> None:
    notes = api.tool_id("notes")
    for path in (f"/tools/{notes}", f"/tools/{notes}/versions"):
        assert_error(api.get("bot", path), 404, "not_found")
        assert api.get("operator", path).status_code == 200
    own = api.get("bot", f"/tools/{api.tool_id('lookup')}").json()
    assert own["name"] == "lookup" and "config_schema" not in own
    versions = api.get("bot", f"/tools/{api.tool_id('lookup')}/versions").json()
    assert versions and all("config_schema" not in v["tool"] for v in versions)
    health = {h["name"] for h in api.get("bot", "/tools/health").json()}
    assert health == set(ENABLED)


def test_a_tenant_builtin_tool_takes_the_builtins_actions_and_schemas(api: RestClient) -> None:
    resp = api.post("admin", "/tools", {
        "name": "my_fs", "implementation_type": "builtin",
        "implementation_config": {"builtin_key": "filesystem"},
        "risk_map": {"read": "medium"}})
    assert resp.status_code == 201, resp.text
    tool = resp.json()
    template = BUILTINS["filesystem"].definition()
    assert set(tool["actions"]) == set(template.actions)
    assert tool["actions"]["read"]["input_schema"] == template.actions["read"].input_schema
    assert tool["actions"]["delete"]["side_effect"] == "irreversible"
    assert tool["actions"]["write"]["side_effect"] == "compensatable"
    assert tool["risk_map"]["read"] == "medium"  # what the body sets wins
    assert tool["actions"]["delete"]["risk"] == template.action_risk("delete").value == "high"
    assert (tool["builtin_key"], tool["tool_type"]) == ("filesystem", "built_in")

