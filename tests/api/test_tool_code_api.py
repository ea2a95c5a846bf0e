"""Python code comes only from the operator (security): a tool a tenant writes through
``POST``/``PUT /tools`` names no module — ``native`` and ``artifact`` tools, an
``entry_point`` and constructor ``init`` arguments are refused (``entry_point_not_allowed``),
a ``function`` tool names only a function of the operator's allow-list
(``function_not_allowed``) — and a row naming a module that reached the database anyway
cannot import it when called. Messages a call answers are redacted and bounded."""

from __future__ import annotations

import base64
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.api.tools_fixtures import api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper import (
    Activation,
    Agent,
    PreviewResult,
    Profile,
    Risk,
    SideEffect,
    ToolError,
    tool,
)
from toolkeeper.model.tool import ToolDefinition

CANARY = "canary-4b1d9e7c52a8"


@dataclass
class Probe:
    """A throwaway module on ``sys.path`` that leaves ``marker`` behind if imported."""

    module: str
    marker: Path

    @property
    def ref(self) -> str:
        return f"{self.module}:s"

    def imported(self) -> bool:
        return self.module in sys.modules or self.marker.exists()


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Probe]:
    name = f"tk_probe_{uuid.uuid4().hex}"
    marker = tmp_path / "probe-imported"
    (tmp_path / f"{name}.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\ns = 'zen'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield Probe(name, marker)
    sys.modules.pop(name, None)


@pytest.fixture
def api(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[RestClient]:
    monkeypatch.setenv("TK_PROBE_CANARY", CANARY)  # in os.environ, which a probe may dump
    with api_for(db_url) as a:
        yield a


def _refs(probe: Probe) -> dict[str, str]:
    return {"os:environ": "os:environ", "this:s": "this:s", "probe": probe.ref}


def _create(api: RestClient, **fields: Any) -> Any:
    return api.post("admin", "/tools", {"name": "mine", "side_effect": "pure",
                                        "risk_default": "low", **fields})


def _agent(api: RestClient, tool_name: str, autonomy: int = 3) -> str:
    """An agent token of ``acme`` whose profile enables ``tool_name``."""
    api.gw.registry.put_profile(Profile(name="probe", tenant_id="acme", autonomy=autonomy,
                                        activations=(Activation(tool=tool_name),)), replace=True)
    api.gw.registry.put_agent(Agent(name="probe-bot", profile="probe", tenant_id="acme"),
                              replace=True)
    return api.gw.store.tokens.create(tenant_id="acme", role="agent", agent="probe-bot")[1]


def _call(api: RestClient, token: str, tool_name: str) -> Any:
    resp = api.client.post("/tools/execute", json={"tool": tool_name, "arguments": {}},
                           headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text
    return resp


# write time ------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["os:environ", "this:s", "probe"])
def test_a_tenant_cannot_create_a_native_tool(api: RestClient, probe: Probe, which: str) -> None:
    ref = _refs(probe)[which]
    err = assert_error(_create(api, implementation_type="native",
                           implementation_config={"entry_point": ref}),
                   422, "entry_point_not_allowed")
    assert err["details"]["pointer"] == "/implementation_config/entry_point"
    assert CANARY not in err["message"]
    assert api.gw.store.registry.tool("mine", "acme") is None
    assert not probe.imported()


def test_a_tool_without_a_type_is_native_and_refused(api: RestClient) -> None:
    err = assert_error(_create(api), 422, "entry_point_not_allowed")
    assert err["details"]["pointer"] == "/implementation_type"


@pytest.mark.parametrize("fields, pointer", [
    ({"implementation_type": "artifact", "artifact_id": "a1"}, "/implementation_type"),
    ({"implementation_type": "http", "implementation_config": {
        "url": "https://x.example", "entry_point": "os:environ"}},
     "/implementation_config/entry_point"),
    ({"implementation_type": "builtin", "implementation_config": {
        "builtin_key": "http_request", "init": {"verify": False}}},
     "/implementation_config/init"),
])
def test_artifacts_entry_points_and_constructor_arguments_are_refused(
        api: RestClient, fields: dict[str, Any], pointer: str) -> None:
    err = assert_error(_create(api, **fields), 422, "entry_point_not_allowed")
    assert err["details"]["pointer"] == pointer


def test_a_tenant_may_still_reference_a_built_in(api: RestClient) -> None:
    resp = _create(api, implementation_type="builtin",
                   implementation_config={"builtin_key": "calculate"})
    assert resp.status_code == 201, resp.text


def test_an_update_cannot_point_a_tool_at_a_module(api: RestClient, probe: Probe) -> None:
    lookup = api.tool_id("lookup")  # a native tool the operator registered for acme
    err = assert_error(api.put("admin", f"/tools/{lookup}", {
        "implementation_config": {"entry_point": probe.ref}}), 422, "entry_point_not_allowed")
    assert err["details"]["pointer"] == "/implementation_config/entry_point"
    crm = _create(api, implementation_type="http",
                  implementation_config={"url": "https://crm.example"}).json()["id"]
    for body in ({"implementation_type": "native",
                  "implementation_config": {"entry_point": "os:environ"}},
                 {"implementation_type": "artifact"}):
        assert_error(api.put("admin", f"/tools/{crm}", body), 422, "entry_point_not_allowed")
    assert not probe.imported()


def test_editing_an_operator_tool_keeps_its_entry_point_and_it_still_runs(api: RestClient) -> None:
    lookup = api.tool_id("lookup")
    resp = api.put("admin", f"/tools/{lookup}", {"description": "edited by the tenant"})
    assert resp.status_code == 200, resp.text
    bumped = api.post("admin", f"/tools/{lookup}/version", new_version="1.0.1")
    assert bumped.status_code == 200, bumped.text
    token = _agent(api, "lookup")
    resp = api.client.post("/tools/execute", json={"tool": "lookup", "arguments": {"key": "k"}},
                           headers={"Authorization": f"Bearer {token}"})
    assert resp.json()["status"] == "succeeded", resp.text
    assert resp.json()["output"] == "K"


def test_a_function_tool_names_only_an_allow_listed_function(api: RestClient) -> None:
    api.gw.factory.functions["shout"] = lambda text: text.upper()  # config `functions:`
    for name in ("os.system", "nope", None):
        impl = {} if name is None else {"function_name": name}
        err = assert_error(_create(api, implementation_type="function",
                               implementation_config=impl), 422, "function_not_allowed")
        assert err["details"]["pointer"] == "/implementation_config/function_name"
    created = _create(api, implementation_type="function",
                      implementation_config={"function_name": "shout"})
    assert created.status_code == 201, created.text
    assert_error(api.put("admin", f"/tools/{created.json()['id']}", {
        "implementation_config": {"function_name": "nope"}}), 422, "function_not_allowed")


# run time: a row written by an older version ----------------------------------------------

def _legacy_row(api: RestClient, implementation_type: str, implementation: dict[str, Any],
                **fields: Any) -> None:
    """An API-defined tool as an older version stored it, published."""
    api.gw.store.registry.upsert_tool(ToolDefinition(
        name="legacy", tenant_id="acme", implementation_type=implementation_type,  # type: ignore[arg-type]
        implementation=implementation, origin="api", side_effect=SideEffect.PURE,
        risk_default=Risk.LOW, input_schema={"type": "object"}, **fields))
    api.gw.registry.publish("legacy", "acme")


@pytest.mark.parametrize("which", ["os:environ", "probe"])
def test_an_api_row_naming_a_module_cannot_import_it_when_called(
        api: RestClient, probe: Probe, which: str) -> None:
    _legacy_row(api, "native", {"entry_point": _refs(probe)[which]})
    resp = _call(api, _agent(api, "legacy"), "legacy")
    body = resp.json()
    assert (body["status"], body["reason"]) == ("denied", "entry_point_not_allowed"), body
    assert CANARY not in resp.text and "environ(" not in resp.text
    assert not probe.imported()
    api.gw.flush()
    events = api.gw.store.audit.list("acme", tool="legacy")
    assert events and all(CANARY not in str(e.data) for e in events)
    unavailable = api.get("admin", "/discovery/agents/probe-bot/unavailable")
    assert unavailable.status_code == 200, unavailable.text
    assert CANARY not in unavailable.text


def test_an_api_row_with_constructor_arguments_does_not_run(api: RestClient) -> None:
    _legacy_row(api, "builtin", {"init": {"verify": False}}, builtin_key="http_request",
                actions={"request": {}})
    body = _call(api, _agent(api, "legacy"), "legacy").json()
    assert (body["status"], body["reason"]) == ("denied", "entry_point_not_allowed"), body


# messages -------------------------------------------------------------------------------

@pytest.fixture
def keyed_api(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RestClient, str]]:
    """The app with ``TOOLKEEPER_SECRETS_KEY`` set, and tools whose errors echo it."""
    key = base64.b64encode(uuid.uuid4().bytes * 2).decode()
    monkeypatch.setenv("TOOLKEEPER_SECRETS_KEY", key)

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
    def leaky() -> str:
        """Fails with the master key in its message (a careless library would)."""
        raise RuntimeError(f"cannot connect with key={key}")

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
    def flappy() -> str:
        """Fails retryably with the key (recorded as the tool's last health error)."""
        raise ToolError("upstream_error", f"upstream said {key}", retryable=True)

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
    def chatty() -> str:
        """Fails with a huge message."""
        raise RuntimeError("x" * 200_000)

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.MEDIUM,
          preview=lambda: PreviewResult(summary=f"would send {key}", data={"auth": key}))
    def peek() -> str:
        """Previews with the key in its summary and data."""
        return "sent"

    with api_for(db_url) as a:
        for t in (leaky, flappy, chatty, peek):
            a.gw.registry.register(t, tenant_id="acme")
        yield a, key


def test_a_tool_error_carrying_the_master_key_is_redacted(
        keyed_api: tuple[RestClient, str]) -> None:
    api, key = keyed_api
    for name in ("leaky", "flappy"):
        resp = _call(api, _agent(api, name), name)
        assert resp.json()["status"] == "failed", resp.text
        assert key not in resp.text and "***" in resp.json()["message"]
    health = api.get("admin", "/tools/health")
    assert health.status_code == 200, health.text
    assert key not in health.text
    flappy = next(h for h in health.json() if h["name"] == "flappy")
    assert flappy["last_error"] is not None and "***" in flappy["last_error"]


def test_a_huge_tool_error_message_is_bounded(keyed_api: tuple[RestClient, str]) -> None:
    api, _key = keyed_api
    body = _call(api, _agent(api, "chatty"), "chatty").json()
    assert body["status"] == "failed"
    assert body["message"].startswith("RuntimeError: xxx")
    assert len(body["message"]) <= 2000


def test_a_preview_carrying_the_master_key_is_redacted(keyed_api: tuple[RestClient, str]) -> None:
    api, key = keyed_api
    resp = _call(api, _agent(api, "peek", autonomy=1), "peek")  # medium at 1: preview
    body = resp.json()
    assert body["status"] == "preview_required", resp.text
    assert key not in resp.text
    assert body["preview"] == {"summary": "would send ***", "data": {"auth": "***"}}
    stored = api.gw.store.approvals.get(body["preview_token"])
    assert stored is not None and key not in f"{stored.preview} {stored.summary}"
