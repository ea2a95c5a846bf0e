"""REST: publishing a tool whose provider cannot be built is a 422 ``provider_unavailable``
with a clear message; a call of one that slipped in answers ``provider_unavailable``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.tools_fixtures import api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper import Activation, Agent, Profile


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def _function_tool(api: RestClient) -> str:
    api.gw.factory.functions["shout"] = lambda text: text.upper()  # config `functions:`
    created = api.post("admin", "/tools", {
        "name": "shouter", "side_effect": "pure", "risk_default": "low",
        "implementation_type": "function", "implementation_config": {"function_name": "shout"},
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def test_publishing_a_tool_whose_function_left_the_allow_list_is_refused(api: RestClient) -> None:
    tool_id = _function_tool(api)
    del api.gw.factory.functions["shout"]  # the operator dropped it from `functions:`
    err = assert_error(api.post("admin", f"/tools/{tool_id}/publish"), 422, "provider_unavailable")
    assert err["message"] == ("shouter: provider unavailable: function 'shout' is not in the "
                              "function allow-list")
    assert api.get("admin", f"/tools/{tool_id}").json()["status"] == "draft"


def test_a_call_of_a_tool_whose_function_left_stops_with_provider_unavailable(
        api: RestClient) -> None:
    tool_id = _function_tool(api)
    assert api.post("admin", f"/tools/{tool_id}/publish").status_code == 200
    api.gw.registry.put_profile(Profile(name="shouting", tenant_id="acme", autonomy=3,
                                        activations=(Activation(tool="shouter"),)))
    api.gw.registry.put_agent(Agent(name="shout-bot", profile="shouting", tenant_id="acme"))
    token = api.gw.store.tokens.create(tenant_id="acme", role="agent", agent="shout-bot")[1]
    del api.gw.factory.functions["shout"]
    api.gw.definitions_changed()  # the next snapshot builds providers afresh
    resp = api.client.post("/tools/execute", json={"tool": "shouter",
                                                   "arguments": {"text": "hi"}},
                           headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["status"], body["reason"]) == ("denied", "provider_unavailable"), body
    assert "not in the function allow-list" in body["message"]
