"""The approvals inbox's exact call and its schema-built edit form (issue 11 item 4), in a
real Chromium against a real ``toolkeeper serve``: the tool's preview and the expiry are
shown; an edit through the form built from the action's input schema shows what changed,
is approved and the call runs once with the edited arguments; an edit the API refuses
shows the API's reason and decides nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

GATED = """\
version: 1
tools:
  - native: tests.api.exec_fixtures:Bank
  - native: tests.api.exec_fixtures:Email
profiles:
  - {name: manual, autonomy: 0, scopes: [bank], activations: [{tool: bank}, {tool: email}]}
agents:
  - {name: intern, profile: manual}
"""
"""At autonomy 0 ``bank.pay`` (high) waits for an approver and ``email.send`` (medium, with
a preview) for a confirmation."""


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"approver": TokenSpec("approver"), "agent": TokenSpec("agent", "intern")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-gated"), GATED, tokens) as srv:
        yield srv


def _call(server: Server, tool: str, action: str, args: dict[str, Any],
          **fields: Any) -> dict[str, Any]:
    body = {"tool": tool, "action": action, "arguments": args, **fields}
    resp = httpx.post(server.url + "/tools/execute", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {server.tokens['agent']}"})
    result: dict[str, Any] = resp.json()
    return result


def _inbox(page: Page, server: Server, approval_id: str) -> Any:
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens["approver"])
    page.get_by_role("button", name="Use token").click()
    return page.locator(f'article.approval[data-id="{approval_id}"]')


def test_the_preview_and_the_expiry_are_shown(console_page: ConsolePage,
                                              gated: Server) -> None:
    asked = _call(gated, "email", "send", {"to": "ann@example.com"})
    assert asked["status"] == "confirmation_required", asked
    card = _inbox(console_page.page, gated, asked["approval_id"])
    expect(card.locator("dd", has_text="email to ann@example.com")).to_be_visible()
    expect(card.locator("dt", has_text="expires")).to_be_visible()
    expires = card.locator("dt:text-is('expires') + dd time")  # relative, exact on hover
    expect(expires).to_have_text(re.compile(r"^in \d+ hours \(.*\d.*\)$"))
    expect(expires).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    assert console_page.console.errors == []


def test_an_edit_through_the_schema_form_shows_the_change_and_runs_once(
        console_page: ConsolePage, gated: Server) -> None:
    asked = _call(gated, "bank", "pay", {"invoice": "inv-1", "amount": 120})
    assert asked["status"] == "approval_required", asked
    page = console_page.page
    card = _inbox(page, gated, asked["approval_id"])
    card.get_by_role("button", name="Approve with edits…").click()
    amount = card.get_by_label("amount (required)")
    expect(amount).to_have_attribute("type", "number")
    expect(card.get_by_label("invoice (required)")).to_have_value("inv-1")
    expect(card.locator(".diff")).to_have_text("no change")
    amount.fill("100")
    expect(card.locator(".diff")).to_have_text("changed:\namount: 120 → 100")
    card.get_by_role("button", name="Approve edited arguments").click()
    expect(page.locator("#approval-result")).to_contain_text("approved — status approved")
    expect(page.locator("#approval-result")).to_contain_text("arguments edited")
    edited = {"invoice": "inv-1", "amount": 100}
    ran = _call(gated, "bank", "pay", edited, approval_id=asked["approval_id"])
    assert ran["status"] == "succeeded" and ran["output"]["amount"] == 100, ran
    again = _call(gated, "bank", "pay", edited, approval_id=asked["approval_id"])
    assert again["status"] != "succeeded", again  # the approval ran the call once
    assert console_page.console.errors == []


def test_an_edit_the_api_refuses_shows_its_reason_and_decides_nothing(
        console_page: ConsolePage, gated: Server) -> None:
    asked = _call(gated, "bank", "pay", {"invoice": "inv-2", "amount": 5})
    page = console_page.page
    card = _inbox(page, gated, asked["approval_id"])
    card.get_by_role("button", name="Approve with edits…").click()
    card.get_by_label("invoice (required)").fill("")
    expect(card.locator(".diff")).to_have_text('changed:\ninvoice: "inv-2" → (removed)')
    card.get_by_role("button", name="Approve edited arguments").click()
    result = page.locator("#approval-result")
    expect(result).to_contain_text("invalid_arguments")
    expect(result).to_contain_text('"invoice" is a required property')
    still = httpx.get(f"{gated.url}/approvals/{asked['approval_id']}", timeout=30,
                      headers={"Authorization": f"Bearer {gated.tokens['approver']}"})
    assert still.json()["status"] == "pending"
    console_page.console.errors.remove(
        f"422 POST {gated.url}/approvals/{asked['approval_id']}/approve")
    assert all("422" in e for e in console_page.console.errors), console_page.console.errors
