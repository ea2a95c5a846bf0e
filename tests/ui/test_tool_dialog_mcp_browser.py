"""The tool dialog's MCP wiring (issue 11 item 2), in a real Chromium against a real
``toolkeeper serve`` with an upstream MCP server configured. Tools defined through the API
never reach an upstream server (its servers and credentials are the operator's: the API
refuses to publish one, ``provider_unavailable``), so a new tool cannot pick the MCP type and
the dialog says why. An imported tool is edited for its governance: its server and upstream
tool show read-only (configured in toolkeeper.yaml), the edit keeps it the operator's, it
publishes, and the agent's next call meets the new gate. A tool of that type the API holds
shows its own server and upstream tool in the dialog."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

FIXTURE = Path(__file__).resolve().parents[1] / "mcp" / "upstream_fixture.py"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    config = {"version": 1, "servers": [{
        "name": "fx", "tenant": "default", "include": ["echo", "pid"],
        "command": [sys.executable, str(FIXTURE), "stdio"],
        "tools": {"echo": {"side_effect": "pure", "risk": "low"}}}],
        "profiles": [{"name": "p", "activations": [{"tool": "fx_echo"}]}],
        "agents": [{"name": "a", "profile": "p"}]}
    tokens = {"admin": TokenSpec("admin"), "agent": TokenSpec("agent", "a")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-mcp-dialog"), json.dumps(config),
                            tokens) as srv:
        yield srv


def _rest(server: Server, method: str, path: str, who: str = "admin",
          **kw: Any) -> httpx.Response:
    return httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens[who]}"})


def _echo(server: Server) -> str:
    resp = _rest(server, "POST", "/tools/execute", "agent",
                 json={"tool": "fx_echo", "arguments": {"text": "hi"}})
    assert resp.status_code in (200, 202), resp.text
    status: str = resp.json()["status"]
    return status


def _tools(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/#tools")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ of \d+ tools$"))


def _new_mcp_tool(server: Server, name: str, upstream_tool: str) -> httpx.Response:
    return _rest(server, "POST", "/tools", json={
        "name": name, "implementation_type": "mcp",
        "implementation_config": {"server": "fx", "tool": upstream_tool}})


def test_a_new_tool_cannot_pick_the_mcp_type_the_api_would_not_publish(
        console_page: ConsolePage, upstream: Server) -> None:
    draft = _new_mcp_tool(upstream, "fx_again", "echo")
    assert draft.status_code == 201, draft.text
    refused = _rest(upstream, "POST", f"/tools/{draft.json()['id']}/publish")
    assert (refused.status_code, refused.json()["error"]["reason"]) == (
        422, "provider_unavailable"), refused.text
    page = console_page.page
    _tools(page, upstream)
    page.get_by_role("button", name="New tool").click()
    for kind in ("mcp", "artifact"):
        expect(page.locator(f"#te-type option[value={kind}]")).to_be_disabled()
    expect(page.locator("#te-type option:not([disabled])")).to_have_count(4)
    expect(page.locator("#te-type-hint")).to_be_visible()
    expect(page.locator("#te-type-hint")).to_contain_text("configured by the operator")
    assert console_page.console.errors == []


def test_an_imported_tools_governance_is_edited_and_its_next_call_meets_the_new_gate(
        console_page: ConsolePage, upstream: Server) -> None:
    assert _echo(upstream) == "succeeded"  # low risk, pure: no gate
    page = console_page.page
    _tools(page, upstream)
    page.locator("#tools tbody tr[data-tool=fx_echo] button.link").click()
    drawer = page.locator("#tool-drawer")
    expect(drawer).to_contain_text("Wired by the operator")
    drawer.get_by_role("button", name="Edit").click()
    dialog = page.locator("#tool-dialog")
    expect(dialog.locator("#te-type")).to_have_value("mcp")
    expect(dialog.locator("#te-type")).to_be_disabled()
    for label, value in (("Server", "fx"), ("Upstream tool", "echo")):
        expect(dialog.get_by_label(label)).to_have_value(value)
        expect(dialog.get_by_label(label)).to_be_disabled()
    expect(dialog.locator("#te-type-hint")).to_be_hidden()
    expect(dialog.locator("fieldset[data-kind=mcp] .te-operator")).to_contain_text(
        "configured in toolkeeper.yaml")
    dialog.get_by_label("Risk").select_option("critical")
    dialog.get_by_label("Side effect").select_option("irreversible")
    dialog.get_by_role("button", name="Save draft").click()
    expect(dialog.locator("#tooledit-result")).to_have_text(re.compile(r"^Saved fx_echo "))
    dialog.get_by_label("New version").fill("1.1.0")
    dialog.get_by_role("button", name="Make version").click()
    expect(dialog.locator("#tooledit-result")).to_have_text("Version 1.1.0 of fx_echo published")
    stored = next(t for t in _rest(upstream, "GET", "/tools").json() if t["name"] == "fx_echo")
    assert (stored["origin"], stored["status"], stored["risk_default"]) == (
        "config", "published", "critical")
    assert stored["config_schema"]["implementation"]["tool"] == "echo"
    assert _echo(upstream) == "approval_required"  # the new governance, on the next call
    assert console_page.console.errors == []


def test_an_mcp_tool_the_api_holds_shows_its_own_server_and_upstream_tool(
        console_page: ConsolePage, upstream: Server) -> None:
    assert _new_mcp_tool(upstream, "fx_pid_draft", "pid").status_code == 201
    page = console_page.page
    _tools(page, upstream)
    page.locator("#tools tbody tr[data-tool=fx_pid_draft] button.link").click()
    page.locator("#tool-drawer").get_by_role("button", name="Edit").click()
    dialog = page.locator("#tool-dialog")
    expect(dialog.locator("#te-type")).to_have_value("mcp")
    expect(dialog.get_by_label("Server")).to_have_value("fx")
    expect(dialog.get_by_label("Upstream tool").locator("option")).to_have_text(["echo", "pid"])
    expect(dialog.get_by_label("Upstream tool")).to_have_value("pid")
    assert console_page.console.errors == []
