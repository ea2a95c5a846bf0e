"""Calls and audit in the admin console (issue 11 item 5), in a real Chromium against a real
``toolkeeper serve``: the calls list shows the agent's call and filters it by status; the
audit is searched by agent and event type and paged with its cursor; a reversed time range
is refused in the page with a reason; the chain verifies intact; tools' health is shown; an
operator resolves an unknown call, and a refused resolution shows the API's reason."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage
from tests.ui.shown import short

LOST = """\
version: 1
tools:
  - native: tests.api.exec_fixtures:lost
  - native: tests.api.exec_fixtures:Bank
profiles:
  - {name: loser, autonomy: 3, scopes: [bank], activations: [{tool: lost}, {tool: bank}]}
agents:
  - {name: lost-bot, profile: loser}
"""
"""``lost`` fails after it may have acted: its outcome is ``unknown``; ``bank.pay`` is
compensatable (by ``refund``)."""


@pytest.fixture(scope="module")
def lost_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "agent": TokenSpec("agent", "lost-bot")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-lost"), LOST, tokens) as srv:
        yield srv


def _login(page: Page, server: Server, who: str) -> None:
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens[who])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))


def _rest(server: Server, who: str, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens[who]}"})
    return resp.json()


def _pay(server: Server, invoice: str, ledger: Path, **fields: Any) -> dict[str, Any]:
    body = {"tool": "pay", "arguments": {"invoice": invoice, "path": str(ledger)}, **fields}
    result: dict[str, Any] = _rest(server, "agent", "POST", "/tools/execute", json=body)
    return result


def _seqs(page: Page) -> list[int]:
    return [int(s) for s in page.locator("#audit-table tbody tr td:first-child").all_inner_texts()]


def test_the_calls_list_shows_the_agents_call_and_filters_by_status(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    asked = _pay(server, "inv-calls", ledger)
    _rest(server, "approver", "POST", f"/approvals/{asked['approval_id']}/approve", json={})
    ran = _pay(server, "inv-calls", ledger, approval_id=asked["approval_id"])
    assert ran["status"] == "succeeded", ran
    page = console_page.page
    _login(page, server, "admin")
    page.get_by_role("button", name="Calls", exact=True).click()
    row = page.locator(f'#call-table tr[data-call-id="{ran["call_id"]}"]')
    expect(row).to_contain_text("pay-bot")
    expect(row).to_contain_text("succeeded")
    link = row.get_by_role("link", name=short(ran["call_id"]))  # shortened, to the call's page
    expect(link).to_have_attribute("href", "#call/" + ran["call_id"])
    expect(row.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    expect(page.locator("#call-page")).to_have_text(re.compile(r"page 1 of \d+"))
    page.get_by_label("Call status").select_option("failed")
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ calls"))
    expect(row).to_have_count(0)
    page.get_by_label("Call status").select_option("succeeded")
    expect(row).to_contain_text("pay-bot")
    assert console_page.console.errors == []


def test_the_audit_is_searched_by_agent_and_type_and_paged_with_the_cursor(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    for n in range(6):
        assert _pay(server, f"inv-audit-{n}", tmp_path / "l.txt")["status"] == "approval_required"
    events = _rest(server, "admin", "GET", "/audit?agent=pay-bot&limit=1000")["events"]
    kind, count = Counter(e["type"] for e in events).most_common(1)[0]
    assert count >= 6, events
    page = console_page.page
    _login(page, server, "admin")
    page.get_by_role("button", name="Audit", exact=True).click()
    expect(page.locator("#health-table")).to_contain_text("pay")
    page.locator("#audit-filter").get_by_label("Agent").fill("pay-bot")
    page.get_by_label("Event types").fill(kind)
    page.get_by_label("Page size").select_option("5")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#audit-page")).to_have_text("page 1 · 5 events")
    rows = page.locator("#audit-table tbody tr")
    for i in range(5):
        expect(rows.nth(i)).to_contain_text(kind)
        expect(rows.nth(i)).to_contain_text("pay-bot")
    first = _seqs(page)
    page.get_by_role("button", name="Next").click()
    expect(page.locator("#audit-page")).to_have_text(re.compile(r"page 2 · [1-5] events"))
    second = _seqs(page)
    assert min(second) > max(first), (first, second)
    page.get_by_role("button", name="Previous").click()
    expect(page.locator("#audit-page")).to_have_text("page 1 · 5 events")
    assert _seqs(page) == first
    page.get_by_role("button", name="Verify the hash chain").click()
    expect(page.locator("#verify-result")).to_have_text(re.compile(r"^intact: \d+ events"))
    assert console_page.console.errors == []


def test_a_reversed_time_range_is_refused_with_a_reason_and_nothing_is_asked(
        console_page: ConsolePage, server: Server) -> None:
    page = console_page.page
    _login(page, server, "admin")
    page.get_by_role("button", name="Audit", exact=True).click()
    expect(page.locator("#audit-page")).to_have_text(re.compile(r"page 1 · \d+ events"))
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/audit?" in r.url else None)
    page.get_by_label("Since").fill("2030-01-02T00:00:00")
    page.get_by_label("Until").fill("2030-01-01T00:00:00")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#audit-error")).to_have_text(
        "invalid_arguments: the time range ends before it starts")
    assert asked == []
    assert console_page.console.errors == []


def _unknown(server: Server, x: int) -> str:
    body = {"tool": "lost", "arguments": {"x": x}}
    done = _rest(server, "agent", "POST", "/tools/execute", json=body)
    assert done["status"] == "unknown", done
    call_id: str = done["call_id"]
    return call_id


def test_an_operator_resolves_an_unknown_call_and_a_refusal_shows_the_reason(
        console_page: ConsolePage, lost_server: Server) -> None:
    first, second = _unknown(lost_server, 1), _unknown(lost_server, 2)
    page = console_page.page
    _login(page, lost_server, "admin")
    page.get_by_role("button", name="Calls", exact=True).click()
    rows = page.locator("#call-table tbody tr")
    expect(rows.first).to_contain_text("unknown")  # unknown outcomes first
    row = page.locator(f'#call-table tr[data-call-id="{first}"]')
    row.get_by_role("button", name="Resolve…").click()
    page.get_by_label("real outcome").select_option("failed")
    page.get_by_label("resolution note").fill("checked the ledger: nothing sent")
    page.get_by_role("button", name="Record this outcome").click()
    expect(page.locator("#call-result")).to_have_text(
        re.compile(f"call {first} resolved as failed by "))
    expect(row).to_contain_text("failed")
    expect(row.get_by_role("button", name="Resolve…")).to_have_count(0)
    assert _rest(lost_server, "admin", "GET", f"/calls/{first}")["state"] == "failed"
    other = page.locator(f'#call-table tr[data-call-id="{second}"]')
    other.get_by_role("button", name="Resolve…").click()
    _rest(lost_server, "admin", "POST", f"/calls/{second}/resolve", json={"status": "succeeded"})
    page.get_by_role("button", name="Record this outcome").click()  # resolved meanwhile
    expect(page.locator("#call-result")).to_have_text(re.compile(r"^409 invalid_state: "))
    expect(page.locator("#call-result")).to_have_class("error")
    assert _rest(lost_server, "admin", "GET", f"/calls/{second}")["state"] == "succeeded"


def test_a_compensatable_call_is_compensated_from_the_calls_list(
        console_page: ConsolePage, lost_server: Server) -> None:
    body = {"tool": "bank", "action": "pay", "arguments": {"invoice": "inv-comp", "amount": 5}}
    paid = _rest(lost_server, "agent", "POST", "/tools/execute", json=body)
    assert paid["status"] == "succeeded", paid
    page = console_page.page
    _login(page, lost_server, "admin")
    page.get_by_role("button", name="Calls", exact=True).click()
    row = page.locator(f'#call-table tr[data-call-id="{paid["call_id"]}"]')
    row.get_by_role("button", name="Side effects…").click()
    effect = page.locator("#call-detail p", has_text=paid["side_effect_id"])
    expect(effect).to_contain_text("compensatable")
    effect.get_by_role("button", name="Compensate").click()
    expect(page.locator("#call-result")).to_have_text(re.compile(r"^compensation \S+: succeeded"))
    kinds = [e["type"] for e in _rest(lost_server, "admin", "GET",
                                      f"/audit?call_id={paid['call_id']}")["events"]]
    assert "side_effect.compensated" in kinds, kinds
