"""Built-in ``web_search`` (SPEC §11, seed 002): the credential precedence, asserted on the
request a Serper-compatible loopback server receives; the key nowhere in results, audit or
logs; upstream failures, caps, validation and the SSRF guard. Through the Gateway on SQLite
and PostgreSQL, and once over REST."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from tests.api.identity_fixtures import identity_api
from tests.support.loopback import JsonHandler, serving
from tests.support.rest import assert_error
from toolkeeper import Activation, Agent, Autonomy, CallResult, Gateway, Profile
from toolkeeper.builtins import BUILTINS, definition
from toolkeeper.builtins.web_search import INPUT_SCHEMA, WebSearchPolicy
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.secrets.embedded import EmbeddedSecretsStore
from toolkeeper.store import Store

ENV_KEY = "env-key-5c1f0e9a"
SERPER_TOKEN = "serper-token-7b2d41c3"
WS_KEY = "ws-serper-key-19ae77d0"
LINKED_KEY = "linked-key-3f8c2e61"
DIRECT_KEY = "direct-key-a41b9d52"
LITERAL_KEY = "literal-key-0d6e3b88"
REJECTED_KEY = "rejected-key-e2c4a907"
ALL_KEYS = (ENV_KEY, SERPER_TOKEN, WS_KEY, LINKED_KEY, DIRECT_KEY, LITERAL_KEY, REJECTED_KEY)
LOOPBACK = {"allowed_hosts": ["127.0.0.1"], "allowed_networks": ["127.0.0.0/8"]}


class Serper(JsonHandler):
    """Serper's shape: ``POST /search {q, num}`` with ``X-API-KEY``; ``organic`` results.
    Query ``boom`` answers 500, ``teapot`` 418, ``shapeless`` has no ``organic``,
    ``redirect`` redirects, ``slow`` waits, key ``REJECTED_KEY`` gets 401; every
    answer's first snippet echoes the key it was sent (a careless upstream)."""

    got: ClassVar[list[dict[str, Any]]]
    release: ClassVar[threading.Event]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        key = self.headers.get("X-API-KEY", "")
        self.got.append({"path": self.path, "key": key, "body": body,
                         "content_type": self.headers.get("Content-Type")})
        if key == REJECTED_KEY:
            return self.reply({"message": f"Unauthorized: {key}"}, status=401)
        if body["q"] == "boom":
            return self.reply({"message": "internal"}, status=500)
        if body["q"] == "teapot":
            return self.reply({"message": f"no, {key}"}, status=418)
        if body["q"] == "shapeless":
            return self.reply({"answerBox": {"answer": "42"}})
        if body["q"] == "redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if body["q"] == "slow":
            self.release.wait(10)
        organic = [{"title": f"Result {i}", "link": f"https://example.org/{i}",
                    "snippet": (f"key was {key}" if i == 1 else "x" * 120), "position": i}
                   for i in range(1, 21)]
        self.reply({"searchParameters": {"q": body["q"]}, "organic": organic})


@dataclass
class Loopback:
    """A running loopback Serper: its search endpoint and what it received."""

    url: str
    got: list[dict[str, Any]]
    release: threading.Event


@pytest.fixture
def serper() -> Iterator[Loopback]:
    handler = type("OwnSerper", (Serper,), {"got": [], "release": threading.Event()})
    with serving(handler) as base:
        yield Loopback(base + "/search", handler.got, handler.release)
        handler.release.set()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No Serper key or endpoint from the machine running the tests."""
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    monkeypatch.delenv("SERPER_ENDPOINT", raising=False)
    return monkeypatch


def _gateway(db_url: str, tools: dict[str, dict[str, Any]],
             policy: dict[str, Any] | None = None) -> Gateway:
    """``tools``: name → implementation extras of a ``web_search`` tool, all activated, all
    under ``LOOPBACK`` and ``policy`` (a ``"_policy"`` extra replaces both)."""
    store = Store.open(db_url)
    gw = Gateway(store, secrets=EmbeddedSecretsStore(store.blobs, os.urandom(32)),
                 factory=ProviderFactory(builtins=BUILTINS))
    for name, extra in tools.items():
        own = extra.pop("_policy", {**LOOPBACK, **(policy or {})})
        gw.registry.register(definition("web_search", name=name, policy=own,
                                        implementation={"builtin_key": "web_search", **extra}))
    gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(3), activations=tuple(
        Activation(tool=name) for name in tools)), replace=True)
    gw.registry.put_agent(Agent(name="bot", profile="p"), replace=True)
    return gw


@pytest.fixture
def gateways(db_url: str) -> Iterator[list[Gateway]]:
    made: list[Gateway] = []
    yield made
    for gw in made:
        gw.close()


def _open(gateways: list[Gateway], db_url: str, tools: dict[str, dict[str, Any]],
          policy: dict[str, Any] | None = None) -> Gateway:
    gw = _gateway(db_url, tools, policy)
    gateways.append(gw)
    return gw


def _search(gw: Gateway, tool: str = "web_search", **arguments: Any) -> CallResult:
    return gw.call_sync(tool, arguments={"query": "toolkeeper", **arguments}, agent="bot")


def _put(gw: Gateway, connector: str, key: str, value: str) -> None:
    assert gw.credentials is not None
    gw.credentials.put("default", connector, key, value)
    gw.refresh_secrets()


def _nowhere(gw: Gateway, results: list[CallResult], logs: str) -> None:
    """No key in any result, audit row or log line."""
    gw.flush()
    shown = [json.dumps(r.to_dict(), default=str) for r in results]
    shown += [json.dumps(e.to_dict(), default=str)
              for e in gw.store.audit.list("default", limit=1000)]
    for key in ALL_KEYS:
        assert not [s for s in shown if key in s], key
        assert key not in logs, key


# -- the four places, each winning over the ones below it ------------------------------

def test_each_precedence_level_sends_its_key_and_beats_the_lower_ones(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    gw = _open(gateways, db_url, {
        "web_search": {"endpoint": serper.url},
        "ws_ref": {"endpoint": serper.url, "credentials_ref": "${secret:search/linked}"},
        "ws_key": {"endpoint": serper.url, "api_key": "${secret:search/direct}",
                   "credentials_ref": "${secret:search/linked}"},
        "ws_literal": {"endpoint": serper.url, "api_key": LITERAL_KEY,
                       "credentials_ref": "${secret:search/linked}"}})
    env.setenv("SERPER_API_KEY", ENV_KEY)
    env.setenv("SERPER_ENDPOINT", serper.url)
    results = [_search(gw)]  # 4. the environment
    _put(gw, "serper", "api_key", json.dumps({"token": SERPER_TOKEN, "endpoint": serper.url}))
    results.append(_search(gw))  # 3b. provider_key serper, payload ``token``
    _put(gw, "web_search", "serper", json.dumps({"api_key": WS_KEY}))
    results.append(_search(gw))  # 3a. provider_key web_search, variant serper
    _put(gw, "search", "linked", LINKED_KEY)
    results.append(_search(gw, "ws_ref"))  # 2. credentials_ref
    _put(gw, "search", "direct", DIRECT_KEY)
    results.append(_search(gw, "ws_key"))  # 1. implementation.api_key (a reference)
    results.append(_search(gw, "ws_literal"))  # 1. implementation.api_key (a literal)
    assert [r.status.value for r in results] == ["succeeded"] * 6, results
    assert [g["key"] for g in serper.got] == [ENV_KEY, SERPER_TOKEN, WS_KEY, LINKED_KEY,
                                             DIRECT_KEY, LITERAL_KEY]
    for got in serper.got:
        assert got["path"] == "/search"
        assert got["body"] == {"q": "toolkeeper", "num": 5}
        assert got["content_type"] == "application/json"
    for res in results:  # the upstream echoed the key: masked in what the caller sees
        assert res.output["results"][0]["snippet"] == "key was ***"
        assert res.output["provider"] == "serper" and res.output["num"] == 5
        assert [r["position"] for r in res.output["results"]] == [1, 2, 3, 4, 5]
        assert res.output["results"][1]["url"] == "https://example.org/2"
    _nowhere(gw, results, caplog.text)


def test_no_key_anywhere_is_credential_missing_naming_the_four_places(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url}})
    res = _search(gw)
    assert (res.status.value, res.reason) == ("failed", "credential_missing")
    for place in ("implementation.api_key", "implementation.credentials_ref",
                  "web_search/serper", "serper/api_key", "SERPER_API_KEY"):
        assert place in (res.message or ""), place
    assert serper.got == []


def test_a_credential_without_a_key_is_refused(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url}})
    env.setenv("SERPER_API_KEY", ENV_KEY)  # a broken higher level does not fall through
    _put(gw, "web_search", "serper", json.dumps({"endpoint": serper.url}))
    res = _search(gw)
    assert (res.status.value, res.reason) == ("failed", "credential_invalid")
    assert serper.got == []


def test_a_missing_reference_fails_rather_than_falling_through(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {
        "web_search": {"endpoint": serper.url, "credentials_ref": "${secret:search/absent}"}})
    env.setenv("SERPER_API_KEY", ENV_KEY)
    res = _search(gw)
    assert (res.status.value, res.reason) == ("failed", "secret_not_found")
    assert serper.got == []


# -- where the key may go ---------------------------------------------------------------

def test_the_environment_key_never_goes_to_an_endpoint_a_tool_wrote(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url}})
    env.setenv("SERPER_API_KEY", ENV_KEY)  # no SERPER_ENDPOINT: only Serper itself
    res = _search(gw)
    assert (res.status.value, res.reason) == ("denied", "host_not_allowed")
    assert serper.got == []


def test_an_endpoint_outside_the_policy_is_refused_before_the_key_leaves(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {
        "web_search": {"_policy": {"allowed_hosts": ["127.0.0.1"]}},  # not its network
        "ws_hosts": {"_policy": {}}})  # the default policy: google.serper.dev only
    _put(gw, "web_search", "serper", json.dumps({"api_key": WS_KEY, "endpoint": serper.url}))
    res = _search(gw)
    assert (res.status.value, res.reason) == ("denied", "address_not_allowed")
    res = _search(gw, "ws_hosts")
    assert (res.status.value, res.reason) == ("denied", "host_not_allowed")
    assert serper.got == []
    assert WS_KEY not in json.dumps(res.to_dict(), default=str)


# -- upstream failures ------------------------------------------------------------------

def test_upstream_failures_get_stable_reasons(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url},
                                  "ws_rejected": {"endpoint": serper.url,
                                                  "api_key": REJECTED_KEY}},
               policy={"timeout_s": 0.5})
    env.setenv("SERPER_API_KEY", ENV_KEY)
    env.setenv("SERPER_ENDPOINT", serper.url)
    rejected = _search(gw, "ws_rejected")
    assert (rejected.status.value, rejected.reason) == ("failed", "credential_rejected")
    boom = _search(gw, query="boom")
    assert (boom.status.value, boom.reason) == ("failed", "upstream_error")
    slow = _search(gw, query="slow")
    assert (slow.status.value, slow.reason) == ("failed", "timeout")
    serper.release.set()
    _nowhere(gw, [rejected, boom, slow], caplog.text)


@pytest.mark.parametrize(("query", "policy", "reason"), [
    ("teapot", {}, "upstream_error"),
    ("shapeless", {}, "upstream_error"),
    ("redirect", {}, "upstream_error"),
    ("toolkeeper", {"max_response_bytes": 1024}, "output_too_large"),
])
def test_answers_that_are_not_results_fail_with_a_reason(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch,
        query: str, policy: dict[str, Any], reason: str) -> None:
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url}}, policy=policy)
    env.setenv("SERPER_API_KEY", ENV_KEY)
    env.setenv("SERPER_ENDPOINT", serper.url)
    res = _search(gw, query=query)
    assert (res.status.value, res.reason, res.output) == ("failed", reason, None)
    assert ENV_KEY not in json.dumps(res.to_dict(), default=str)
    assert len(serper.got) == 1  # not retried: none of these is transient


def test_an_unknown_provider_is_provider_unavailable(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {"web_search": {"provider": "altavista"}})
    env.setenv("SERPER_API_KEY", ENV_KEY)
    res = _search(gw)
    assert (res.status.value, res.reason) == ("failed", "provider_unavailable")
    assert "altavista" in (res.message or "")


# -- caps and validation ----------------------------------------------------------------

def test_num_is_capped_by_the_policy(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url}},
               policy={"max_results": 3, "default_results": 2})
    env.setenv("SERPER_API_KEY", ENV_KEY)
    env.setenv("SERPER_ENDPOINT", serper.url)
    asked = _search(gw, num=50)
    default = _search(gw)
    assert [g["body"]["num"] for g in serper.got] == [3, 2]
    assert (asked.output["num"], len(asked.output["results"])) == (3, 3)
    assert (default.output["num"], len(default.output["results"])) == (2, 2)
    assert not asked.output["truncated"]


def test_results_are_dropped_to_fit_max_output_chars(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch) -> None:
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url}},
               policy={"max_output_chars": 600, "max_results": 20})
    env.setenv("SERPER_API_KEY", ENV_KEY)
    env.setenv("SERPER_ENDPOINT", serper.url)
    res = _search(gw, num=20)
    assert res.ok, res
    assert res.output["truncated"] is True
    assert 1 <= len(res.output["results"]) < 20
    assert len(json.dumps(res.output, ensure_ascii=False)) <= 600


@pytest.mark.parametrize(("arguments", "policy"), [
    ({"query": ""}, {}),
    ({"query": "   "}, {}),
    ({"query": "a much longer query"}, {"max_query_chars": 5}),
    ({"query": "ok", "num": 0}, {}),
    ({"query": "ok", "page": 2}, {}),
    ({}, {}),
])
def test_bad_input_is_invalid_arguments_and_sends_nothing(
        db_url: str, gateways: list[Gateway], serper: Loopback, env: pytest.MonkeyPatch,
        arguments: dict[str, Any], policy: dict[str, Any]) -> None:
    gw = _open(gateways, db_url, {"web_search": {"endpoint": serper.url}}, policy=policy)
    env.setenv("SERPER_API_KEY", ENV_KEY)
    env.setenv("SERPER_ENDPOINT", serper.url)
    res = gw.call_sync("web_search", arguments=arguments, agent="bot")
    assert res.reason == "invalid_arguments", res
    assert res.output is None
    assert serper.got == []


def test_policy_values_are_validated() -> None:
    with pytest.raises(ValidationError):
        WebSearchPolicy(allowed_networks=("not-a-network",))
    with pytest.raises(ValidationError):
        WebSearchPolicy(max_results=0)
    with pytest.raises(ValidationError):
        WebSearchPolicy(api_key="x")  # type: ignore[call-arg]


def test_declared_side_effect_and_risk() -> None:
    d = definition("web_search")
    assert (d.side_effect.value, d.risk_default.value) == ("pure", "low")
    assert d.actions["run"].side_effect is not None
    assert d.actions["run"].side_effect.value == "pure"


# -- over REST: a tenant's own credential and tool ----------------------------------------

def test_a_tenant_searches_with_its_own_credential_over_rest(
        tmp_path: Path, serper: Loopback, env: pytest.MonkeyPatch) -> None:
    env.setenv("SERPER_API_KEY", ENV_KEY)  # the operator's: a tenant's own key wins
    with identity_api(tmp_path) as api:
        literal = api.call("POST", "/tools", json={
            "name": "leaky_search", "implementation_type": "builtin",
            "implementation_config": {"builtin_key": "web_search", "api_key": LITERAL_KEY}})
        assert_error(literal, 422, "secret_literal_refused")
        assert LITERAL_KEY not in literal.text
        put = api.call("PUT", "/credentials/web_search/serper",
                       json={"value": json.dumps({"api_key": WS_KEY, "endpoint": serper.url})})
        assert put.status_code == 204, put.text
        created = api.call("POST", "/tools", json={
            "name": "search", "implementation_type": "builtin", "side_effect": "pure",
            "risk_default": "low", "input_schema": INPUT_SCHEMA,
            "implementation_config": {"builtin_key": "web_search"},
            "policy": LOOPBACK})
        assert created.status_code == 201, created.text
        published = api.call("POST", f"/tools/{created.json()['id']}/publish")
        assert published.status_code == 200, published.text
        api.gw.registry.put_profile(Profile(name="reader", autonomy=Autonomy(3),
                                            activations=(Activation(tool="search"),)), replace=True)
        res = api.call("POST", "/tools/execute", who="agent",
                       json={"tool": "search", "arguments": {"query": "rest", "num": 2}})
        assert res.status_code == 200, res.text
        body = res.json()
    assert body["status"] == "succeeded", body
    assert [r["url"] for r in body["output"]["results"]] == [
        "https://example.org/1", "https://example.org/2"]
    assert [g["key"] for g in serper.got] == [WS_KEY]
    assert serper.got[0]["body"] == {"q": "rest", "num": 2}
    assert WS_KEY not in res.text


# -- from a config file: an operator's tool, its platform secret, `toolkeeper check` -------

CONFIG = """\
version: 1
secrets: {{backend: env}}
tools:
  - builtin: web_search
    policy: {{allowed_hosts: ["127.0.0.1"], allowed_networks: ["127.0.0.0/8"], max_results: 3}}
    overrides:
      implementation: {{builtin_key: web_search, endpoint: "{endpoint}",
                        credentials_ref: "${{secret:search/linked}}"}}
profiles:
  - name: p
    autonomy: 3
    activations: [{{tool: web_search{policy}}}]
agents: [{{name: bot, profile: p}}]
"""


def test_a_configured_tool_uses_its_linked_platform_secret(
        db_url: str, tmp_path: Path, serper: Loopback, env: pytest.MonkeyPatch) -> None:
    env.setenv("TOOLKEEPER_SECRET_SEARCH__LINKED", LINKED_KEY)
    env.setenv("SERPER_API_KEY", ENV_KEY)
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(endpoint=serper.url, policy=""))
    with Gateway.open(db_url, config=path) as gw:
        res = _search(gw, num=10)
        assert res.ok, res
        assert res.output["num"] == 3 and res.output["results"][0]["snippet"] == "key was ***"
        _nowhere(gw, [res], "")
    assert [(g["key"], g["body"]) for g in serper.got] == [
        (LINKED_KEY, {"q": "toolkeeper", "num": 3})]


def test_check_validates_web_search_policy_values(serper: Loopback) -> None:
    from toolkeeper.config import Rule, check, load_text

    good = CONFIG.format(endpoint=serper.url, policy=", policy: {default_results: 2}")
    assert check(load_text(good), base_dir=Path.cwd()) == []
    bad = CONFIG.format(endpoint=serper.url, policy=", policy: {default_results: 0}")
    assert [v.rule for v in check(load_text(bad), base_dir=Path.cwd())] == [
        Rule.INVALID_POLICY]


def test_a_tenant_cannot_open_networks_beyond_the_operators_ceiling(tmp_path: Path) -> None:
    from toolkeeper.bounds import TenantBounds

    with identity_api(tmp_path, tenant_bounds=TenantBounds()) as api:
        created = api.call("POST", "/tools", json={
            "name": "search", "implementation_type": "builtin", "input_schema": INPUT_SCHEMA,
            "implementation_config": {"builtin_key": "web_search"}, "policy": LOOPBACK})
        assert_error(created, 422, "policy_exceeds_bounds")
