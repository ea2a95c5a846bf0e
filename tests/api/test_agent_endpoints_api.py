"""Agent endpoints over REST (``/agents/{name}/endpoint``) and ``agent_call`` chains end to
end: agent A calls B through the gateway, B's loopback endpoint calls back into the real
REST server as B targeting A with the chain it received, and that call stops with
``agent_call_cycle`` before A's endpoint is ever reached."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.identity_fixtures import identity_api
from tests.support.loopback import JsonHandler, serving, serving_app
from tests.support.rest import RestClient
from toolkeeper import Activation, Agent, Profile
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.builtins import definition
from toolkeeper.model.profile import agent_id

CHAIN = "Toolkeeper-Agent-Chain"


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    """The identity app (tenant bounds: loopback) plus agents ``alice`` and ``bob`` whose
    profile enables the agent_call built-in, each with an agent token."""
    with identity_api(db_url) as client:
        gw = client.gw
        gw.registry.register(definition("agent_call"))
        gw.registry.put_profile(Profile(name="callers", autonomy=3,
                                        activations=(Activation(tool="agent_call"),)), replace=True)
        for name in ("alice", "bob"):
            gw.registry.put_agent(Agent(name=name, profile="callers"), replace=True)
            client.tokens[name] = gw.store.tokens.create(
                tenant_id="default", role="agent", agent=name, label=name)[1]
        yield client


def _endpoint(url: str, **fields: Any) -> dict[str, Any]:
    return {"transport": "http", "url": url, "status": "published",
            "allowed_networks": ["127.0.0.1/32"], **fields}


def test_put_get_delete_endpoint(api: RestClient) -> None:
    r = api.put("admin", "/agents/alice/endpoint", _endpoint("http://127.0.0.1:9/run"))
    assert r.status_code == 200, r.text
    assert r.json()["agent_id"] == agent_id("default", "alice")
    assert r.json()["origin"] == "api"
    assert api.get("operator", "/agents/alice/endpoint").json()["url"] == "http://127.0.0.1:9/run"
    rebound = api.put("admin", "/agents/alice", {"profile": "callers", "description": "d"})
    assert rebound.status_code == 200, rebound.text
    assert api.get("admin", "/agents/alice/endpoint").status_code == 200  # kept
    assert api.get("other_admin", "/agents/alice/endpoint").status_code == 404
    assert api.put("agent", "/agents/alice/endpoint", _endpoint("http://x/")).status_code == 403
    assert api.call("DELETE", "/agents/alice/endpoint").status_code == 204
    assert api.get("admin", "/agents/alice/endpoint").status_code == 404


@pytest.mark.parametrize(("fields", "reason"), [
    ({"allowed_networks": ["10.0.0.0/8"]}, "policy_exceeds_bounds"),
    ({"allowed_networks": ["0.0.0.0/0"]}, "policy_exceeds_bounds"),
    ({"headers": {"Authorization": "Bearer abc"}}, "secret_literal_refused"),
    ({"url": "file:///etc/passwd"}, "invalid_arguments"),
    ({"url": "https://user:pw@agents.example/run"}, "secret_literal_refused"),
    ({"transport": "smtp"}, "invalid_arguments"),
    ({"origin": "config", "extra": 1}, "invalid_arguments"),
])
def test_bad_endpoints_are_refused_and_nothing_is_stored(
        api: RestClient, fields: dict[str, Any], reason: str) -> None:
    r = api.put("admin", "/agents/alice/endpoint", {**_endpoint("http://127.0.0.1:9/"), **fields})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["reason"] == reason
    assert api.get("admin", "/agents/alice/endpoint").status_code == 404


def test_a_bad_chain_header_is_refused(api: RestClient) -> None:
    r = api.execute("alice", "agent_call", {"target_agent_slug": "bob", "input": "x"},
                    headers={CHAIN: "ok, not a name!"})
    assert r.status_code == 422 and r.json()["error"]["reason"] == "invalid_arguments"


@pytest.fixture
def server(api: RestClient) -> Iterator[str]:
    """The same app served for real on loopback (the callee calls back over HTTP)."""
    with serving_app(create_app(api.gw, ApiSettings()),
                     what="the REST server to start") as port:
        yield f"http://127.0.0.1:{port}"


def test_a_to_b_to_a_stops_with_agent_call_cycle(api: RestClient, server: str) -> None:
    hits: dict[str, list[Any]] = {"alice": [], "bob": []}

    class Alice(JsonHandler):
        def do_POST(self) -> None:
            hits["alice"].append(self.headers[CHAIN])
            self.reply({"output": "alice ran"})

    class Bob(JsonHandler):
        """Bob's agent: asks alice back through toolkeeper, passing the chain on."""

        def do_POST(self) -> None:
            received = self.headers[CHAIN]
            hits["bob"].append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            back = httpx.post(server + "/tools/execute", timeout=10, headers={
                "Authorization": f"Bearer {api.tokens['bob']}", CHAIN: received}, json={
                "tool": "agent_call",
                "arguments": {"target_agent_slug": "alice", "input": "again"}})
            self.reply({"run_id": "bob-1", "status": "completed", "output": back.json()})

    with serving(Alice) as alice_url, serving(Bob) as bob_url:
        for name, url in (("alice", alice_url), ("bob", bob_url)):
            r = api.put("admin", f"/agents/{name}/endpoint", _endpoint(url + "/run"))
            assert r.status_code == 200, r.text
        r = httpx.post(server + "/tools/execute", timeout=20, headers={
            "Authorization": f"Bearer {api.tokens['alice']}"}, json={
            "tool": "agent_call", "arguments": {"target_agent_slug": "bob", "input": "hi"}})
    assert r.status_code == 200, r.text
    outer = r.json()
    assert outer["status"] == "succeeded", outer
    inner = outer["output"]["output"]
    assert (inner["status"], inner["reason"]) == ("denied", "agent_call_cycle"), inner
    assert hits["alice"] == []  # nothing ran twice: alice's endpoint was never called
    assert len(hits["bob"]) == 1 and hits["bob"][0]["chain"] == ["alice"]
    events = api.gw.store.audit.list("default", agent="bob")
    assert any(getattr(e, "reason", None) == "agent_call_cycle" for e in events)


def test_an_agent_call_tool_created_over_rest_runs(api: RestClient) -> None:
    class Bob(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.reply({"run_id": "b-7", "output": f"bob says {body['input']}"})

    created = api.post("admin", "/tools", {
        "name": "ask_bob", "implementation_type": "agent_call",
        "implementation_config": {"target_agent_slug": "bob"},
        "input_schema": {"type": "object", "properties": {"input": {"type": "string"}},
                         "required": ["input"], "additionalProperties": False}})
    assert created.status_code == 201, created.text
    published = api.post("admin", f"/tools/{created.json()['id']}/publish")
    assert published.status_code == 200, published.text
    api.gw.registry.put_profile(Profile(name="callers", autonomy=3,
                                        activations=(Activation(tool="ask_bob"),)), replace=True)
    with serving(Bob) as url:
        assert api.put("admin", "/agents/bob/endpoint",
                       _endpoint(url + "/run")).status_code == 200
        r = api.execute("alice", "ask_bob", {"input": "hello"})
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert (out["mode"], out["target_agent_slug"], out["run_id"], out["status"],
            out["output"]) == ("sync", "bob", "b-7", "completed", "bob says hello")


@pytest.mark.parametrize("url", [
    "http://localhost:9/run", "http://LOCALHOST./run", "http://127.1:9/", "http://2130706433/",
    "http://0x7f000001/", "http://0177.0.0.1/", "http://[::1]:9/", "http://[::ffff:7f00:1]/",
    "http://0/", "http://169.254.169.254/latest", "http://10.1.2.3/",
])
def test_an_endpoint_url_reaching_a_refused_address_is_refused_when_written(
        api: RestClient, url: str) -> None:
    # allowed_networks empty: loopback and private spellings are refused however written,
    # resolved as the call's transport would resolve them (issue 26: told at once, not at use)
    r = api.put("admin", "/agents/alice/endpoint", {**_endpoint(url), "allowed_networks": []})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["reason"] == "address_not_allowed"
    assert api.get("admin", "/agents/alice/endpoint").status_code == 404
