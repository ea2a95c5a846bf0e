"""The approvals inbox tells a person what they decide (issue 33 items 8 and 9): a card says
in words who asks to run what with which arguments and what it waits for; the header's count
follows the list after a decision; the words after approving say how the agent gets it run;
and a refused token leaves nothing of the previous person's views on screen."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.support.serve import Server
from tests.ui.conftest import ConsolePage


def _login(page: Page, server: Server, who: str) -> None:
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens[who])
    page.get_by_role("button", name="Use token").click()


def _pay(server: Server, invoice: str, ledger: Path) -> dict[str, Any]:
    body = {"tool": "pay", "arguments": {"invoice": invoice, "path": str(ledger)}}
    resp = httpx.post(server.url + "/tools/execute", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {server.tokens['agent']}"})
    result: dict[str, Any] = resp.json()
    assert result["status"] == "approval_required", result
    return result


def _pending(server: Server) -> int:
    resp = httpx.get(server.url + "/approvals?status=pending&limit=1000", timeout=30,
                     headers={"Authorization": f"Bearer {server.tokens['approver']}"})
    return len(resp.json())


def test_a_card_says_who_asks_for_what_and_what_it_waits_for_in_words(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    asked = _pay(server, "inv-words", tmp_path / "ledger.txt")
    page = console_page.page
    _login(page, server, "approver")
    card = page.locator(f'article.approval[data-id="{asked["approval_id"]}"]')
    expect(card.locator("p.asks")).to_have_text(re.compile(
        r"^pay-bot asks to run pay with invoice inv-words, path /\S+\. "
        r"It needs a person's approval \(high risk\)\.$"))
    expect(card).to_contain_text("a person's approval (gate approve)")
    # the default summary only repeated the tool and action: not shown as if it said more
    expect(card.locator("dt", has_text="summary")).to_have_count(0)
    expect(card).not_to_contain_text("pay.run")


def test_after_approve_the_header_count_follows_the_list_and_says_how_it_runs(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    asked = _pay(server, "inv-count", tmp_path / "ledger.txt")
    before = _pending(server)
    page = console_page.page
    _login(page, server, "approver")
    expect(page.locator("#status")).to_have_text(f"{before} pending")
    card = page.locator(f'article.approval[data-id="{asked["approval_id"]}"]')
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card).to_have_count(0)
    expect(page.locator("#status")).to_have_text(f"{before - 1} pending")
    assert page.locator("article.approval").count() == min(before - 1, 20)
    said = page.locator("#approval-result")
    expect(said).to_contain_text("the agent runs it by sending the same call again")
    expect(said).to_contain_text(f"from the call itself, or by approval_id {asked['approval_id']}")


def test_an_agent_token_after_an_admin_session_clears_every_admin_view(
        console_page: ConsolePage, server: Server) -> None:
    page = console_page.page
    _login(page, server, "admin")
    page.locator("#tabs").get_by_role("button", name="Access").click()
    rows = page.locator("#token-table tbody tr")
    expect(rows.first).to_be_visible()
    expect(page.get_by_role("button", name="Revoke…").first).to_be_visible()
    page.get_by_label("token").fill(server.tokens["agent"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile("token refused"))
    expect(rows).to_have_count(0)
    expect(page.get_by_role("button", name="Revoke…")).to_have_count(0)
    expect(page.locator("#token-area")).to_be_hidden()
    expect(page.locator("main section:visible")).to_have_count(0)
    expect(page.locator("article.approval")).to_have_count(0)
