"""``GET /graph`` and the impact routes: tenant-scoped, for people, names only."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.identity_fixtures import identity_api
from tests.support.rest import RestClient
from toolkeeper.model.profile import Activation, Profile
from toolkeeper.model.tool import ToolDefinition

JIRA = ToolDefinition(name="jira", implementation_type="http",
                      implementation={"url": "https://jira.example",
                                      "headers": {"Authorization": "Bearer ${secret:jira/token}"}})


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with identity_api(db_url) as api:
        api.gw.registry.register(JIRA, tenant_id="default")
        api.gw.registry.put_profile(Profile(name="triage", tenant_id="default", autonomy=3,
                                            activations=(Activation(tool="jira"),)))
        yield api


def _id(api: RestClient, name: str) -> str:
    return next(t["id"] for t in api.call("GET", "/tools").json() if t["name"] == name)


def test_the_graph_shows_the_tenant_only(api: RestClient) -> None:
    r = api.call("GET", "/graph", "operator")
    assert r.status_code == 200, r.text
    names = {(n["kind"], n["name"]) for n in r.json()["nodes"]}
    assert {("agent", "bot"), ("profile", "reader"), ("tool", "wire"),
            ("credential", "jira/token")} <= names
    assert ("agent", "other-bot") not in names and ("profile", "other-prof") not in names
    other = api.call("GET", "/graph", "other_admin").json()
    assert ("tool", "jira") not in {(n["kind"], n["name"]) for n in other["nodes"]}


def test_an_agent_token_may_not_read_the_graph(api: RestClient) -> None:
    r = api.call("GET", "/graph", "agent")
    assert r.status_code == 403 and r.json()["error"]["reason"] == "forbidden"


def test_an_admin_sees_the_absent_credential_finding(api: RestClient) -> None:
    codes = {f["code"] for f in api.call("GET", "/graph").json()["findings"]}
    assert "credential_absent" in codes
    assert api.call("PUT", "/credentials/jira/token", json={"value": "t0k"}).status_code == 204
    body = api.call("GET", "/graph").text
    assert "credential_absent" not in body and "t0k" not in body


def test_the_graph_in_every_text_format_and_around_a_node(api: RestClient) -> None:
    r = api.call("GET", "/graph?format=graphml", "operator")
    assert r.headers["content-type"].startswith("application/graphml+xml")
    ET.fromstring(r.text)
    assert "digraph" in api.call("GET", "/graph?format=dot", "operator").text
    assert "MERGE" in api.call("GET", "/graph?format=cypher", "operator").text
    near = api.call("GET", "/graph?around=agent:default/bot&depth=1", "operator").json()
    assert {n["name"] for n in near["nodes"]} == {"bot", "reader"}
    assert api.call("GET", "/graph?around=agent:default/nobody").status_code == 404


def test_impact_of_disabling_a_tool_names_this_tenants_losers_only(api: RestClient) -> None:
    r = api.call("GET", f"/tools/{_id(api, 'wire')}/impact?change=disable", "operator")
    assert r.status_code == 200, r.text
    out = r.json()
    assert [p["profile"] for p in out["profiles"]] == ["reader"]
    assert [(a["agent"], a["actions"]) for a in out["agents"]] == [("bot", ["run"])]
    r = api.call("GET", f"/tools/{_id(api, 'jira')}/impact?change=explode")
    assert r.status_code == 422


def test_another_tenants_tool_has_no_impact_to_show(api: RestClient) -> None:
    r = api.call("GET", f"/tools/{_id(api, 'jira')}/impact", "other_admin")
    assert r.status_code == 404


def test_impact_of_revoking_a_credential(api: RestClient) -> None:
    out = api.call("GET", "/credentials/jira/token/impact", "operator").json()
    assert [t["tool"] for t in out["tools"]] == ["jira"]
    assert out["tools"][0]["profiles"][0]["profile"] == "triage"
    unused = api.call("GET", "/credentials/svc/key/impact", "operator").json()
    assert unused["tools"] == [] and unused["agent_endpoints"] == []


def test_without_the_embedded_store_the_graph_skips_the_credential_finding(
        tmp_path: Path) -> None:
    with identity_api(tmp_path, embedded=False) as api:
        api.gw.registry.register(JIRA, tenant_id="default")
        r = api.call("GET", "/graph")
        assert r.status_code == 200, r.text
        assert "credential_absent" not in {f["code"] for f in r.json()["findings"]}
