"""The tool dialog's MCP wiring (issue 11 item 2), in a real Chromium against a real
``toolkeeper serve`` with an upstream MCP server configured. Tools defined through the API
never reach an upstream server (its servers and credentials are the operator's: the API
refuses to publish one, ``provider_unavailable``), so a new tool cannot pick the MCP type;
an imported tool's Edit shows its configured server and upstream tool, and its governance
fields are edited and stored with its wiring kept."""

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
        "command": [sys.executable, str(FIXTURE), "stdio"]}]}
    tokens = {"admin": TokenSpec("admin")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-mcp-dialog"), json.dumps(config),
                            tokens) as srv:
        yield srv


def _rest(server: Server, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens['admin']}"})


def _tool(server: Server, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in _rest(server, "GET", "/tools").json()
                                 if t["name"] == name)
    return found


def _tools(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/#tools")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ of \d+ tools$"))


def test_a_new_tool_cannot_pick_the_mcp_type_the_api_would_not_publish(
        console_page: ConsolePage, upstream: Server) -> None:
    draft = _rest(upstream, "POST", "/tools", json={
        "name": "fx_again", "implementation_type": "mcp",
        "implementation_config": {"server": "fx", "tool": "echo"}})
    assert draft.status_code == 201, draft.text
    refused = _rest(upstream, "POST", f"/tools/{draft.json()['id']}/publish")
    assert (refused.status_code, refused.json()["error"]["reason"]) == (
        422, "provider_unavailable"), refused.text
    page = console_page.page
    _tools(page, upstream)
    page.get_by_role("button", name="New tool").click()
    kinds = page.locator("#te-type option")
    expect(kinds.and_(page.locator("[value=mcp]"))).to_be_disabled()
    expect(page.locator("#te-type option:not([disabled])")).to_have_count(5)
    assert console_page.console.errors == []


def test_an_imported_tool_shows_its_server_and_upstream_tool_and_keeps_them(
        console_page: ConsolePage, upstream: Server) -> None:
    before = _tool(upstream, "fx_pid")
    page = console_page.page
    _tools(page, upstream)
    page.locator("#tools tbody tr[data-tool=fx_pid] button.link").click()
    page.locator("#tool-drawer").get_by_role("button", name="Edit").click()
    dialog = page.locator("#tool-dialog")
    expect(dialog.locator("#te-type")).to_have_value("mcp")
    expect(dialog.get_by_label("Server")).to_have_value("fx")
    expect(dialog.get_by_label("Upstream tool").locator("option")).to_have_text(["echo", "pid"])
    expect(dialog.get_by_label("Upstream tool")).to_have_value("pid")
    dialog.get_by_label("Risk").select_option("high")
    dialog.get_by_label("Scopes").fill("ops:read")
    dialog.get_by_label("Requires confirmation").check()
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator("#tooledit-result")).to_have_text(re.compile(r"^Saved fx_pid "))
    after = _tool(upstream, "fx_pid")
    assert (after["risk_default"], after["scopes_required"], after["requires_confirmation"]) \
        == ("high", ["ops:read"], True)
    assert after["config_schema"]["implementation"] == before["config_schema"]["implementation"]
    assert console_page.console.errors == []
