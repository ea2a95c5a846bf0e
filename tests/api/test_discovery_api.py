"""SPEC §6/§7 REST, discovery (seed: Toolbox §3): catalog ⊇ tenant-available ⊇ agent-enabled;
unavailable = available minus enabled, each with ``why_unavailable``; the enabled set
follows the pipeline's own rules; tenants and agents are isolated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.tools_fixtures import ENABLED, WHY, api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper.builtins import BUILTINS, definition
from toolkeeper.model.enums import Mode
from toolkeeper.model.profile import Activation, Agent, Profile
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.pipeline.health import HealthBoard
from toolkeeper.pipeline.profiles import TenantPolicy
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.services.discovery import Why, agent_enabled, agent_tools


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def tools_of(resp: Any) -> dict[str, dict[str, Any]]:
    assert resp.status_code == 200, resp.text
    return {t["name"]: t for t in resp.json()["tools"]}


def test_catalog_lists_every_visible_tool_in_any_status(api: RestClient) -> None:
    listed = tools_of(api.get("operator", "/discovery/catalog"))
    assert {"calculate", "sketch", "off", "quar", "old", "lookup"} <= set(listed)
    assert "private" not in listed
    assert listed["calculate"]["scope"] == "global"
    assert listed["lookup"]["id"] == api.tool_id("lookup")
    assert set(tools_of(api.get("g_admin", "/discovery/catalog"))) == {"calculate", "private"}


def test_available_is_active_runnable_or_quarantined(api: RestClient) -> None:
    listed = set(tools_of(api.get("approver", "/discovery/available")))
    assert listed == {"calculate", "flaky", "guarded", "lookup", "notes", "old", "pinned",
                      "quar", "repo"}  # no draft (production), no disabled tool


def test_in_debug_mode_drafts_are_available_and_enabled(tmp_path: Path) -> None:
    with api_for(tmp_path, mode="debug") as api:
        assert "sketch" in tools_of(api.get("admin", "/discovery/available"))
        assert "sketch" in tools_of(api.get("bot", "/discovery/agents/bot/enabled"))


def test_enabled_lists_what_the_agent_may_call_in_name_order(api: RestClient) -> None:
    resp = api.get("bot", "/discovery/agents/bot/enabled")
    assert resp.status_code == 200
    assert (resp.json()["agent"], resp.json()["profile"]) == ("bot", "main")
    tools = resp.json()["tools"]
    assert [t["name"] for t in tools] == list(ENABLED)
    by_name = {t["name"]: t for t in tools}
    assert by_name["repo"]["actions"] == ["read"]  # write needs repo:write
    assert by_name["calculate"]["actions"] == sorted(BUILTINS["calculate"].actions)
    assert by_name["lookup"]["actions"] == ["run"]


def test_every_unavailable_tool_says_why(api: RestClient) -> None:
    listed = tools_of(api.get("operator", "/discovery/agents/bot/unavailable"))
    assert {n: t["why_unavailable"] for n, t in listed.items()} == WHY
    assert listed["guarded"]["missing_scopes"] == ["vault:read"]
    assert "9.9.9" in listed["pinned"]["message"]


def test_enabled_and_unavailable_partition_available(api: RestClient) -> None:
    available = set(tools_of(api.get("admin", "/discovery/available")))
    enabled = set(tools_of(api.get("admin", "/discovery/agents/bot/enabled")))
    unavailable = set(tools_of(api.get("admin", "/discovery/agents/bot/unavailable")))
    assert enabled | unavailable == available and not enabled & unavailable


def test_discovery_agrees_with_the_pipeline(api: RestClient) -> None:
    expected = {"flaky": "tool_unavailable", "guarded": "scope_missing",
                "notes": "tool_not_enabled", "pinned": "tool_not_published",
                "quar": "tool_quarantined"}
    for name, reason in expected.items():
        args = {"text": "t"} if name == "notes" else {"x": 1}
        res = api.gw.call_sync(name, None, args, agent="bot", tenant_id="acme")
        assert res.reason == reason, (name, res)
    assert api.gw.call_sync("lookup", None, {"key": "a"}, agent="bot",
                            tenant_id="acme").output == "A"
    denied = api.gw.call_sync("repo", "write", {}, agent="bot", tenant_id="acme")
    assert denied.reason == "scope_missing"


def test_an_action_filter_that_allows_nothing_disables_the_tool(api: RestClient) -> None:
    profile = api.gw.catalog.profiles[("acme", "main")].profile
    acts = tuple(a for a in profile.activations if a.tool != "lookup")
    api.gw.registry.put_profile(profile.model_copy(update={
        "activations": (*acts, Activation(tool="lookup", actions=("other",)))}), replace=True)
    listed = tools_of(api.get("bot", "/discovery/agents/bot/unavailable"))
    assert listed["lookup"]["why_unavailable"] == "disabled_for_agent"


def test_registry_changes_show_at_once(api: RestClient) -> None:
    api.put("admin", f"/tools/{api.tool_id('lookup')}", {"status": "disabled"})
    assert "lookup" not in tools_of(api.get("bot", "/discovery/agents/bot/enabled"))
    assert "lookup" not in tools_of(api.get("bot", "/discovery/available"))


def test_an_agent_without_its_profile_has_nothing_enabled(api: RestClient) -> None:
    assert tools_of(api.get("admin", "/discovery/agents/orphan/enabled")) == {}
    listed = tools_of(api.get("admin", "/discovery/agents/orphan/unavailable"))
    assert {t["why_unavailable"] for t in listed.values()} == {"disabled_for_agent"}


@pytest.mark.parametrize("tier", ["enabled", "unavailable"])
def test_agents_read_only_their_own_tools(api: RestClient, tier: str) -> None:
    assert_error(api.get("bot", f"/discovery/agents/other-bot/{tier}"), 403, "forbidden")
    assert_error(api.get("approver", f"/discovery/agents/bot/{tier}"), 403, "forbidden")
    assert api.get("other-bot", f"/discovery/agents/other-bot/{tier}").status_code == 200
    assert api.get("operator", f"/discovery/agents/bot/{tier}").status_code == 200


@pytest.mark.parametrize("tier", ["enabled", "unavailable"])
def test_another_tenants_agent_is_not_found(api: RestClient, tier: str) -> None:
    assert_error(api.get("admin", f"/discovery/agents/gbot/{tier}"), 404, "not_found")
    assert_error(api.get("admin", f"/discovery/agents/nobody/{tier}"), 404, "not_found")
    assert_error(api.get("g_bot", f"/discovery/agents/bot/{tier}"), 403, "forbidden")
    assert set(tools_of(api.get("g_bot", f"/discovery/agents/gbot/{tier}"))) <= {
        "calculate", "private"}


@pytest.mark.parametrize("path", ["/discovery/catalog", "/discovery/available",
                                  "/discovery/agents/bot/enabled"])
def test_discovery_needs_a_token(api: RestClient, path: str) -> None:
    assert_error(api.client.get(path), 401, "unauthenticated")


def test_ten_thousand_tools_and_a_thousand_profiles_give_consistent_views() -> None:
    """At catalog scale (timings belong to make bench): the enabled-only walk over the
    profile's activations agrees with the full three-tier view."""
    base = definition("calculate")
    tools = [(f"id-{i}", base.model_copy(update={"name": f"t{i:05d}", "tenant_id": "big",
                                                 "status": "published"}))
             for i in range(10_000)]
    versions = {rid: [tool] for rid, tool in tools}
    profiles = [Profile(name=f"p{j}", tenant_id="big", activations=tuple(
        Activation(tool=f"t{(j * 10 + k) % 10_000:05d}") for k in range(20)))
        for j in range(1_000)]
    catalog = Catalog(mode=Mode.PRODUCTION, provider_factory=ProviderFactory(builtins=BUILTINS))
    catalog.load(tools, versions, profiles, [Agent(name="a", profile="p7", tenant_id="big")],
                 {"big": TenantPolicy()})
    view = agent_tools(catalog, HealthBoard(), "big", "a")
    assert view is not None and len(view.enabled) == 20
    assert len(view.unavailable) == 9_980
    assert {u.why for u in view.unavailable} == {Why.DISABLED_FOR_AGENT}
    fast = agent_enabled(catalog, HealthBoard(), "big", "a")
    assert fast is not None and fast[0] == "p7"
    assert [t.definition.name for t in fast[1]] == [t.definition.name for t in view.enabled]


# what an agent token is shown (SPEC §2: listing and calling follow one policy) ----------

def test_an_agent_token_lists_only_the_tools_it_may_call(api: RestClient) -> None:
    for tier in ("catalog", "available"):
        assert set(tools_of(api.get("bot", f"/discovery/{tier}"))) == set(ENABLED), tier
    assert set(tools_of(api.get("g_bot", "/discovery/catalog"))) == {"private"}


def test_an_agent_is_shown_unavailable_only_what_its_profile_activates(api: RestClient) -> None:
    own = tools_of(api.get("bot", "/discovery/agents/bot/unavailable"))
    assert set(own) == set(WHY) - {"notes"}  # notes is the tenant's, not activated for bot
    assert {n: t["why_unavailable"] for n, t in own.items()} == \
        {n: w for n, w in WHY.items() if n != "notes"}
    full = tools_of(api.get("operator", "/discovery/agents/bot/unavailable"))
    assert full["notes"]["why_unavailable"] == "disabled_for_agent"


def test_every_listing_carries_each_tools_input_schema(api: RestClient) -> None:
    lookup_schema = {"type": "object", "properties": {"key": {"title": "Key", "type": "string"}},
                     "required": ["key"], "additionalProperties": False}
    enabled = tools_of(api.get("bot", "/discovery/agents/bot/enabled"))
    assert enabled["lookup"]["input_schemas"] == {"run": lookup_schema}
    assert enabled["repo"]["input_schemas"].keys() == {"read"}  # only what it may call
    for path in ("/discovery/catalog", "/discovery/available",
                 "/discovery/agents/bot/unavailable"):
        for name, item in tools_of(api.get("operator", path)).items():
            assert item["input_schemas"], (path, name)
            assert all(s["type"] == "object" for s in item["input_schemas"].values()), name
    catalog = tools_of(api.get("operator", "/discovery/catalog"))
    assert catalog["lookup"]["input_schemas"] == {"run": lookup_schema}
    assert catalog["repo"]["input_schemas"].keys() == {"read", "write"}
