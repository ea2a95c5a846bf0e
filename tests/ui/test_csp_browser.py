"""The console keeps its strict CSP and never renders data as markup (issue 11 item 6), in a
real Chromium against a real ``toolkeeper serve``: a tool's description, a profile's
description, a token's label and an agent's call arguments all carry HTML that would run
script if parsed; on every tab (with the tool drawer, the profile editor and an approval's
edit form open) the markup shows as text, no element is made from it, nothing runs, and the
browser reports no CSP violation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import CONFIG, ConsolePage

HOSTILE = "<img src=x onerror=window.__pwned=1><script>window.__pwned=2</script><b>bold</b>"
WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
"""
MADE = "document.querySelectorAll('main img, main script, main b').length"


def _rest(server: Server, who: str, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens[who]}"})
    assert resp.status_code < 400, resp.text
    return resp.json()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "agent": TokenSpec("agent", "pay-bot")}
    work = tmp_path_factory.mktemp("ui-csp")
    with serving_toolkeeper(work, CONFIG, tokens) as srv:
        made = _rest(srv, "admin", "POST", "/tools", json={
            "name": "evil_tool", "description": HOSTILE, "implementation_type": "http",
            "side_effect": "pure", "risk_default": "low",
            "input_schema": {"type": "object", "properties": {
                "q": {"type": "string", "description": HOSTILE}}},
            "implementation_config": {"url": "https://example.com/x", "method": "GET"}})
        _rest(srv, "admin", "POST", f"/tools/{made['id']}/publish")
        _rest(srv, "admin", "POST", "/profiles", json={"name": "evil", "autonomy": 1,
                                                        "description": HOSTILE})
        _rest(srv, "admin", "POST", "/tokens", json={"role": "approver", "label": HOSTILE})
        asked = _rest(srv, "agent", "POST", "/tools/execute", json={
            "tool": "pay", "arguments": {"invoice": HOSTILE, "path": str(work / "ledger")}})
        assert asked["status"] == "approval_required", asked
        yield srv


def _tab(page: Page, name: str) -> None:
    page.get_by_role("button", name=name, exact=True).click()
    expect(page.locator("#status")).not_to_have_text(re.compile("loading|error"))


def _inert(page: Page, where: str) -> None:
    assert page.evaluate(MADE) == 0, f"markup from data became elements ({where})"
    assert page.evaluate("window.__pwned") is None, f"data ran as script ({where})"
    assert page.evaluate("window.__csp") == [], where


def test_markup_in_data_is_shown_as_text_on_every_tab_under_the_csp(
        console_page: ConsolePage, hostile: Server) -> None:
    page = console_page.page
    page.add_init_script(WATCH)
    page.goto(hostile.url + "/ui/#approvals")
    page.get_by_label("token").fill(hostile.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    card = page.locator("article.approval").first
    expect(card).to_contain_text(HOSTILE)
    card.get_by_role("button", name="Approve with edits…").click()
    expect(card.get_by_label("invoice (required)")).to_have_value(HOSTILE)
    _inert(page, "approvals, edit form open")

    _tab(page, "Tools")
    page.locator("#tools tbody tr[data-tool=evil_tool] button.link").click()
    drawer = page.locator("#drawer-body")
    expect(drawer.locator("dd", has_text="window.__pwned=1")).to_have_text(HOSTILE)
    expect(drawer.locator("table.schema")).to_contain_text(HOSTILE)
    _inert(page, "tools, drawer open")
    page.keyboard.press("Escape")

    for tab in ("Overview", "Calls", "Audit"):
        _tab(page, tab)
        if tab == "Overview":  # its charts, drawn by Chartist, under the CSP too
            page.locator("#ov-calls .ct-bar").first.wait_for(state="attached")
        _inert(page, tab)

    _tab(page, "Agents")
    row = page.locator('#profile-table tr[data-profile="evil"]')
    row.get_by_role("button", name="Edit").click()
    expect(page.locator("#edit-description")).to_have_value(HOSTILE)
    expect(page.locator("#picker-groups")).to_contain_text("evil_tool")
    _inert(page, "agents, profile editor open")

    _tab(page, "Access")
    expect(page.locator("#token-table tbody")).to_contain_text(HOSTILE)
    page.locator("#tier-agent").select_option("pay-bot")
    expect(page.locator("#unavailable-table tbody")).to_contain_text("evil_tool")
    _inert(page, "access, tokens and tiers")
    assert console_page.console.errors == []


def test_the_console_is_served_with_a_csp_that_refuses_inline_script(
        console_page: ConsolePage, hostile: Server, tmp_path: Path) -> None:
    """The CSP is really enforced: a script the page itself tried to add inline is
    blocked and reported, as an injected one would be."""
    page = console_page.page
    page.add_init_script(WATCH)
    response = page.goto(hostile.url + "/ui/")
    assert response is not None
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    page.evaluate("""() => { const s = document.createElement("script");
        s.textContent = "window.__pwned = 3"; document.head.appendChild(s); }""")
    page.wait_for_function("window.__csp.length > 0", timeout=5_000)
    assert page.evaluate("window.__pwned") is None
    assert any("script-src" in v for v in page.evaluate("window.__csp"))
    console_page.console.errors.clear()  # the blocked script's own report
