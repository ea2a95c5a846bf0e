"""The admin console's quality bar in a real Chromium (issue 11 item 6): no serious or
critical axe-core violation on any tab at 1280 and at 390 px wide, no sideways page scroll
at 390 px, every form control named, and the console usable by keyboard alone (tabs, the
registry drawer with its focus trap). New tabs are scanned with ``tests.ui.a11y``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server
from tests.ui import a11y
from tests.ui.a11y import assert_accessible, axe_source, horizontal_overflow
from tests.ui.conftest import ConsolePage

TABS = ("Approvals", "Tools", "Calls", "Audit")
UNNAMED = """() => { axe.setup(document); try {
  return [...document.querySelectorAll("input, select, textarea, button")]
  .filter((e) => e.type !== "hidden" && e.checkVisibility())  // shown (not in a closed dialog)
  .filter((e) => !axe.commons.text.accessibleText(e).trim())
  .map((e) => e.outerHTML.slice(0, 120)); } finally { axe.teardown(); } }"""


def _pay(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = httpx.post(
        server.url + "/tools/execute", json=body, timeout=30,
        headers={"Authorization": f"Bearer {server.tokens['agent']}"}).json()
    return result


@pytest.fixture
def pending(server: Server, tmp_path: Path) -> Iterator[str]:
    """One pending approval (the agent's gated ``pay``), denied again afterwards, after one
    approved call that ran (a row in the calls list)."""
    body = {"tool": "pay", "arguments": {"invoice": "inv-ran", "path": str(tmp_path / "l")}}
    ran = _pay(server, body)
    httpx.post(f"{server.url}/approvals/{ran['approval_id']}/approve", json={},
               headers={"Authorization": f"Bearer {server.tokens['approver']}"}, timeout=30)
    assert _pay(server, {**body, "approval_id": ran["approval_id"]})["status"] == "succeeded"
    asked = _pay(server, {**body, "arguments": {**body["arguments"], "invoice": "inv-a11y"}})
    assert asked["status"] == "approval_required", asked
    yield asked["approval_id"]
    httpx.post(f"{server.url}/approvals/{asked['approval_id']}/deny", json={"note": "a11y"},
               headers={"Authorization": f"Bearer {server.tokens['approver']}"}, timeout=30)


def _login(page: Page, server: Server) -> None:
    axe_source()  # skips (fails under CI=true) before any work when axe-core is missing
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))


def _tab(page: Page, name: str) -> None:
    page.get_by_role("button", name=name, exact=True).click()
    expect(page.locator("#status")).not_to_have_text(re.compile("loading|error"))


def _scan_every_tab(page: Page, width: int, approval_id: str) -> None:
    expect(page.locator(f'article.approval[data-id="{approval_id}"]')).to_be_visible()
    assert_accessible(page, f"approvals, one pending, {width} px")
    _tab(page, "Tools")
    page.locator("#tools tbody tr[data-tool=pay] button.link").click()
    expect(page.locator("#tool-drawer table.versions")).to_be_visible()
    assert_accessible(page, f"tools, drawer open, {width} px")
    page.keyboard.press("Escape")
    assert_accessible(page, f"tools, {width} px")
    _tab(page, "Calls")
    expect(page.locator("#call-table tbody tr").first).to_be_visible()
    assert_accessible(page, f"calls, {width} px")
    _tab(page, "Audit")
    expect(page.locator("#audit-table tbody tr").first).to_be_visible()
    assert_accessible(page, f"audit with rows, {width} px")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
def test_every_tab_has_no_serious_accessibility_violation(
        console_page: ConsolePage, server: Server, pending: str, width: int, scheme: str) -> None:
    page = console_page.page
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]  # dark mode follows the system
    _login(page, server)
    _scan_every_tab(page, width, pending)
    assert console_page.console.errors == []


def test_no_tab_scrolls_sideways_at_390_px(
        console_page: ConsolePage, server: Server, pending: str) -> None:
    page = console_page.page
    page.set_viewport_size({"width": 390, "height": 800})
    _login(page, server)
    for tab in TABS:
        _tab(page, tab)
        assert horizontal_overflow(page) == 0, tab
    _tab(page, "Tools")
    page.locator("#tools tbody tr[data-tool=pay] button.link").click()
    expect(page.locator("#tool-drawer table.versions")).to_be_visible()
    assert horizontal_overflow(page) == 0, "tools drawer"


def test_every_form_control_has_an_accessible_name(
        console_page: ConsolePage, server: Server, pending: str) -> None:
    page = console_page.page
    _login(page, server)
    page.evaluate(axe_source() + "\n;undefined")
    card = page.locator(f'article.approval[data-id="{pending}"]')
    card.get_by_role("button", name="Deny…").click()  # the note form
    card.get_by_role("button", name="Approve with edits…").click()  # the arguments editor
    assert page.evaluate(UNNAMED) == [], "approvals"
    for tab in TABS[1:]:
        _tab(page, tab)
        assert page.evaluate(UNNAMED) == [], tab


def _focused(page: Page) -> str:
    text: str = page.evaluate(
        "document.activeElement.id || document.activeElement.textContent.trim().slice(0, 40)")
    return text


def test_tab_reaches_the_tab_buttons_and_enter_or_space_activates_them(
        console_page: ConsolePage, server: Server) -> None:
    page = console_page.page
    _login(page, server)
    page.locator("header h1").click()  # where sequential focus navigation starts
    page.keyboard.press("Tab")
    assert _focused(page) == "Overview"
    page.keyboard.press("Tab")
    assert _focused(page) == "Approvals"
    page.keyboard.press("Tab")
    assert _focused(page) == "Tools"
    page.keyboard.press("Enter")
    expect(page.locator("#tools")).to_be_visible()
    page.keyboard.press("Tab")
    assert _focused(page) == "Calls"
    page.keyboard.press("Space")
    expect(page.locator("#calls")).to_be_visible()
    expect(page.locator("#tools")).to_be_hidden()
    expect(page.get_by_role("button", name="Calls", exact=True)).to_have_attribute(
        "aria-current", "page")


def test_the_drawer_opens_by_keyboard_traps_focus_and_returns_it(
        console_page: ConsolePage, server: Server) -> None:
    page = console_page.page
    _login(page, server)
    _tab(page, "Tools")
    opener = page.locator("#tools tbody tr[data-tool=pay] button.link")
    opener.focus()
    page.keyboard.press("Enter")
    drawer = page.locator("#tool-drawer")
    expect(drawer).to_be_visible()
    expect(page.locator("#tool-drawer table.versions")).to_be_visible()
    inside = "document.getElementById('tool-drawer').contains(document.activeElement)"
    assert page.evaluate(inside)
    for _ in range(6):  # forwards past the last control, then backwards past the first
        page.keyboard.press("Tab")
        assert page.evaluate(inside), _focused(page)
    for _ in range(8):
        page.keyboard.press("Shift+Tab")
        assert page.evaluate(inside), _focused(page)
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(opener).to_be_focused()


def test_a_missing_axe_core_skips_loudly_and_fails_under_ci(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(a11y, "AXE", tmp_path / "axe.min.js")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"NO AXE-CORE.*make peers"):
        a11y.axe_source()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="NO AXE-CORE"):
        a11y.axe_source()
