"""The tool dialog's MCP wiring (issue 11 item 2), in a real Chromium against a real
``toolkeeper serve`` with an upstream MCP server configured. Tools defined through the API
never reach an upstream server (its servers and credentials are the operator's: the API
refuses to publish one, ``provider_unavailable``), so a new tool cannot pick the MCP type,
and an imported tool has no Edit (an edit would make it the tenant's, never published
again) but says where it is configured; a tool of that type the API holds shows its own
server and upstream tool in the dialog."""

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
    assert console_page.console.errors == []


def test_an_imported_tool_has_no_edit_and_says_where_it_is_configured(
        console_page: ConsolePage, upstream: Server) -> None:
    page = console_page.page
    _tools(page, upstream)
    page.locator("#tools tbody tr[data-tool=fx_pid] button.link").click()
    drawer = page.locator("#tool-drawer")
    expect(drawer.locator("table.versions")).to_be_visible()
    expect(drawer.get_by_role("button", name="Edit")).to_have_count(0)
    expect(drawer).to_contain_text("Wired by the operator")
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
