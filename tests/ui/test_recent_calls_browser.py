"""Every recent call in the console's Calls view (issue 15 item 6), in a real Chromium against
the shared ``toolkeeper serve``: a gated and a denied call are listed with their status and
reason above the recorded outcomes (which show neither), filtered by status, and paged."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.support.serve import Server
from tests.ui.conftest import ConsolePage


def _execute(server: Server, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    resp = httpx.post(server.url + "/tools/execute", timeout=30,
                      json={"tool": tool, "arguments": arguments},
                      headers={"Authorization": f"Bearer {server.tokens['agent']}"})
    body: dict[str, Any] = resp.json()
    return body["error"]["details"] if "error" in body else body


def _open_calls(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))
    page.get_by_role("button", name="Calls", exact=True).click()


def test_denied_and_gated_calls_are_listed_with_their_reason(
        console_page: ConsolePage, server: Server) -> None:
    gated = _execute(server, "pay", {"invoice": "inv-recent", "path": "/nonexistent/ledger"})
    denied = _execute(server, "no_such_tool", {})
    assert (gated["status"], denied["status"]) == ("approval_required", "denied"), (gated, denied)
    page = console_page.page
    _open_calls(page, server)
    gated_row = page.locator(f'#recent-table tr[data-call-id="{gated["call_id"]}"]')
    expect(gated_row).to_contain_text("pay-bot")
    expect(gated_row).to_contain_text("approval_required · approval_required")
    denied_row = page.locator(f'#recent-table tr[data-call-id="{denied["call_id"]}"]')
    expect(denied_row).to_contain_text("no_such_tool")
    expect(denied_row).to_contain_text(f"denied · {denied['reason']}")
    expect(page.locator(f'#call-table tr[data-call-id="{denied["call_id"]}"]')).to_have_count(0)
    page.get_by_label("Recent by status").select_option("denied")
    expect(gated_row).to_have_count(0)
    expect(denied_row).to_be_visible()
    assert console_page.console.errors == []


def test_recent_calls_are_paged_newest_first(console_page: ConsolePage, server: Server) -> None:
    ids = [_execute(server, "no_such_tool", {"n": n})["call_id"] for n in range(21)]
    page = console_page.page
    _open_calls(page, server)
    newest = page.locator(f'#recent-table tr[data-call-id="{ids[-1]}"]')
    expect(newest).to_be_visible()
    expect(page.locator("#recent-table tbody tr")).to_have_count(20)
    older = page.get_by_role("button", name="Older")
    expect(page.get_by_role("button", name="Newer")).to_be_disabled()
    older.click()
    expect(page.locator("#recent-page")).to_have_text(re.compile(r"^page 2 · "))
    expect(newest).to_have_count(0)
    expect(page.locator(f'#recent-table tr[data-call-id="{ids[0]}"]')).to_be_visible()
    page.get_by_role("button", name="Newer").click()
    expect(newest).to_be_visible()
    assert console_page.console.errors == []
