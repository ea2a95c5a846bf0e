"""The Audit tab's search, chain verification and tools' health (issue 11 item 5), in a real
Chromium against a real ``toolkeeper serve``: a search by call id and one by tool list only
that call's or tool's events (as many as the API has); a time range before the events finds
none and one around them finds them all; the health table shows a failing tool degraded
with its error count and last error; and after an event is edited in the database, the
chain verification reports it BROKEN with the problem."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage
from tests.ui.shown import short

CONFIG = """\
version: 1
tools:
  - native: tests.api.exec_fixtures:add
  - native: tests.api.exec_fixtures:unreachable
profiles:
  - {name: auto, autonomy: 3, activations: [{tool: add}, {tool: unreachable}]}
agents:
  - {name: audit-bot, profile: auto}
"""
"""``unreachable`` fails (retryably) every time: three failures in a row make it degraded."""

CALL, TOOL = 5, 4
"""Columns of the audit table: call id, tool."""


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "agent": TokenSpec("agent", "audit-bot")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-audit"), CONFIG, tokens) as srv:
        for n in range(2):
            assert _call(srv, "add", {"a": n, "b": 1})["status"] == "succeeded"
        for n in range(3):
            assert _call(srv, "unreachable", {"x": n})["status"] == "failed"
        yield srv


def _rest(server: Server, who: str, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens[who]}"})
    assert resp.status_code < 400, resp.text
    return resp.json()


def _call(server: Server, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = _rest(server, "agent", "POST", "/tools/execute",
                                   json={"tool": tool, "arguments": args})
    return result


def _audit_tab(page: Page, server: Server) -> Locator:
    page.goto(server.url + "/ui/#audit")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#audit-page")).to_have_text(re.compile(r"^page 1 · \d+ events$"))
    return page.locator("#audit-filter")


def _search(page: Page, form: Locator, **fields: str) -> None:
    for label in ("Call id", "Tool", "Since", "Until"):
        form.get_by_label(label, exact=True).fill(fields.get(label, ""))
    form.get_by_role("button", name="Search").click()


def _column(page: Page, index: int) -> list[str]:
    return page.locator(f"#audit-table tbody tr td:nth-child({index + 1})").all_inner_texts()


def _local(page: Page, when: datetime) -> str:
    """``when`` as the browser's ``datetime-local`` value (its own time zone)."""
    value: str = page.evaluate(
        "(ms) => new Date(ms - new Date(ms).getTimezoneOffset() * 60000)"
        ".toISOString().slice(0, 19)", when.timestamp() * 1000)
    return value


def test_the_audit_is_searched_by_call_tool_and_time_range(console_page: ConsolePage,
                                                           audited: Server) -> None:
    page = console_page.page
    form = _audit_tab(page, audited)
    every = _rest(audited, "admin", "GET", "/audit?limit=1000")["events"]
    first = next(e for e in every if e["tool"] == "unreachable" and e["call_id"])
    of_call = [e for e in every if e["call_id"] == first["call_id"]]
    assert 1 <= len(of_call) < len(every), of_call
    _search(page, form, **{"Call id": first["call_id"]})
    expect(page.locator("#audit-page")).to_have_text(f"page 1 · {len(of_call)} events")
    links = page.locator(f"#audit-table tbody tr td:nth-child({CALL + 1}) a")
    assert set(links.evaluate_all("(as) => as.map((a) => a.getAttribute('href'))")) == {
        "#call/" + first["call_id"]}  # every call id is a link to its page
    assert set(_column(page, CALL)) == {short(first["call_id"])}  # shown shortened

    of_tool = [e for e in every if e["tool"] == "add"]
    assert 2 <= len(of_tool) < len(every), of_tool
    _search(page, form, Tool="add")
    expect(page.locator("#audit-page")).to_have_text(f"page 1 · {len(of_tool)} events")
    assert set(_column(page, TOOL)) == {"add"}

    start = min(datetime.fromisoformat(e["ts"]) for e in of_tool).replace(microsecond=0)
    before = start.timestamp() - 60
    _search(page, form, Tool="add", Until=_local(page, datetime.fromtimestamp(before)))
    expect(page.locator("#audit-page")).to_have_text("page 1 · 0 events")
    _search(page, form, Tool="add", Since=_local(page, datetime.fromtimestamp(before)))
    expect(page.locator("#audit-page")).to_have_text(f"page 1 · {len(of_tool)} events")
    assert console_page.console.errors == []


def test_a_failing_tools_health_is_shown(console_page: ConsolePage, audited: Server) -> None:
    health = {h["name"]: h for h in _rest(audited, "admin", "GET", "/tools/health")}
    assert (health["unreachable"]["health"], health["unreachable"]["consecutive_errors"]) == (
        "degraded", 3), health
    page = console_page.page
    _audit_tab(page, audited)
    row = page.locator("#health-table tbody tr", has_text="unreachable")
    expect(row.locator("td")).to_have_text(
        ["unreachable", "degraded", "3", health["unreachable"]["last_error"], "—"])
    expect(row.locator("td").nth(1)).to_have_class("health-degraded")
    ok = page.locator("#health-table tbody tr", has_text="add")
    expect(ok.locator("td").nth(1)).to_have_text("healthy")
    last = ok.locator("td").nth(4).locator("time")  # relative, the exact time on hover
    expect(last).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    expect(last).to_have_attribute("title", re.compile(r"\d"))


def test_an_edited_event_makes_the_verification_report_a_broken_chain(
        console_page: ConsolePage, audited: Server) -> None:
    page = console_page.page
    _audit_tab(page, audited)
    page.get_by_role("button", name="Verify the hash chain").click()
    result = page.locator("#verify-result")
    expect(result).to_have_text(re.compile(r"^intact: \d+ events$"))
    with sqlite3.connect(audited.db.removeprefix("sqlite:///")) as db:
        edited = db.execute("UPDATE audit_events SET reason = 'nothing to see' "
                            "WHERE tenant_key = 'default' AND seq = 2").rowcount
    assert edited == 1
    page.get_by_role("button", name="Verify the hash chain").click()
    expect(result).to_have_text(re.compile(r"^BROKEN: \d+ events — .*\b2\b"))
    expect(result).to_have_class("error")
