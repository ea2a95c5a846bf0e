"""SPEC §6 over REST: a tenant admin edits the governance of a tool the operator wired (an
``mcp`` tool imported from ``servers:``, an ``artifact`` tool) with ``PUT /tools/{id}``. Left
wired as it is, it stays the operator's (its origin is kept), publishes, and the next call
meets the new governance; an edit of its wiring makes it the tenant's, which the API
refuses to publish as before; another tenant cannot touch it. Upstream: the fixture MCP
server of the upstream tests; the artifact: one installed under ``artifacts:``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from toolkeeper import Gateway
from toolkeeper.api import create_app

FIXTURE = Path(__file__).resolve().parents[1] / "mcp" / "upstream_fixture.py"


@dataclass
class Setup:
    gw: Gateway
    client: TestClient
    tokens: dict[str, str]

    def call(self, method: str, path: str, body: Any = None,
             who: str = "admin") -> tuple[int, Any]:
        r = self.client.request(method, path, json=body,
                                headers={"Authorization": f"Bearer {self.tokens[who]}"})
        return r.status_code, r.json()

    def tool_id(self, name: str) -> str:
        rec = self.gw.store.registry.tool(name, "default")
        assert rec is not None
        return rec[0]

    def stored(self, name: str) -> Any:
        rec = self.gw.store.registry.tool(name, "default")
        assert rec is not None
        return rec[1]

    def run(self, tool: str, arguments: dict[str, Any]) -> str:
        code, body = self.call("POST", "/tools/execute",
                               {"tool": tool, "arguments": arguments}, who="agent")
        assert code in (200, 202), body
        status: str = body["status"]
        return status


def _install(root: Path) -> None:
    where = root / "artifacts" / "echo-1.0.0"
    where.mkdir(parents=True)
    (where / "echo.py").write_text("def run(text):\n    return text\n")
    (where / "artifact.json").write_text(json.dumps({
        "id": "echo", "version": "1.0.0", "entry": "echo:run",
        "inputs": [{"name": "text", "type": "string", "required": True}]}))


@pytest.fixture
def fx(db_url: str, tmp_path: Path) -> Iterator[Setup]:
    _install(tmp_path)
    server = {"name": "fx", "tenant": "default", "include": ["echo"],
              "command": [sys.executable, str(FIXTURE), "stdio"],
              "tools": {"echo": {"side_effect": "pure", "risk": "low"}}}
    doc = {"version": 1, "servers": [server], "artifacts": {"dir": str(tmp_path / "artifacts")},
           "tools": [{"name": "shout", "tenant": "default", "implementation_type": "artifact",
                      "artifact_id": "echo", "artifact_version": "1.0.0",
                      "side_effect": "pure", "risk_default": "low"}],
           "profiles": [{"name": "p", "activations": [{"tool": "fx_echo"}, {"tool": "shout"}]}],
           "agents": [{"name": "a", "profile": "p"}]}
    cfg = tmp_path / "toolkeeper.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    with Gateway.open(db_url, config=cfg) as gw:
        tokens = {role: gw.store.tokens.create(tenant_id="default", role=role,
                                               agent="a" if role == "agent" else None)[1]
                  for role in ("admin", "agent")}
        tokens["stranger"] = gw.store.tokens.create(tenant_id="other", role="admin")[1]
        with TestClient(create_app(gw), raise_server_exceptions=False) as client:
            yield Setup(gw, client, tokens)


@pytest.mark.parametrize(("name", "arguments"), [("fx_echo", {"text": "hi"}),
                                                 ("shout", {"text": "hi"})])
def test_a_governance_edit_of_an_operator_tool_keeps_its_wiring_and_publishes(
        fx: Setup, name: str, arguments: dict[str, Any]) -> None:
    before = fx.stored(name)
    assert before.origin != "api" and fx.run(name, arguments) == "succeeded"
    tool = fx.tool_id(name)
    code, body = fx.call("PUT", f"/tools/{tool}", {
        "description": "Reviewed by the tenant.", "risk_default": "critical",
        "side_effect": "irreversible", "scopes_required": [], "requires_confirmation": False})
    assert code == 200, body
    after = fx.stored(name)
    assert after.origin == before.origin
    assert (after.implementation_type, after.implementation, after.artifact_id) == (
        before.implementation_type, before.implementation, before.artifact_id)
    code, body = fx.call("POST", f"/tools/{tool}/version?new_version=1.1.0")
    assert code == 200 and body["status"] == "published", body
    assert fx.stored(name).implementation == before.implementation  # the pin still holds
    # the next call meets the new governance: a critical, irreversible tool is gated
    assert fx.run(name, arguments) == "approval_required"


def test_an_edit_of_an_imported_tools_wiring_makes_it_the_tenants_and_is_not_published(
        fx: Setup) -> None:
    tool = fx.tool_id("fx_echo")
    code, body = fx.call("PUT", f"/tools/{tool}", {
        "implementation_config": {"server": "fx", "tool": "pid"}, "risk_default": "high"})
    assert code == 200, body
    assert fx.stored("fx_echo").origin == "api"
    code, body = fx.call("POST", f"/tools/{tool}/version?new_version=1.1.0")
    assert (code, body["error"]["reason"]) == (422, "provider_unavailable"), body


def test_an_edit_of_an_artifact_tools_wiring_is_refused_as_tenant_code(fx: Setup) -> None:
    tool = fx.tool_id("shout")
    code, body = fx.call("PUT", f"/tools/{tool}", {
        "implementation_config": {}, "risk_default": "high"})
    assert (code, body["error"]["reason"]) == (422, "entry_point_not_allowed"), body
    assert fx.stored("shout").origin != "api" and fx.stored("shout").risk_default == "low"


def test_another_tenant_cannot_edit_an_operator_tool(fx: Setup) -> None:
    for name in ("fx_echo", "shout"):
        code, body = fx.call("PUT", f"/tools/{fx.tool_id(name)}", {"risk_default": "low"},
                             who="stranger")
        assert code == 404 and body["error"]["reason"] == "not_found", body
        code, body = fx.call("POST", f"/tools/{fx.tool_id(name)}/publish", who="stranger")
        assert code == 404, body


def test_a_governance_edit_of_an_imported_tool_stays_across_the_next_listing(
        fx: Setup) -> None:
    tool = fx.tool_id("fx_echo")
    code, body = fx.call("PUT", f"/tools/{tool}", {"risk_default": "critical"})
    assert code == 200, body
    code, body = fx.call("POST", f"/tools/{tool}/version?new_version=1.1.0")
    assert code == 200, body
    assert fx.gw.sync_servers()["fx"].unchanged == ["fx_echo"]  # the operator changed nothing
    after = fx.stored("fx_echo")
    assert (after.risk_default, after.version, after.status) == ("critical", "1.1.0", "published")
    assert fx.run("fx_echo", {"text": "hi"}) == "approval_required"


def test_an_edit_of_an_operator_tools_policy_makes_it_the_tenants(fx: Setup) -> None:
    tool = fx.tool_id("fx_echo")
    code, body = fx.call("PUT", f"/tools/{tool}", {"policy": {}, "risk_default": "high"})
    assert code == 200 and fx.stored("fx_echo").origin != "api", body  # the same policy
    code, body = fx.call("PUT", f"/tools/{tool}", {"policy": {"max_rows": 5}})
    assert (code, fx.stored("fx_echo").origin) == (200, "api"), body


def test_an_operators_later_change_of_an_imported_tool_still_wins(
        fx: Setup, tmp_path: Path) -> None:
    from toolkeeper.config.apply import apply_file

    tool = fx.tool_id("fx_echo")
    assert fx.call("PUT", f"/tools/{tool}", {"risk_default": "critical"})[0] == 200
    assert fx.call("POST", f"/tools/{tool}/version?new_version=1.1.0")[0] == 200
    cfg = tmp_path / "toolkeeper.yaml"
    doc = yaml.safe_load(cfg.read_text())
    doc["servers"][0]["tools"]["echo"]["risk"] = "medium"
    cfg.write_text(yaml.safe_dump(doc))
    apply_file(fx.gw, cfg)
    fx.gw.sync_servers()
    after = fx.stored("fx_echo")
    assert (after.risk_default, after.version, after.status) == ("medium", "1.1.1", "published")
