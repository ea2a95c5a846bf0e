"""A profile edited in the console (issue 11 item 3), in a real Chromium against a real
``toolkeeper serve``: the admin changes its autonomy, scopes and description and sets a
per-activation gate override in the Tool Picker; the stored profile is what was typed, and
the agent's next call meets the stricter gate (``approve``, then ``deny``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

CONFIG = """\
version: 1
tools:
  - builtin: calculate
profiles:
  - {name: desk, autonomy: 2, activations: [{tool: calculate}]}
agents:
  - {name: desk-bot, profile: desk}
"""
"""``calculate`` is pure and low risk: at autonomy 2 it runs without a gate."""


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "agent": TokenSpec("agent", "desk-bot")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-gates"), CONFIG, tokens) as srv:
        yield srv


def _rest(server: Server, who: str, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens[who]}"})
    return resp.json()


def _calculate(server: Server, n: int) -> dict[str, Any]:
    body = {"tool": "calculate", "arguments": {"expression": f"{n} + 1"}}
    result: dict[str, Any] = _rest(server, "agent", "POST", "/tools/execute", json=body)
    return result


def _edit_desk(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/#agents")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ agents, \d+ profiles"))
    page.locator('#profile-table tr[data-profile="desk"]').get_by_role(
        "button", name="Edit").click()
    expect(page.locator("#picker-count")).to_have_text("1 selected: calculate")


def _gate(page: Page, value: str) -> None:
    details = page.locator('#picker-policies details[data-tool="calculate"]')
    if details.get_attribute("open") is None:
        page.get_by_text("Policy and gates of calculate").click()
    page.get_by_label("gates of calculate").fill(value)
    # every save says the same: cleared first, the text is this save's answer, not the last
    page.locator("#agents-result").evaluate("(e) => { e.textContent = ''; }")
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#agents-result")).to_have_text("profile desk saved: 1 tools")


def test_a_gate_override_and_the_profiles_fields_are_saved_and_applied(
        console_page: ConsolePage, desk: Server) -> None:
    assert _calculate(desk, 1)["status"] == "succeeded"
    page = console_page.page
    _edit_desk(page, desk)
    page.locator("#profile-editor").get_by_label("Autonomy").select_option("1")
    page.get_by_label("Scopes", exact=True).fill("math, reports")
    page.locator("#profile-editor").get_by_label("Description").fill("the front desk")
    _gate(page, '{"run": "approve"}')
    stored = _rest(desk, "admin", "GET", "/profiles/desk")
    assert (stored["autonomy"], stored["scopes"], stored["description"]) == (
        1, ["math", "reports"], "the front desk")
    assert [a["gates"] for a in stored["activations"]] == [{"run": "approve"}]
    expect(page.locator('#profile-table tr[data-profile="desk"]')).to_contain_text("math, reports")
    waiting = _calculate(desk, 2)
    assert (waiting["status"], waiting["gate"]) == ("approval_required", "approve"), waiting

    _gate(page, '{"run": "deny"}')
    refused = _calculate(desk, 3)
    assert refused["status"] == "denied", refused
    assert [a["gates"] for a in _rest(desk, "admin", "GET", "/profiles/desk")["activations"]] \
        == [{"run": "deny"}]

    _gate(page, "{}")  # the override removed: the tool's own gate again
    assert _calculate(desk, 4)["status"] == "succeeded"
    assert console_page.console.errors == []
