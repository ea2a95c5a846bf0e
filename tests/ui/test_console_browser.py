"""The admin console rendered in a real Chromium against a real ``toolkeeper serve``: it
loads cleanly under its CSP, refuses agent tokens (GET /me says so), and an approver
decides a gated call in the approvals inbox."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.support.serve import Server
from tests.ui.conftest import ConsolePage

CSP_WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
"""


def _login(page: Page, server: Server, who: str) -> None:
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens[who])
    page.get_by_role("button", name="Use token").click()


def _pay(server: Server, invoice: str, ledger: Path, **fields: Any) -> dict[str, Any]:
    """The agent's call of the gated ``pay`` through REST."""
    body = {"tool": "pay", "arguments": {"invoice": invoice, "path": str(ledger)}, **fields}
    resp = httpx.post(server.url + "/tools/execute", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {server.tokens['agent']}"})
    result: dict[str, Any] = resp.json()
    return result


def _card(page: Page, approval_id: str) -> Any:
    return page.locator(f'article.approval[data-id="{approval_id}"]')


def test_the_page_loads_without_console_errors_or_csp_violations(
        console_page: ConsolePage, server: Server) -> None:
    page = console_page.page
    page.add_init_script(CSP_WATCH)
    _login(page, server, "admin")
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))
    for tab in ("Tools", "Calls", "Audit", "Approvals"):
        page.get_by_role("button", name=tab, exact=True).click()
        expect(page.locator("#status")).not_to_have_text(re.compile("loading|error"))
    assert page.evaluate("window.__csp") == []
    assert console_page.console.errors == []


def test_an_agent_token_is_refused_with_the_api_reason(
        console_page: ConsolePage, server: Server) -> None:
    page = console_page.page
    _login(page, server, "agent")
    expect(page.locator("#status")).to_have_text(
        re.compile(r"token refused: the console is for people"))
    assert page.evaluate("sessionStorage.length") == 0  # the token is not kept


def test_an_approver_approves_in_the_inbox_and_the_call_runs_once(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    asked = _pay(server, "inv-approve", ledger)
    assert asked["status"] == "approval_required", asked
    page = console_page.page
    _login(page, server, "approver")
    card = _card(page, asked["approval_id"])
    for text in ("pay-bot", "pay", "inv-approve", "high", "approve"):
        expect(card).to_contain_text(text)
    expect(card.get_by_role("button", name="Deny…")).to_be_visible()
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#approval-result")).to_contain_text("approved — status approved")
    expect(card).to_have_count(0)
    ran = _pay(server, "inv-approve", ledger, approval_id=asked["approval_id"])
    assert ran["status"] == "succeeded", ran
    again = _pay(server, "inv-approve", ledger, approval_id=asked["approval_id"])
    assert again["status"] != "succeeded" or again.get("replayed"), again
    assert ledger.read_text().splitlines() == ["inv-approve"]  # executed exactly once
    page.get_by_role("button", name="Audit", exact=True).click()
    page.get_by_role("button", name="Verify the hash chain").click()
    expect(page.locator("#verify-result")).to_have_text(re.compile(r"^intact: \d+ events"))
    assert console_page.console.errors == []


def test_deny_with_a_note_shows_the_result_and_the_call_never_runs(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    asked = _pay(server, "inv-deny", ledger)
    page = console_page.page
    _login(page, server, "approver")
    card = _card(page, asked["approval_id"])
    card.get_by_role("button", name="Deny…").click()
    card.get_by_label("note").fill("not this month")
    card.get_by_role("button", name="Deny with this note").click()
    expect(page.locator("#approval-result")).to_contain_text(
        "denied — status denied, note: not this month")
    expect(card).to_have_count(0)
    refused = _pay(server, "inv-deny", ledger, approval_id=asked["approval_id"])
    assert refused["status"] != "succeeded", refused
    assert not ledger.exists()
    assert console_page.console.errors == []


def test_approve_with_edited_arguments_shows_the_change_and_binds_them(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    asked = _pay(server, "inv-old", ledger)
    page = console_page.page
    _login(page, server, "approver")
    card = _card(page, asked["approval_id"])
    card.get_by_role("button", name="Approve with edits…").click()
    edit = card.get_by_label("invoice (required)")  # the form is built from pay's schema
    send = card.get_by_role("button", name="Approve edited arguments")
    expect(card.get_by_label("path (required)")).to_have_value(str(ledger))
    expect(card.locator(".diff")).to_have_text("no change")
    edit.fill("inv-new")
    expect(card.locator(".diff")).to_have_text('changed:\ninvoice: "inv-old" → "inv-new"')
    send.click()
    expect(page.locator("#approval-result")).to_contain_text("approved — status approved")
    expect(page.locator("#approval-result")).to_contain_text("arguments edited")
    stale = _pay(server, "inv-old", ledger, approval_id=asked["approval_id"])
    assert stale["status"] != "succeeded", stale  # bound to the edited arguments
    ran = _pay(server, "inv-new", ledger, approval_id=asked["approval_id"])
    assert ran["status"] == "succeeded", ran
    assert ledger.read_text().splitlines() == ["inv-new"]
    assert console_page.console.errors == []


def test_the_inbox_fits_a_390_px_wide_screen(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    asked = _pay(server, "inv-narrow-" + "x" * 80, tmp_path / "ledger.txt")
    page = console_page.page
    page.set_viewport_size({"width": 390, "height": 800})
    _login(page, server, "approver")
    expect(_card(page, asked["approval_id"])).to_be_visible()
    for tab in ("Approvals", "Tools", "Calls", "Audit"):
        page.get_by_role("button", name=tab, exact=True).click()
        expect(page.locator("#status")).not_to_have_text(re.compile("loading"))
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], (tab, width)


def test_the_inbox_shows_a_new_pending_approval_without_a_reload(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    page = console_page.page
    _login(page, server, "approver")
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))
    asked = _pay(server, "inv-later", tmp_path / "ledger.txt")
    expect(_card(page, asked["approval_id"])).to_be_visible()  # polled, bounded (3 s)
